"""MSA contact model: axial transformer trained by masked-token prediction, contacts read from tied row attention.

Contacts: each layer's tied maps, symmetrised and APC-corrected, sorted over heads at each pair (so a head fitted on
other families applies), plus optional extra pair features, z-scored per family → logistic regression
(``contact_head``, :func:`fit_contact_head`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from torch import Tensor, nn

from bioattn.attention import AxialTransformerLayer, LearnedPositionalEncoding, SinusoidalPositionalEncoding
from bioattn.attention.inputs import check_token_ids
from bioattn.coevolution import apc, symmetrize
from bioattn.data.masking import bert_mask, masked_cross_entropy
from bioattn.data.msa import ALPHABET, MSATokenizer
from bioattn.models.base import PretrainedModel

__all__ = ["MSAContactModel", "mask_tokens", "masked_lm_loss", "standardize_pair_features",
           "logistic_contact_probabilities", "fit_contact_head"]

#: Pairs closer than this in sequence are left out of feature statistics and of the contact-head fit.
MIN_SEPARATION = 6

_TOKENS = MSATokenizer()
#: ``positional`` choices of :class:`MSAContactModel`.
POSITIONAL_ENCODINGS = ("learned", "sinusoidal")


def mask_tokens(tokens: Tensor, probability: float, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """BERT masking of ``tokens (B, N, L)`` (never padding), drawn on the CPU ``generator`` →
    ``(masked tokens, chosen (B, N, L) bool)``."""
    return bert_mask(tokens, tokens.cpu() != _TOKENS.pad_id, probability, _TOKENS.mask_id,
                     torch.arange(len(ALPHABET)), generator)


class MSAContactModel(PretrainedModel):
    """Axial-attention MSA language model of at most ``max_len`` columns with an attention-based contact head;
    ``chunk_size`` rows/columns per chunk (None: all), ``extra_contact_features`` appended pair features' names,
    ``positional`` ``learned`` or ``sinusoidal``."""

    def __init__(self, *, max_len: int = 1024, embed_dim: int = 64, num_heads: int = 4, num_layers: int = 4,
                 dim_feedforward: int | None = None, dropout: float = 0.1, chunk_size: int | None = None,
                 extra_contact_features: Sequence[str] = (), positional: str = "learned") -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if positional not in POSITIONAL_ENCODINGS:
            raise ValueError(f"positional must be one of {', '.join(POSITIONAL_ENCODINGS)}, got {positional!r}")
        self.config = {
            "max_len": max_len, "embed_dim": embed_dim, "num_heads": num_heads, "num_layers": num_layers,
            "dim_feedforward": dim_feedforward, "dropout": dropout, "chunk_size": chunk_size,
            "extra_contact_features": list(extra_contact_features), "positional": positional}
        self.embed = nn.Embedding(_TOKENS.vocab_size, embed_dim, padding_idx=_TOKENS.pad_id)
        self.positions = (LearnedPositionalEncoding(max_len, embed_dim) if positional == "learned"
                          else SinusoidalPositionalEncoding(embed_dim, max_len))
        self.embed_norm = nn.LayerNorm(embed_dim)
        self.layers = nn.ModuleList(
            AxialTransformerLayer(embed_dim, num_heads, dim_feedforward=dim_feedforward, dropout=dropout, tied=True,
                                  chunk_size=chunk_size) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(embed_dim)
        self.lm_head = nn.Linear(embed_dim, len(ALPHABET))
        self.contact_head = nn.Linear(num_layers * num_heads + len(extra_contact_features), 1)

    @property
    def num_contact_features(self) -> int:
        """F: layers × heads attention features plus the extra ones."""
        return self.contact_head.in_features

    def forward(self, tokens: Tensor, *, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``tokens (B, N, L)`` → ``(logits (B, N, L, 22), tied row attention (B, layers, H, L, L) or None)``."""
        if tokens.dim() != 3:
            raise ValueError(f"tokens must be (B, N, L), got {tuple(tokens.shape)}")
        b, n, length = tokens.shape
        if length > self.config["max_len"]:
            raise ValueError(f"alignment has {length} columns; this model accepts at most max_len={self.config['max_len']}")
        check_token_ids(tokens, self.embed.num_embeddings, "tokens", "(B, N, L)")
        padding = tokens == _TOKENS.pad_id
        masks = {"sequence_padding_mask": padding.all(dim=2), "position_padding_mask": padding.all(dim=1)}
        x = self.embed_norm(self.positions(self.embed(tokens).view(b * n, length, -1)).view(b, n, length, -1))
        maps = []
        for layer in self.layers:
            x, weights = layer(x, need_weights=need_weights, **masks)
            maps.append(weights)
        return self.lm_head(self.final_norm(x)), (torch.stack(maps, dim=1) if need_weights else None)

    @torch.no_grad()
    def contact_features(self, tokens: Tensor) -> Tensor:
        """``tokens (B, N, L)`` → ``(B, L, L, layers*H)``: symmetrised, APC'd tied maps, sorted over heads per layer."""
        _, maps = self(tokens, need_weights=True)
        b, layers, heads, length, _ = maps.shape
        ordered = apc(symmetrize(maps.float())).sort(dim=2, descending=True).values  # (B, layers, H, L, L)
        return ordered.reshape(b, layers * heads, length, length).permute(0, 2, 3, 1)

    @torch.no_grad()
    def contact_probabilities(self, features: Tensor) -> Tensor:
        """Pair features ``(L, L, F)`` (attention features, then the extra ones) → contact probabilities ``(L, L)``."""
        if features.shape[-1] != self.num_contact_features:
            raise ValueError(f"expected {self.num_contact_features} pair features, got {features.shape[-1]}")
        return logistic_contact_probabilities(features, self.contact_head.weight[0], float(self.contact_head.bias))

    def set_extra_contact_features(self, names: Sequence[str]) -> None:
        """Change the extra pair features of the contact head; the head is replaced by an unfitted one of the new size."""
        self.config["extra_contact_features"] = list(names)
        self.contact_head = nn.Linear(self.config["num_layers"] * self.config["num_heads"] + len(names), 1)

    def set_contact_head(self, weight: np.ndarray, bias: float) -> None:
        """Load logistic-regression coefficients ``(F,)`` and intercept into ``contact_head``."""
        with torch.no_grad():
            self.contact_head.weight.copy_(torch.as_tensor(np.asarray(weight), dtype=torch.float32).view(1, -1))
            self.contact_head.bias.fill_(float(bias))


