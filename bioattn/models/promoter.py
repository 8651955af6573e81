"""Promoter classifier: single-nucleotide tokens, a [CLS] token and a pre-norm transformer encoder.

Token ids (the model prepends [CLS]) → embedding → residual Conv1d blocks →
:class:`~bioattn.attention.TransformerEncoder` → MLP head on [CLS]. Padding never changes a prediction;
``rc_average=True`` averages both strands exactly.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import LearnedPositionalEncoding, TransformerEncoder
from bioattn.attention.inputs import check_token_ids
from bioattn.data.dna import CLS_ID, PAD_ID, VOCAB_SIZE, collate_tokens, encode_sequences, strand_average
from bioattn.models.base import PretrainedModel

__all__ = ["PromoterClassifier", "token_table_conv1d"]


def token_table_conv1d(conv: nn.Conv1d, embedding_weight: Tensor, ids: Tensor, pad_id: int) -> Tensor:
    """``conv(embedding_weight[ids].transpose(1, 2)).transpose(1, 2)`` with the ``pad_id`` embedding taken as zero,
    computed from per-token tables ``(K, V, D_out)``: ``ids (B, L)`` → ``(B, L, D_out)``."""
    kernel = conv.kernel_size[0]
    if kernel % 2 == 0 or conv.stride != (1,) or conv.dilation != (1,) or conv.padding != (kernel // 2,) or conv.groups != 1:
        raise ValueError(f"token_table_conv1d needs an odd kernel, stride 1, no dilation or groups and padding kernel // 2; got {conv}")
    vocab, width = embedding_weight.shape[0], conv.out_channels
    embeddings = embedding_weight.index_fill(0, torch.tensor([pad_id], device=ids.device), 0.0)
    tables = torch.einsum("oik,vi->kvo", conv.weight, embeddings).reshape(kernel * vocab, width)
    windows = F.pad(ids, (kernel // 2, kernel // 2), value=pad_id).unfold(1, kernel, 1)  # (B, L, K)
    rows = (windows + torch.arange(kernel, device=ids.device) * vocab).reshape(-1, kernel)
    out = F.embedding_bag(rows, tables, mode="sum").view(*ids.shape, width)
    return out if conv.bias is None else out + conv.bias


class PromoterClassifier(PretrainedModel):
    """Promoter (or any DNA sequence class) classifier over DNA token ids.

    Args:
        dropout: on the residual branches and the head, not the attention weights.
        conv_kernel, conv_layers: odd kernel size (0: off) and number of the residual Conv1d blocks.
        rc_average: default of :meth:`predict_logits`: average over both strands.
        num_classes, class_names, threshold: 2 (one logit, sigmoid) or more classes, their names (default ``"0"``,
            ``"1"``, ...), and the probability from which a two-class model predicts class 1.
    """

    def __init__(self, *, max_len: int = 300, embed_dim: int = 64, num_heads: int = 4, num_layers: int = 2,
                 dim_feedforward: int | None = None, dropout: float = 0.0, conv_kernel: int = 15,
                 conv_layers: int = 1, rc_average: bool = True, num_classes: int = 2,
                 class_names: Sequence[str] | None = None, threshold: float = 0.5,
                 head_temperature: bool = False) -> None:
        super().__init__()
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        if conv_kernel < 0 or (conv_kernel and conv_kernel % 2 == 0):
            raise ValueError(f"conv_kernel must be 0 (off) or a positive odd number, got {conv_kernel}")
        if conv_layers < 0:
            raise ValueError(f"conv_layers must be >= 0, got {conv_layers}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        class_names = [str(i) for i in range(num_classes)] if class_names is None else [str(c) for c in class_names]
        if len(class_names) != num_classes or len(set(class_names)) != num_classes:
            raise ValueError(f"class_names must be {num_classes} distinct names, got {class_names}")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
        self.config = {
            "max_len": max_len, "embed_dim": embed_dim, "num_heads": num_heads, "num_layers": num_layers,
            "dim_feedforward": dim_feedforward, "dropout": dropout, "conv_kernel": conv_kernel,
            "conv_layers": conv_layers, "rc_average": rc_average, "num_classes": num_classes,
            "class_names": class_names, "threshold": threshold, "head_temperature": head_temperature}
        self.max_len, self.rc_average, self.num_classes = max_len, rc_average, num_classes
        self.class_names, self.threshold = class_names, threshold
        self.embedding = nn.Embedding(VOCAB_SIZE, embed_dim, padding_idx=PAD_ID)
        self.convs = nn.ModuleList(nn.Conv1d(embed_dim, embed_dim, conv_kernel, padding=conv_kernel // 2)
                                   for _ in range(conv_layers if conv_kernel else 0))
        #: Compute the first convolution with :func:`token_table_conv1d` on a CPU; False, a forward hook on
        #: ``embedding``, a GPU or ``torch.compile`` run the ``nn.Conv1d`` on the embedding output instead.
        self.conv_from_token_tables = True
        self.positional = LearnedPositionalEncoding(max_len + 1, embed_dim)
        self.encoder = TransformerEncoder(embed_dim, num_heads, num_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout, attention_dropout=0.0, norm_first=True,
                                          head_temperature=head_temperature)
        self.head = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Dropout(dropout),
                                  nn.Linear(embed_dim, 1 if self.binary else num_classes))

    @property
    def binary(self) -> bool:
        """Two classes: one logit ``(B,)`` and a sigmoid; otherwise C logits ``(B, C)``."""
        return self.num_classes == 2

    def _check_input(self, ids: Tensor, padding_mask: Tensor | None) -> Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must be (B, L), got shape {tuple(ids.shape)}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"sequence length {ids.shape[1]} exceeds this model's max_len={self.max_len}")
        check_token_ids(ids, VOCAB_SIZE, "ids", "(B, L)")
        if padding_mask is None:
            return torch.zeros_like(ids, dtype=torch.bool)
        if padding_mask.shape != ids.shape or padding_mask.dtype != torch.bool:
            raise ValueError(f"padding_mask must be bool {tuple(ids.shape)}, got {padding_mask.dtype} {tuple(padding_mask.shape)}")
        return padding_mask

    def encode(self, ids: Tensor, padding_mask: Tensor | None = None, *, need_weights: bool = False,
               cls_only: bool = False) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """Encoder states of ``[CLS] + sequence``: ``ids (B, L)``, ``padding_mask (B, L)`` (True = PAD) →
        ``(hidden (B, 1+L, D), key_padding_mask (B, 1+L), [attention (B, H, 1+L, 1+L) per layer] or None)``.
        ``cls_only``: the last layer computes the [CLS] state alone, ``hidden (B, 1, D)``."""
        padding_mask = self._check_input(ids, padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(self.embedding.weight.dtype)
        x = self.embedding(ids) * keep
        from_tables = (self.conv_from_token_tables and ids.device.type == "cpu" and not torch.compiler.is_compiling()
                       and not self.embedding._forward_hooks)
        for index, conv in enumerate(self.convs):
            if index == 0 and from_tables:
                branch = token_table_conv1d(conv, self.embedding.weight, ids.masked_fill(padding_mask, PAD_ID), PAD_ID)
            else:
                branch = conv(x.transpose(1, 2)).transpose(1, 2)
            x = (x + F.gelu(branch)) * keep
        cls = self.embedding.weight[CLS_ID].expand(ids.shape[0], 1, -1)
        x = self.positional(torch.cat([cls, x], dim=1))
        key_padding_mask = F.pad(padding_mask, (1, 0), value=False)
        # An unpadded batch attends without a mask (a compiled graph keeps it).
        attention_mask = key_padding_mask if torch.compiler.is_compiling() or bool(padding_mask.any()) else None
        hidden, weights = self.encoder(x, key_padding_mask=attention_mask, need_weights=need_weights,
                                       first_outputs=1 if cls_only else None)
        return hidden, key_padding_mask, weights

    def forward(self, ids: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Single-strand logits ``(B,)`` (two classes) or ``(B, C)`` of ``ids (B, L)``, ``padding_mask (B, L)``."""
        hidden, _, _ = self.encode(ids, padding_mask, cls_only=True)
        with torch.autocast(hidden.device.type, enabled=False):  # fp32 head: bf16 would round probabilities to 1/256
            logits = self.head(hidden[:, 0].float())
        return logits.squeeze(-1) if self.binary else logits

    def predict_logits(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """Inference logits (see :meth:`forward`); with ``rc_average`` (default: the model's) the mean of both
        strands, run as two identically shaped passes."""
        if self.rc_average if rc_average is None else rc_average:
            return strand_average(lambda strand: self(strand, padding_mask), ids, padding_mask)
        return self(ids, padding_mask)

    @torch.no_grad()
    def proba_from_ids(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """Probability of class 1 ``(B,)`` (two classes) or of each class ``(B, C)`` for token ids ``(B, L)``."""
        logits = self.predict_logits(ids, padding_mask, rc_average=rc_average)
        return torch.sigmoid(logits) if self.binary else torch.softmax(logits, dim=-1)

    @property
    def classes_(self) -> np.ndarray:
        """``class_names`` as an array: the labels :meth:`predict` returns, in :meth:`predict_proba`'s column order."""
        return np.asarray(self.class_names)

    def class_probabilities(self, probs: np.ndarray) -> np.ndarray:
        """``(N, C)`` probability of every class from this model's outputs ``(N,)`` (two classes) or ``(N, C)``."""
        probs = np.asarray(probs, dtype=np.float64)
        return np.stack([1.0 - probs, probs], axis=1) if probs.ndim == 1 else probs

    def predicted_classes(self, probs: np.ndarray) -> np.ndarray:
        """Class indices ``(N,)`` from probabilities ``(N,)`` (class 1 when ``>= threshold``) or ``(N, C)`` (argmax)."""
        probs = np.asarray(probs)
        return (probs >= self.threshold).astype(np.int64) if probs.ndim == 1 else probs.argmax(axis=1)

    def predict_proba(self, sequences: str | Sequence[str], *, batch_size: int = 256,
                      rc_average: bool | None = None) -> np.ndarray:
        """Class probabilities ``(N, C)`` float64 of DNA strings, columns in :attr:`classes_` order; ``rc_average``
        (default: the run's) averages both strands."""
        return self.class_probabilities(self.predict_tokens(encode_sequences(sequences, max_len=self.max_len),
                                                            batch_size=batch_size, rc_average=rc_average))

    def predict(self, sequences: str | Sequence[str], *, batch_size: int = 256,
                rc_average: bool | None = None) -> np.ndarray:
        """Class labels ``(N,)`` (:attr:`classes_` values) of DNA strings; arguments as :meth:`predict_proba`."""
        probs = self.predict_tokens(encode_sequences(sequences, max_len=self.max_len), batch_size=batch_size,
                                    rc_average=rc_average)
        return self.classes_[self.predicted_classes(probs)]

    @torch.no_grad()
    def predict_tokens(self, token_arrays: Sequence[np.ndarray], *, batch_size: int = 256,
                       rc_average: bool | None = None) -> np.ndarray:
        """Probability of class 1 ``(N,)`` (two classes) or of each class ``(N, C)`` float64 for N token arrays, in
        eval mode, batched by similar length."""
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        out = np.empty((len(token_arrays),) if self.binary else (len(token_arrays), self.num_classes), dtype=np.float64)
        order = np.argsort([len(t) for t in token_arrays], kind="stable")
        try:
            for start in range(0, len(order), batch_size):
                chosen = order[start : start + batch_size]
                ids, padding_mask = collate_tokens([token_arrays[i] for i in chosen])
                probs = self.proba_from_ids(ids.to(device), padding_mask.to(device), rc_average=rc_average)
                out[chosen] = probs.double().cpu().numpy()
        finally:
            self.train(was_training)
        return out
