"""Faithfulness of an attribution map: deletion and insertion curves and their areas (Petsiuk et al. 2018)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

DEFAULT_STEPS = 20
ScoreMasked = Callable[[Tensor], Tensor]
"""``score(masks (K, U) bool, True = perturbed) -> (K,)`` probability of the originally predicted class."""


def rank_units(attribution: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """``(U,)`` attribution → unit indices ``(U,)``, most important first; ties broken at random by ``generator``."""
    attribution = attribution.detach().flatten().float().cpu()
    shuffle = torch.randperm(attribution.numel(), generator=generator)
    order = torch.argsort(attribution[shuffle], descending=True, stable=True)
    return shuffle[order]


def top_k_masks(order: Tensor, steps: int) -> tuple[np.ndarray, Tensor]:
    """Fractions ``(steps + 1,)`` and masks ``(steps + 1, U)``, row ``s`` True on the top ``round(U * s / steps)``."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    units = order.numel()
    fractions = np.linspace(0.0, 1.0, steps + 1)
    counts = np.rint(fractions * units).astype(int)
    rank_of = torch.empty(units, dtype=torch.long)
    rank_of[order] = torch.arange(units)
    masks = rank_of[None, :] < torch.as_tensor(counts)[:, None]
    return fractions, masks


def area_under_curve(curve: np.ndarray, fractions: np.ndarray) -> float:
    """Trapezoid area of ``curve`` over ``fractions`` (both ``(S + 1,)``)."""
    curve, fractions = np.asarray(curve, dtype=float), np.asarray(fractions, dtype=float)
    return float(np.sum((curve[1:] + curve[:-1]) * np.diff(fractions)) / 2)


def deletion_insertion(score: ScoreMasked, attribution: Tensor, *, steps: int = DEFAULT_STEPS,
                       generator: torch.Generator | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fractions, deletion, insertion)``, each ``(S + 1,)``, of ``attribution (U,)``, relative to unperturbed."""
    fractions, masks = top_k_masks(rank_units(attribution, generator), steps)
    with torch.no_grad():
        probabilities = score(torch.cat([masks, ~masks])).double().cpu().numpy()
    deletion, insertion = probabilities[: len(masks)], probabilities[len(masks):]
    reference = max(float(deletion[0]), np.finfo(float).tiny)  # no unit perturbed
    return fractions, deletion / reference, insertion / reference


@dataclass
class FaithfulnessResult:
    """Curves ``(S + 1,)`` of one method averaged over examples, per-example areas and the maps' seconds."""
    method: str
    fractions: np.ndarray
    deletion: np.ndarray
    insertion: np.ndarray
    deletion_aucs: list[float] = field(default_factory=list)
    insertion_aucs: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        """The ``summary.json`` entry: both areas' mean and sd, the example count, seconds and the mean curves."""
        deletion, insertion = np.asarray(self.deletion_aucs), np.asarray(self.insertion_aucs)
        return {"deletion_auc": float(deletion.mean()), "insertion_auc": float(insertion.mean()),
                "deletion_auc_sd": float(deletion.std()), "insertion_auc_sd": float(insertion.std()),
                "examples": len(deletion), "seconds": round(self.seconds, 3),
                "fractions": [round(float(f), 4) for f in self.fractions],
                "deletion_curve": [round(float(v), 5) for v in self.deletion],
                "insertion_curve": [round(float(v), 5) for v in self.insertion]}


def evaluate_faithfulness(method: str, scores: Sequence[ScoreMasked], attributions: Sequence[Tensor], *,
                          steps: int = DEFAULT_STEPS, seed: int = 0, seconds: float = 0.0) -> FaithfulnessResult:
    """Mean curves of ``attributions`` (one ``(U_i,)`` map per example) under the matching ``scores``."""
    if len(scores) != len(attributions) or not scores:
        raise ValueError(f"need one score per attribution (>= 1), got {len(scores)} and {len(attributions)}")
    generator = torch.Generator().manual_seed(seed)
    deletions, insertions = [], []
    fractions = np.linspace(0.0, 1.0, steps + 1)
    for score, attribution in zip(scores, attributions):
        fractions, deletion, insertion = deletion_insertion(score, attribution, steps=steps, generator=generator)
        deletions.append(deletion)
        insertions.append(insertion)
    return FaithfulnessResult(method=method, fractions=fractions, deletion=np.mean(deletions, axis=0),
                              insertion=np.mean(insertions, axis=0),
                              deletion_aucs=[area_under_curve(c, fractions) for c in deletions],
                              insertion_aucs=[area_under_curve(c, fractions) for c in insertions], seconds=seconds)


def most_faithful(results: dict[str, dict]) -> str:
    """The method of ``results`` (method → summary) with the largest ``insertion_auc - deletion_auc``."""
    return max(results, key=lambda name: results[name]["insertion_auc"] - results[name]["deletion_auc"])


def compare_methods(attribute: Callable[[str], Sequence[Tensor]], scores: Sequence[ScoreMasked], methods: Sequence[str], *,
                    steps: int = DEFAULT_STEPS, seed: int = 0, known: dict[str, dict] | None = None) -> dict[str, dict]:
    """Method → :meth:`FaithfulnessResult.summary` of ``attribute(method)``; ``known`` results are reused."""
    results = {}
    for method in methods:
        if known is not None and method in known:
            results[method] = known[method]
            continue
        start = time.perf_counter()
        maps = attribute(method)
        seconds = time.perf_counter() - start
        results[method] = evaluate_faithfulness(method, scores, maps, steps=steps, seed=seed, seconds=seconds).summary()
    return results