def masked_lm_loss(model: nn.Module, tokens: Tensor, probability: float = 0.15, generator: torch.Generator | None = None) -> Tensor:
    """Masked-token cross-entropy (mean over the chosen cells) of ``tokens (B, N, L)``; ``model`` may be wrapped."""
    masked, chosen = mask_tokens(tokens, probability, generator)
    logits, _ = model(masked.to(next(model.parameters()).device))
    return masked_cross_entropy(logits, tokens, chosen)


def _pair_selection(length: int, min_separation: int) -> Tensor:
    """Bool ``(L, L)``: ``|i - j| ≥ min_separation``."""
    index = torch.arange(length)
    return (index[:, None] - index[None, :]).abs() >= min_separation


def standardize_pair_features(features: Tensor, min_separation: int = MIN_SEPARATION) -> Tensor:
    """Z-score each feature of ``(L, L, F)`` with its mean/std over the pairs ``|i-j| ≥ min_separation`` (no labels used)."""
    selected = features[_pair_selection(features.shape[0], min_separation)]
    if selected.shape[0] < 2:
        return features - features.mean((0, 1))
    return (features - selected.mean(0)) / selected.std(0).clamp_min(1e-8)


def logistic_contact_probabilities(features: Tensor, weight: Tensor, bias: float) -> Tensor:
    """``sigmoid(z(features) · weight + bias)`` for ``(L, L, F)`` features z-scored per family → symmetric ``(L, L)``."""
    logits = standardize_pair_features(features.float()) @ torch.as_tensor(weight, dtype=torch.float32) + bias
    return torch.sigmoid(0.5 * (logits + logits.T))


def fit_contact_head(features: Sequence[Tensor], distances: Sequence[np.ndarray], *,
                     min_separation: int = MIN_SEPARATION, cutoff: float = 8.0) -> tuple[np.ndarray, float]:
    """Logistic regression of contact (distance < ``cutoff``) on per-family z-scored pair features ``(L, L, F)``
    and ``(L, L)`` distances (NaN skipped), pairs ``|i-j| ≥ min_separation`` → ``(weight (F,), bias)``."""
    inputs, labels = [], []
    for feature_map, distance in zip(features, distances):
        distance = torch.as_tensor(distance)
        pairs = _pair_selection(distance.shape[0], min_separation).triu() & torch.isfinite(distance)
        inputs.append(standardize_pair_features(feature_map.float())[pairs].numpy())
        labels.append((distance[pairs] < cutoff).numpy())
    x, y = np.concatenate(inputs), np.concatenate(labels)
    if y.all() or not y.any():
        raise ValueError("the training pairs hold a single class; cannot fit a contact head")
    regression = LogisticRegression(C=0.1, max_iter=2000).fit(x, y)
    return regression.coef_[0], float(regression.intercept_[0])
