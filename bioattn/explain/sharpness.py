"""How sharp each attention head is: per-head entropy, normalised entropy and effective temperature, per layer."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def head_sharpness(weights: Sequence[Tensor], key_padding_mask: Tensor | None = None) -> dict[str, Tensor]:
    """Per-layer ``(B, H, Lq, Lk)`` → ``{"entropy", "normalised_entropy", "temperature"}``, each ``(layers, H)``."""
    results: dict[str, list[Tensor]] = {"entropy": [], "normalised_entropy": [], "temperature": []}
    for layer in weights:
        p = layer.detach().double()
        batch, _, queries, keys = p.shape
        real_keys = torch.ones(batch, keys, dtype=torch.bool, device=p.device) if key_padding_mask is None else ~key_padding_mask
        real_queries = real_keys if queries == keys else torch.ones(batch, queries, dtype=torch.bool, device=p.device)
        key_mask = real_keys[:, None, None, :].to(p.dtype)
        count = key_mask.sum(-1)  # (B, 1, 1)
        log_p = torch.log(p.clamp_min(1e-300)) * key_mask
        entropy = -(p * log_p).sum(-1)  # (B, H, Lq)
        mean_log = log_p.sum(-1, keepdim=True) / count[..., None]
        spread = (((log_p - mean_log) * key_mask) ** 2).sum(-1).div(count.clamp_min(2) - 1).sqrt()
        temperature = 1.0 / spread.clamp_min(1e-12)
        normalised = entropy / torch.log(count.clamp_min(2))
        rows = real_queries[:, None, :].to(p.dtype).expand(-1, p.shape[1], -1)
        for name, value in (("entropy", entropy), ("normalised_entropy", normalised), ("temperature", temperature)):
            results[name].append((value * rows).sum((0, 2)) / rows.sum((0, 2)))
    return {name: torch.stack(values).cpu() for name, values in results.items()}


def sharpness_summary(sharpness: dict[str, Tensor]) -> dict[str, list[list[float]]]:
    """:func:`head_sharpness` as rounded nested lists ``[layer][head]``."""
    return {name: [[round(float(v), 4) for v in row] for row in values] for name, values in sharpness.items()}
