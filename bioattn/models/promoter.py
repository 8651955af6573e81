"""Promoter classifier: single-nucleotide tokens, a [CLS] token and a pre-norm transformer encoder.

Input: token ids from :mod:`bioattn.data.dna` (right-padded, no [CLS]; the model prepends it).
Pipeline: nucleotide embedding → optional masked Conv1d ("conv embedding", residual, keeps one token per
nucleotide) → prepend [CLS] → learned positional encoding → :class:`~bioattn.attention.TransformerEncoder`
with the padding mask → MLP head on the [CLS] output → one logit (promoter vs not).

Padding never changes a prediction: PAD embeddings are zeroed before and after the convolution (so the
convolution sees the same zeros past the end of a sequence whether or not the batch is padded), and PAD keys
are masked in attention. With ``rc_average=True`` :meth:`PromoterClassifier.predict_logits` averages the
logits of the sequence and of its reverse complement, so ``p(seq) == p(revcomp(seq))`` exactly.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import LearnedPositionalEncoding, TransformerEncoder
from bioattn.data.dna import CLS_ID, PAD_ID, VOCAB_SIZE, collate_tokens, reverse_complement_ids
from bioattn.models.base import PretrainedModel

__all__ = ["PromoterClassifier"]


class PromoterClassifier(PretrainedModel):
    """Binary promoter classifier over DNA token ids.

    Args:
        max_len: longest sequence (in nucleotides) the model accepts; longer input is an error.
        d_model, num_heads, num_layers, dim_feedforward, dropout: transformer size (see
            :class:`~bioattn.attention.TransformerEncoder`); ``dropout`` regularises the residual branches and
            the head, not the attention weights (that would take CPU training off the fused kernel).
        conv_kernel: odd kernel size of the residual Conv1d embedding; 0 disables it.
        conv_layers: number of residual Conv1d blocks of that kernel (each keeps one token per nucleotide).
        rc_average: default of :meth:`predict_logits`: average over both strands.
    """

    def __init__(
        self,
        *,
        max_len: int = 300,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        dim_feedforward: int | None = None,
        dropout: float = 0.0,
        conv_kernel: int = 15,
        conv_layers: int = 1,
        rc_average: bool = True,
    ) -> None:
        super().__init__()
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        if conv_kernel < 0 or (conv_kernel and conv_kernel % 2 == 0):
            raise ValueError(f"conv_kernel must be 0 (off) or a positive odd number, got {conv_kernel}")
        if conv_layers < 0:
            raise ValueError(f"conv_layers must be >= 0, got {conv_layers}")
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.config = {
            "max_len": max_len,
            "d_model": d_model,
            "num_heads": num_heads,
            "num_layers": num_layers,
            "dim_feedforward": dim_feedforward,
            "dropout": dropout,
            "conv_kernel": conv_kernel,
            "conv_layers": conv_layers,
            "rc_average": rc_average,
        }
        self.max_len = max_len
        self.rc_average = rc_average
        self.embedding = nn.Embedding(VOCAB_SIZE, d_model, padding_idx=PAD_ID)
        self.convs = nn.ModuleList(
            nn.Conv1d(d_model, d_model, conv_kernel, padding=conv_kernel // 2) for _ in range(conv_layers if conv_kernel else 0)
        )
        self.positional = LearnedPositionalEncoding(max_len + 1, d_model)
        self.encoder = TransformerEncoder(
            d_model, num_heads, num_layers, dim_feedforward=dim_feedforward, dropout=dropout, attention_dropout=0.0,
            norm_first=True,
        )
        self.head = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_model, 1))

    def _check_input(self, ids: Tensor, padding_mask: Tensor | None) -> Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must be (B, L), got shape {tuple(ids.shape)}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"sequence length {ids.shape[1]} exceeds this model's max_len={self.max_len}")
        if padding_mask is None:
            return torch.zeros_like(ids, dtype=torch.bool)
        if padding_mask.shape != ids.shape or padding_mask.dtype != torch.bool:
            raise ValueError(f"padding_mask must be bool {tuple(ids.shape)}, got {padding_mask.dtype} {tuple(padding_mask.shape)}")
        return padding_mask

    def encode(
        self, ids: Tensor, padding_mask: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """Encoder states of ``[CLS] + sequence``.

        ``ids: (B, L)`` long, ``padding_mask: (B, L)`` bool (True = PAD) →
        ``(hidden (B, 1+L, D), key_padding_mask (B, 1+L) bool, [attention (B, H, 1+L, 1+L) per layer] or None)``;
        position 0 is [CLS].
        """
        padding_mask = self._check_input(ids, padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(self.embedding.weight.dtype)
        x = self.embedding(ids) * keep
        for conv in self.convs:
            x = (x + F.gelu(conv(x.transpose(1, 2)).transpose(1, 2))) * keep
        cls = self.embedding.weight[CLS_ID].expand(ids.shape[0], 1, -1)
        x = self.positional(torch.cat([cls, x], dim=1))
        key_padding_mask = F.pad(padding_mask, (1, 0), value=False)
        hidden, weights = self.encoder(x, key_padding_mask=key_padding_mask, need_weights=need_weights)
        return hidden, key_padding_mask, weights

    def forward(self, ids: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Single-strand promoter logits ``(B,)`` for ``ids: (B, L)``, ``padding_mask: (B, L)`` (True = PAD)."""
        hidden, _, _ = self.encode(ids, padding_mask)
        return self.head(hidden[:, 0]).squeeze(-1)

    def predict_logits(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """Inference logits ``(B,)``; with ``rc_average`` (default: the model's setting) the mean of both strands.

        The two strands run as two separate, identically shaped passes, so the result for a sequence and for
        its reverse complement is bit-for-bit the same.
        """
        logits = self(ids, padding_mask)
        if self.rc_average if rc_average is None else rc_average:
            logits = (logits + self(reverse_complement_ids(ids, padding_mask), padding_mask)) / 2
        return logits

    @torch.no_grad()
    def predict_proba(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """Probability of promoter ``(B,)`` (eval mode is the caller's business; see :meth:`predict_logits`)."""
        return torch.sigmoid(self.predict_logits(ids, padding_mask, rc_average=rc_average))

    @torch.no_grad()
    def predict_tokens(
        self, token_arrays: Sequence[np.ndarray], *, batch_size: int = 256, rc_average: bool | None = None
    ) -> np.ndarray:
        """Promoter probabilities ``(N,)`` float64 for N token arrays (see :func:`bioattn.data.dna.encode`).

        Runs in eval mode in batches of ``batch_size`` (the mode is restored afterwards); padding does not
        change a prediction, so the batching never changes the numbers beyond float rounding.
        """
        was_training = self.training
        self.eval()
        device = self.embedding.weight.device
        out = np.empty(len(token_arrays), dtype=np.float64)
        try:
            for start in range(0, len(token_arrays), batch_size):
                ids, padding_mask = collate_tokens(token_arrays[start : start + batch_size])
                probs = self.predict_proba(ids.to(device), padding_mask.to(device), rc_average=rc_average)
                out[start : start + len(ids)] = probs.double().cpu().numpy()
        finally:
            self.train(was_training)
        return out
