"""Mixup (Zhang et al., ICLR 2018) for classification losses, drawn from torch's global RNG."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["check_mixup_alpha", "mixup_cross_entropy"]


def check_mixup_alpha(alpha: float, *, name: str = "mixup alpha") -> float:
    """``alpha`` if it is ``>= 0`` (0: off), else a ``ValueError`` naming it ``name``."""
    if not alpha >= 0.0:  # also rejects NaN
        raise ValueError(f"{name} must be >= 0 (0: off), got {alpha}")
    return alpha


def mixup_cross_entropy(forward: Callable[[Tensor], Tensor], inputs: Tensor, labels: Tensor, *, alpha: float,
                        label_smoothing: float = 0.0) -> Tensor:
    """``(B, ...)``, ``(B,)`` → scalar cross-entropy of ``forward`` on mixed inputs (``alpha = 0``: unmixed)."""
    check_mixup_alpha(alpha)
    if alpha == 0.0:
        return F.cross_entropy(forward(inputs), labels, label_smoothing=label_smoothing)
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    partner = torch.randperm(inputs.shape[0], device=inputs.device)
    logits = forward(lam * inputs + (1.0 - lam) * inputs[partner])
    return (lam * F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
            + (1.0 - lam) * F.cross_entropy(logits, labels[partner], label_smoothing=label_smoothing))
