"""How sharp each attention head is: per-head entropy and effective temperature, per layer.

One head has one softmax temperature (the fixed ``1/sqrt(d)`` scale times the spread of its scores), so a head
is either sharp (a few keys) or diffuse (many keys) everywhere. For each head we report, averaged over its real
query rows:

- ``entropy``: ``-Σ_j p_j log p_j`` over the real keys, in nats;
- ``normalised_entropy``: entropy / log(number of real keys): 1 = uniform attention, 0 = one key;
- ``temperature``: the effective temperature ``1 / sd_j(log p_j)``. ``log p_j`` is the scaled score minus a
  per-row constant, so its standard deviation over keys is the spread of the scores the softmax sees; a head
  whose scores spread by 1 has temperature 1, a sharper head a lower one.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def head_sharpness(weights: Sequence[Tensor], key_padding_mask: Tensor | None = None) -> dict[str, Tensor]:
    """Per-layer, per-head sharpness of attention maps.

    Args:
        weights: per layer ``(B, H, Lq, Lk)`` attention probabilities.
        key_padding_mask: ``(B, Lk)`` bool, True = padding (those keys and, for self-attention, those queries
            are left out), or None.

    Returns:
        ``{"entropy", "normalised_entropy", "temperature"}``, each ``(layers, H)`` float64, averaged over the
        real query rows of every input.
    """
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
    """:func:`head_sharpness` as nested lists ``[layer][head]`` rounded for ``summary.json``."""
    return {name: [[round(float(v), 4) for v in row] for row in values] for name, values in sharpness.items()}
