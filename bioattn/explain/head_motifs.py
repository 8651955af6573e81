"""Which attention head reads which motif: [CLS] attention on a motif's sites against the same positions elsewhere."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from bioattn.models.ensemble import ensemble_members

Site = tuple[int, int, int]
"""``(sequence index, start, end)``: 0-based, end exclusive, in nucleotide coordinates."""


@torch.no_grad()
def cls_attention(model: torch.nn.Module, ids: Tensor, padding_mask: Tensor, *, batch_size: int = 256) -> np.ndarray:
    """``ids, padding_mask (N, L)`` → ``(layers, N, H, L)`` float32 [CLS] attention (forward strand, first member)."""
    member = ensemble_members(model)[0].eval()
    device = next(member.parameters()).device
    rows = []
    for start in range(0, len(ids), batch_size):
        _, _, weights = member.encode(ids[start : start + batch_size].to(device),
                                      padding_mask[start : start + batch_size].to(device), need_weights=True)
        rows.append(np.stack([w[:, :, 0, 1:].float().cpu().numpy() for w in weights]))
    return np.concatenate(rows, axis=1)


@dataclass
class HeadMotifTable:
    """ratio, on_site, control: ``(layers, H, M)``; sites: ``(M,)`` counts."""
    motifs: list[str]
    ratio: np.ndarray
    on_site: np.ndarray
    control: np.ndarray
    sites: list[int]

    def reader(self, motif: str) -> tuple[int, int]:
        """``(layer, head)`` with the highest ratio for ``motif``."""
        column = self.ratio[:, :, self.motifs.index(motif)]
        layer, head = np.unravel_index(int(np.nanargmax(column)), column.shape)
        return int(layer), int(head)

    def rows(self) -> list[list]:
        """One row per (layer, head, motif): layer, head, motif, sites, on-site, control, ratio."""
        layers, heads, _ = self.ratio.shape
        return [[layer, head, motif, self.sites[m], float(self.on_site[layer, head, m]), float(self.control[layer, head, m]),
                 float(self.ratio[layer, head, m])]
                for layer in range(layers) for head in range(heads) for m, motif in enumerate(self.motifs)]


def head_motif_enrichment(attention: np.ndarray, lengths: Sequence[int], sites: Mapping[str, Sequence[Site]], *,
                          draws: int = 20, seed: int = 0) -> HeadMotifTable:
    """Heads × motifs enrichment of ``attention (layers, N, H, L)`` on ``sites`` over ``draws`` random controls."""
    layers, count, heads, _ = attention.shape
    lengths = np.asarray(lengths)
    generator = np.random.default_rng(seed)
    names = list(sites)
    on = np.full((layers, heads, len(names)), np.nan)
    off = np.full((layers, heads, len(names)), np.nan)
    counts = []
    for m, name in enumerate(names):
        site_sums, control_sums = [], []
        for index, start, end in sites[name]:
            start, end = max(int(start), 0), min(int(end), int(lengths[index]))
            if end <= start:
                continue
            site_sums.append(attention[:, index, :, start:end].sum(-1))  # (layers, H)
            others = np.flatnonzero((lengths >= end) & (np.arange(count) != index))
            if not others.size:
                continue
            chosen = generator.choice(others, size=draws)
            control_sums.append(attention[:, chosen, :, start:end].sum(-1).mean(1))
        counts.append(len(site_sums))
        if site_sums:
            on[:, :, m] = np.mean(site_sums, axis=0)
        if control_sums:
            off[:, :, m] = np.mean(control_sums, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = on / off
    return HeadMotifTable(motifs=names, ratio=ratio, on_site=on, control=off, sites=counts)
