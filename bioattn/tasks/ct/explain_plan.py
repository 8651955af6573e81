"""How ``explain ct`` spends its time: the prediction, the cheap maps, and a faithfulness plan within a budget."""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.models.ct_classifier import flip_axis_sets
from bioattn.progress import progress_bar
from bioattn.tasks.ct.methods import CT_METHODS

__all__ = [
    "AUTO_CANDIDATES", "EXPENSIVE_METHODS", "FAITHFULNESS_BUDGET_SECONDS", "MIN_STEPS", "FaithfulnessPlan",
    "flip_probabilities", "plan_faithfulness", "counting",
]

#: Seconds the default faithfulness measurement may take.
FAITHFULNESS_BUDGET_SECONDS = 40.0
#: Fewest and most points of a deletion/insertion curve.
MIN_STEPS = 4
MAX_STEPS = 20
#: The maps ``method="auto"`` computes and chooses between.
AUTO_CANDIDATES = ("gradient_x_input", "rollout")
#: Measured only on request.
EXPENSIVE_METHODS = ("integrated_gradients", "occlusion")


@torch.no_grad()
def flip_probabilities(model: torch.nn.Module, volumes: Tensor, flip_tta: bool) -> tuple[Tensor, float]:
    """``(probabilities (B, K), seconds per pass)`` as :func:`~bioattn.models.ct_classifier.predict_probabilities`."""
    model.eval()
    flips = flip_axis_sets() if flip_tta else [()]
    bar = progress_bar(total=len(flips), desc="explain ct: prediction" + (" (mean over 8 flips)" if flip_tta else ""),
                       unit="pass")
    start, probabilities = time.perf_counter(), []
    try:
        for axes in flips:
            probabilities.append(model(volumes.flip(axes) if axes else volumes).float().softmax(dim=-1))
            bar.update(1)
    finally:
        bar.close()
    return torch.stack(probabilities).mean(dim=0).cpu(), (time.perf_counter() - start) / len(flips)


@dataclasses.dataclass
class FaithfulnessPlan:
    """``methods`` (``random`` last; empty: not measured, see ``reason``) measured at ``steps`` curve points."""
    methods: list[str]
    steps: int
    seconds_per_pass: float
    estimated_seconds: float
    left_out: list[str]
    reason: str

    @property
    def measured(self) -> bool:
        return bool(self.methods)

    def passes(self) -> int:
        return len(self.methods) * 2 * (self.steps + 1)

    def describe(self) -> str:
        """One line for the output: what is measured, at what cost, and what is not."""
        if not self.measured:
            return f"faithfulness: not measured ({self.reason})"
        left = (f"; not measured: {', '.join(self.left_out)} (--faithfulness-methods all, or the names, measures "
                "them)") if self.left_out else ""
        return (f"faithfulness: {', '.join(self.methods)} at {self.steps} deletion/insertion steps ({self.passes()} "
                f"forward passes of {self.seconds_per_pass:.2f} s, about {self.estimated_seconds:.0f} s; "
                f"{self.reason}){left}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "seconds_per_pass": round(self.seconds_per_pass, 4),
                "estimated_seconds": round(self.estimated_seconds, 1)}


def _requested(methods: str | Sequence[str], computed: Sequence[str]) -> tuple[list[str], bool]:
    """``(methods to measure, whether the caller named them)``; ``"default"``: the maps already computed."""
    if isinstance(methods, str) and methods == "default":
        return list(dict.fromkeys(computed)), False
    if isinstance(methods, str) and methods == "all":
        return [m for m in CT_METHODS if m != "random"], True
    names = [m.strip() for m in (methods.split(",") if isinstance(methods, str) else methods) if m.strip()]
    unknown = [m for m in names if m not in CT_METHODS]
    if unknown or not names:
        raise UserInputError(f"--faithfulness-methods: unknown method(s) {', '.join(unknown) or '(none)'}; choose "
                             f"default, all or names of {', '.join(CT_METHODS)}")
    return [m for m in dict.fromkeys(names) if m != "random"], True


def plan_faithfulness(methods: str | Sequence[str], computed: Sequence[str], *, steps: int | None,
                      seconds_per_pass: float, budget_seconds: float = FAITHFULNESS_BUDGET_SECONDS) -> FaithfulnessPlan:
    """What to measure: ``methods`` (``"default"``: the ``computed`` maps; ``"all"``; or names) against ``random``,
    at ``steps`` points or, with ``None``, as many as fit ``budget_seconds``."""
    chosen, named = _requested(methods, computed)
    if steps is not None and steps < 1:
        raise UserInputError(f"--faithfulness-steps must be >= 1, got {steps}")

    def plan(names: list[str], count: int, reason: str) -> FaithfulnessPlan:
        measured = [*names, "random"]
        left = [m for m in CT_METHODS if m not in measured]
        return FaithfulnessPlan(measured, count, seconds_per_pass, len(measured) * 2 * (count + 1) * seconds_per_pass,
                                left, reason)

    if steps is not None:
        return plan(chosen, steps, "--faithfulness-steps given")
    if named:
        return plan(chosen, MAX_STEPS, "the methods asked for")
    for names in (chosen, chosen[:1]):
        fitting = math.floor(budget_seconds / (max(seconds_per_pass, 1e-6) * 2 * (len(names) + 1))) - 1
        if fitting >= MIN_STEPS:
            return plan(names, min(MAX_STEPS, fitting), f"as many steps as fit the {budget_seconds:.0f} s budget")
    smallest = 2 * 2 * (MIN_STEPS + 1) * seconds_per_pass
    return FaithfulnessPlan([], 0, seconds_per_pass, 0.0, [m for m in CT_METHODS],
                            f"one forward pass takes {seconds_per_pass:.1f} s here, so the smallest measurement "
                            f"({chosen[0]} against random at {MIN_STEPS} steps) would take about {smallest:.0f} s, "
                            f"over the {budget_seconds:.0f} s budget; --faithfulness-steps N measures it anyway")


def counting(score: Callable[[Tensor], Tensor], bar: Any) -> Callable[[Tensor], Tensor]:
    """``score`` (masks → probabilities) that advances ``bar`` by one per mask."""
    def counted(masks: Tensor) -> Tensor:
        out = score(masks)
        bar.update(len(masks))
        return out

    return counted
