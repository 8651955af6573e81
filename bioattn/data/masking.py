"""BERT-style masking of token ids, shared by the masked-token objectives (MSA cells, DNA nucleotides)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["bert_mask", "masked_cross_entropy"]


def bert_mask(tokens: Tensor, maskable: Tensor, probability: float, mask_id: int, random_ids: Tensor,
              generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """``(masked tokens, chosen)``: ``maskable`` cells chosen with ``probability``; 80 % ``mask_id``, 10 % random."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be between 0 and 1, got {probability}")
    on_cpu, maskable = tokens.cpu(), maskable.cpu()
    if maskable.shape != on_cpu.shape or maskable.dtype != torch.bool:
        raise ValueError(f"maskable must be bool {tuple(on_cpu.shape)}, got {maskable.dtype} {tuple(maskable.shape)}")
    chosen = (torch.rand(on_cpu.shape, generator=generator) < probability) & maskable
    action = torch.rand(on_cpu.shape, generator=generator)
    masked = on_cpu.clone()
    masked[chosen & (action < 0.8)] = mask_id
    randomise = chosen & (action >= 0.8) & (action < 0.9)
    drawn = random_ids.cpu()[torch.randint(len(random_ids), on_cpu.shape, generator=generator)]
    masked[randomise] = drawn[randomise]
    return masked.to(tokens.device), chosen.to(tokens.device)


def masked_cross_entropy(logits: Tensor, targets: Tensor, chosen: Tensor) -> Tensor:
    """Mean cross-entropy of ``logits (..., C)`` against ``targets (...)`` over ``chosen`` cells (none: a zero)."""
    chosen = chosen.to(logits.device)
    if not chosen.any():
        return logits.sum() * 0.0
    return F.cross_entropy(logits[chosen], targets.to(logits.device)[chosen])
