"""Per-nucleotide influence of a promoter classifier (the [CLS] row of the rollout) and its aggregation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from Bio.SeqUtils import nt_search
from torch import Tensor

from bioattn.data.dna import strand_average
from bioattn.attention.rollout import rollout_rows


@dataclass
class PromoterInfluence:
    """``probabilities (B,)``, ``influence (B, L)``, forward-strand ``weights`` ``(B, H, 1 + L, 1 + L)``."""

    probabilities: Tensor
    influence: Tensor
    weights: list[Tensor]


@torch.no_grad()
def explain_promoters(model: torch.nn.Module, ids: Tensor, padding_mask: Tensor, *, head_fusion: str = "mean",
                      start_layer: int = 0, rc_average: bool | None = None) -> PromoterInfluence:
    """Predict and explain a batch: ``ids (B, L)``, ``padding_mask (B, L)`` (True = PAD)."""
    model.eval()
    device = model.embedding.weight.device
    ids, padding_mask = ids.to(device), padding_mask.to(device)
    use_rc = model.rc_average if rc_average is None else rc_average
    probabilities = model.proba_from_ids(ids, padding_mask, rc_average=use_rc)
    _, key_padding_mask, weights = model.encode(ids, padding_mask, need_weights=True)

    def strand_influence(strand: Tensor) -> Tensor:
        strand_weights = weights if strand is ids else model.encode(strand, padding_mask, need_weights=True)[2]
        return rollout_rows(strand_weights, 0, head_fusion=head_fusion, start_layer=start_layer,
                            key_padding_mask=key_padding_mask)[:, 1:]

    influence = (strand_average(strand_influence, ids, padding_mask, per_position=True) if use_rc
                 else strand_influence(ids))
    return PromoterInfluence(probabilities=probabilities.cpu(), influence=influence.cpu(), weights=[w.cpu() for w in weights])


@dataclass
class MotifEnrichment:
    """How much influence a motif's positions get, per matching sequence: relative to that sequence's mean
    (``ratios_to_sequence``) and to the same positions in the sequences without it (``ratios_to_position``)."""

    motif: str
    sequences: int
    ratios_to_sequence: list[float]
    ratios_to_position: list[float]
    starts: list[int]

    def summary(self) -> dict:
        def stats(values: list[float]) -> dict:
            array = np.asarray(values, dtype=float)
            if not array.size:
                return {"mean": None, "median": None, "fraction_above_1": None}
            return {"mean": float(array.mean()), "median": float(np.median(array)), "fraction_above_1": float((array > 1).mean())}

        starts = zip(*np.unique(self.starts, return_counts=True))
        return {"motif": self.motif, "sequences": self.sequences, "sequences_with_match": len(self.ratios_to_sequence),
                "enrichment_vs_sequence_mean": stats(self.ratios_to_sequence),
                "enrichment_vs_same_positions_without_motif": stats(self.ratios_to_position),
                "match_start_counts_0based": {int(k): int(v) for k, v in starts}}


def motif_positions(sequence: str, motif: str) -> tuple[np.ndarray, list[int]]:
    """``(covered (len(sequence),) bool, match starts)`` of the IUPAC ``motif`` on the forward strand."""
    starts = [int(s) for s in nt_search(sequence.upper(), motif.upper())[1:]]
    covered = np.zeros(len(sequence), dtype=bool)
    for start in starts:
        covered[start : start + len(motif)] = True
    return covered, starts


def motif_enrichment(sequences: Sequence[str], influence: np.ndarray, motif: str) -> MotifEnrichment:
    """:class:`MotifEnrichment` of ``motif`` in ``sequences``: ``influence (N, L_max)``."""
    found = [motif_positions(sequence, motif) for sequence in sequences]
    lengths = np.array([len(s) for s in sequences])
    without = np.array([not starts for _, starts in found])
    control = influence_profile(influence[without], lengths[without]) if without.any() else None
    to_sequence: list[float] = []
    to_position: list[float] = []
    all_starts: list[int] = []
    for (covered, starts), values, length in zip(found, influence, lengths):
        if not starts:
            continue
        all_starts.extend(starts)
        real = values[:length]
        on_motif = float(real[covered].mean())
        to_sequence.append(on_motif / max(float(real.mean()), np.finfo(float).tiny))
        if control is not None:
            mean, _, counts = control
            usable = covered & (counts[:length] > 0)
            if usable.any():
                to_position.append(float(real[usable].mean()) / max(float(mean[:length][usable].mean()), np.finfo(float).tiny))
    return MotifEnrichment(motif=motif, sequences=len(sequences), ratios_to_sequence=to_sequence,
                           ratios_to_position=to_position, starts=all_starts)


def influence_profile(influence: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(N, L_max)``, ``lengths (N,)`` → mean, sd and count per position ``(L_max,)`` over the sequences there."""
    present = np.arange(influence.shape[1])[None, :] < lengths[:, None]
    counts = present.sum(0)
    safe = np.maximum(counts, 1)
    mean = np.where(present, influence, 0.0).sum(0) / safe
    variance = np.where(present, (influence - mean) ** 2, 0.0).sum(0) / safe
    return mean, np.sqrt(variance), counts
