"""Promoter classifier: single-nucleotide tokens, a [CLS] token and a pre-norm transformer encoder.

Input: token ids from :mod:`bioattn.data.dna` (right-padded, no [CLS]; the model prepends it).
Pipeline: nucleotide embedding → optional masked Conv1d ("conv embedding", residual, keeps one token per
nucleotide) → prepend [CLS] → learned positional encoding → :class:`~bioattn.attention.TransformerEncoder`
with the padding mask (its last layer computes the [CLS] output alone: ``first_outputs=1``) → MLP head on the
[CLS] output → one logit (two classes: promoter vs not, sigmoid) or
C logits (C > 2 classes, softmax). The first convolution reads the tokens directly (:func:`token_table_conv1d`,
the same function at a fraction of the cost); the head runs in fp32 under autocast.

Padding never changes a prediction: PAD embeddings are zeroed before and after the convolution (so the
convolution sees the same zeros past the end of a sequence whether or not the batch is padded), and PAD keys
are masked in attention. With ``rc_average=True`` :meth:`PromoterClassifier.predict_logits` averages the
logits of the sequence and of its reverse complement, so ``p(seq) == p(revcomp(seq))`` exactly.

Predictions follow scikit-learn's meanings: :meth:`PromoterClassifier.predict_proba` gives the ``(N, C)`` class
probabilities of DNA strings, :meth:`PromoterClassifier.predict` their class labels (:attr:`classes_`);
:meth:`~PromoterClassifier.proba_from_ids` and :meth:`~PromoterClassifier.predict_tokens` are the same numbers
from token ids (one batch) and token arrays.

The saved config remembers how the model evaluates: ``max_len``, ``rc_average``, ``class_names`` (the labels
of the training file, in class-index order) and the decision ``threshold`` of a two-class model. A config
saved before multi-class support (no ``num_classes``) loads as the binary model it is.
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
    """``conv`` applied to the embeddings of ``ids``, computed from per-token tables: ``(B, L)`` → ``(B, L, D_out)``.

    Equals ``conv(embedding_weight[ids].transpose(1, 2)).transpose(1, 2)`` with the ``pad_id`` embedding taken as
    zero (stride 1, no dilation, ``padding = kernel // 2``, odd kernel): tap k of the convolution maps token v to
    ``W_k · E_v``, so the output at position t is the bias plus the sum over taps of table ``T[k, ids[t + k - K//2]]``
    (positions outside the sequence read ``pad_id``, i.e. zero). Costs ``O(K·V·D²)`` for the ``(K, V, D_out)`` tables
    plus ``O(B·L·K·D)`` for the lookups, instead of ``O(B·L·K·D²)``: with a vocabulary of a few tokens the lookups
    are the cheap part, and the backward pass is a scatter-add of the same size.
    """
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
        max_len: longest sequence (in nucleotides) the model accepts; longer input is an error.
        embed_dim, num_heads, num_layers, dim_feedforward, dropout: transformer size (see
            :class:`~bioattn.attention.TransformerEncoder`); ``dropout`` regularises the residual branches and
            the head, not the attention weights (that would take CPU training off the fused kernel).
        conv_kernel: odd kernel size of the residual Conv1d embedding; 0 disables it.
        conv_layers: number of residual Conv1d blocks of that kernel (each keeps one token per nucleotide).
        rc_average: default of :meth:`predict_logits`: average over both strands.
        num_classes: 2 (one logit, sigmoid: the probability of class 1) or more (C logits, softmax).
        class_names: the name of each class index (default ``"0"``, ``"1"``, ...), e.g. the labels of the
            training file; prediction outputs use them.
        threshold: a two-class model predicts class 1 when its probability is ``>= threshold``.
        head_temperature: a learnable temperature per attention head (``num_heads`` parameters per layer, see
            :class:`~bioattn.attention.MultiHeadAttention`); off by default.
    """

    def __init__(
        self,
        *,
        max_len: int = 300,
        embed_dim: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        dim_feedforward: int | None = None,
        dropout: float = 0.0,
        conv_kernel: int = 15,
        conv_layers: int = 1,
        rc_average: bool = True,
        num_classes: int = 2,
        class_names: Sequence[str] | None = None,
        threshold: float = 0.5,
        head_temperature: bool = False,
    ) -> None:
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
            "max_len": max_len,
            "embed_dim": embed_dim,
            "num_heads": num_heads,
            "num_layers": num_layers,
            "dim_feedforward": dim_feedforward,
            "dropout": dropout,
            "conv_kernel": conv_kernel,
            "conv_layers": conv_layers,
            "rc_average": rc_average,
            "num_classes": num_classes,
            "class_names": class_names,
            "threshold": threshold,
            "head_temperature": head_temperature,
        }
        self.max_len = max_len
        self.rc_average = rc_average
        self.num_classes = num_classes
        self.class_names = class_names
        self.threshold = threshold
        self.embedding = nn.Embedding(VOCAB_SIZE, embed_dim, padding_idx=PAD_ID)
        self.convs = nn.ModuleList(
            nn.Conv1d(embed_dim, embed_dim, conv_kernel, padding=conv_kernel // 2) for _ in range(conv_layers if conv_kernel else 0)
        )
        #: Compute the first convolution from per-token tables (:func:`token_table_conv1d`: the same function, cheaper
        #: on a CPU). False, any forward hook on ``embedding`` (e.g. Captum's layer attributions, which replace its
        #: output), a GPU (where the convolution is faster) or ``torch.compile`` (inductor cannot compile the lookups'
        #: backward) runs the ``nn.Conv1d`` on the embedding output instead.
        self.conv_from_token_tables = True
        self.positional = LearnedPositionalEncoding(max_len + 1, embed_dim)
        self.encoder = TransformerEncoder(
            embed_dim, num_heads, num_layers, dim_feedforward=dim_feedforward, dropout=dropout, attention_dropout=0.0,
            norm_first=True, head_temperature=head_temperature,
        )
        self.head = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.GELU(), nn.Dropout(dropout),
                                  nn.Linear(embed_dim, 1 if self.binary else num_classes))

    @property
    def binary(self) -> bool:
        """Two classes: one logit and a sigmoid (outputs are ``(B,)``); otherwise C logits (``(B, C)``)."""
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

    def encode(
        self, ids: Tensor, padding_mask: Tensor | None = None, *, need_weights: bool = False, cls_only: bool = False
    ) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """Encoder states of ``[CLS] + sequence``.

        ``ids: (B, L)`` long, ``padding_mask: (B, L)`` bool (True = PAD) →
        ``(hidden (B, 1+L, D), key_padding_mask (B, 1+L) bool, [attention (B, H, 1+L, 1+L) per layer] or None)``;
        position 0 is [CLS]. ``cls_only``: ``hidden`` is ``(B, 1, D)``, the [CLS] state alone (the same numbers),
        and the last layer computes nothing else (what :meth:`forward` reads; about 1.6× less work at 70 nt); its
        attention is then ``(B, H, 1, 1+L)``.
        """
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
        # An unpadded batch attends without a mask, so CUDA can choose its flash kernel (checked once, not per layer;
        # reading the mask is a device sync, so a compiled graph keeps the mask).
        padded = torch.compiler.is_compiling() or bool(padding_mask.any())
        attention_mask = key_padding_mask if padded else None
        hidden, weights = self.encoder(x, key_padding_mask=attention_mask, need_weights=need_weights,
                                       first_outputs=1 if cls_only else None)
        return hidden, key_padding_mask, weights

    def forward(self, ids: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Single-strand logits for ``ids: (B, L)``, ``padding_mask: (B, L)`` (True = PAD): ``(B,)`` for two
        classes (logit of class 1), ``(B, C)`` for more."""
        hidden, _, _ = self.encode(ids, padding_mask, cls_only=True)
        with torch.autocast(hidden.device.type, enabled=False):  # fp32 head: bf16 would round probabilities to 1/256
            logits = self.head(hidden[:, 0].float())
        return logits.squeeze(-1) if self.binary else logits

    def predict_logits(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """Inference logits ``(B,)`` or ``(B, C)`` (see :meth:`forward`); with ``rc_average`` (default: the model's
        setting) the mean of both strands.

        The two strands run as two separate, identically shaped passes, so the result for a sequence and for
        its reverse complement is bit-for-bit the same.
        """
        if self.rc_average if rc_average is None else rc_average:
            return strand_average(lambda strand: self(strand, padding_mask), ids, padding_mask)
        return self(ids, padding_mask)

    @torch.no_grad()
    def proba_from_ids(self, ids: Tensor, padding_mask: Tensor | None = None, *, rc_average: bool | None = None) -> Tensor:
        """The tensor-level batched call: probability of class 1 ``(B,)`` (two classes) or of each class ``(B, C)``
        for token ids ``(B, L)`` (eval mode is the caller's business; see :meth:`predict_logits`)."""
        logits = self.predict_logits(ids, padding_mask, rc_average=rc_average)
        return torch.sigmoid(logits) if self.binary else torch.softmax(logits, dim=-1)

    @property
    def classes_(self) -> np.ndarray:
        """The class labels :meth:`predict` returns, in the column order of :meth:`predict_proba` (scikit-learn's
        name): ``class_names`` as an array of strings."""
        return np.asarray(self.class_names)

    def class_probabilities(self, probs: np.ndarray) -> np.ndarray:
        """``(N, C)`` probability of every class from this model's outputs ``(N,)`` (two classes) or ``(N, C)``."""
        probs = np.asarray(probs, dtype=np.float64)
        return np.stack([1.0 - probs, probs], axis=1) if probs.ndim == 1 else probs

    def predicted_classes(self, probs: np.ndarray) -> np.ndarray:
        """Class indices ``(N,)`` from probabilities ``(N,)`` (class 1 when ``>= threshold``) or ``(N, C)`` (argmax)."""
        probs = np.asarray(probs)
        return (probs >= self.threshold).astype(np.int64) if probs.ndim == 1 else probs.argmax(axis=1)

    def predict_proba(
        self, sequences: str | Sequence[str], *, batch_size: int = 256, rc_average: bool | None = None
    ) -> np.ndarray:
        """Class probabilities ``(N, C)`` float64 of DNA strings, rows summing to 1, columns in :attr:`classes_`
        order, in input order (one string: ``N = 1``); column 1 of a two-class model is the probability ``bioattn
        predict promoter`` writes.

        Strings are encoded as the training files were (:func:`bioattn.data.dna.encode`: A/C/G/T and IUPAC codes,
        any case) and padded per batch; padding and batching never change a prediction. ``rc_average`` (default:
        the run's setting, saved in its config) averages both strands. On an ensemble of them
        (``bioattn.models.load_pretrained(ensemble_dir)``; ``from_pretrained`` refuses an ensemble directory) the
        members' mean probability. A string longer than the model's ``max_len`` or with a character outside DNA is
        a :class:`~bioattn.errors.UserInputError` naming its index.
        """
        return self.class_probabilities(self.predict_tokens(encode_sequences(sequences, max_len=self.max_len),
                                                            batch_size=batch_size, rc_average=rc_average))

    def predict(
        self, sequences: str | Sequence[str], *, batch_size: int = 256, rc_average: bool | None = None
    ) -> np.ndarray:
        """Class labels ``(N,)`` of DNA strings (:attr:`classes_` values, strings), as ``bioattn predict promoter``
        writes ``predicted_label``: class 1 of a two-class model when its probability is at least the run's
        ``threshold``, else the most probable class. Inputs and keywords as :meth:`predict_proba`."""
        probs = self.predict_tokens(encode_sequences(sequences, max_len=self.max_len), batch_size=batch_size,
                                    rc_average=rc_average)
        return self.classes_[self.predicted_classes(probs)]

    @torch.no_grad()
    def predict_tokens(
        self, token_arrays: Sequence[np.ndarray], *, batch_size: int = 256, rc_average: bool | None = None
    ) -> np.ndarray:
        """The token-level call of :meth:`predict_proba`: probability of class 1 ``(N,)`` (two classes) or of each
        class ``(N, C)`` float64 for N token arrays (see :func:`bioattn.data.dna.encode`), in input order.

        Runs in eval mode (the mode is restored afterwards) in batches of ``batch_size`` sequences of similar
        length (sorted by length, so little padding is computed); padding does not change a prediction, so the
        batching never changes the numbers beyond float rounding.
        """
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
