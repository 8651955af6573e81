"""Mixup (Zhang et al., "mixup: Beyond Empirical Risk Minimization", ICLR 2018) for classification losses.

Each batch is mixed with a random permutation of itself: inputs ``λ·x + (1-λ)·x[π]`` and the loss
``λ·CE(y) + (1-λ)·CE(y[π])``, with one ``λ ~ Beta(α, α)`` per batch. ``λ`` and ``π`` are drawn from torch's
global RNG, so a resumed run (whose RNG state the :class:`~bioattn.training.Trainer` restores) continues the
same stream.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["check_mixup_alpha", "mixup_cross_entropy"]


def check_mixup_alpha(alpha: float, *, name: str = "mixup alpha") -> float:
    """``alpha`` if it is a valid Beta concentration (``>= 0``; 0 turns mixup off); otherwise a ``ValueError``
    naming it ``name`` (e.g. the command-line flag)."""
    if not alpha >= 0.0:  # also rejects NaN
        raise ValueError(f"{name} must be >= 0 (0: off), got {alpha}")
    return alpha


def mixup_cross_entropy(
    forward: Callable[[Tensor], Tensor], inputs: Tensor, labels: Tensor, *, alpha: float, label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of ``forward`` on mixed ``inputs (B, ...)`` with class ``labels (B,)``; a scalar.

    ``forward`` maps inputs to logits ``(B, classes)``. ``alpha = 0`` is the plain cross-entropy of the unmixed
    batch (no random number is drawn).
    """
    check_mixup_alpha(alpha)
    if alpha == 0.0:
        return F.cross_entropy(forward(inputs), labels, label_smoothing=label_smoothing)
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    partner = torch.randperm(inputs.shape[0], device=inputs.device)
    logits = forward(lam * inputs + (1.0 - lam) * inputs[partner])
    return (lam * F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
            + (1.0 - lam) * F.cross_entropy(logits, labels[partner], label_smoothing=label_smoothing))
