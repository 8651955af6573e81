"""Which model a single ``bioattn train ct`` run keeps in its run directory: the attention model, or its same-run
ResNet baseline when the run's own validation numbers say the attention model did not learn and the baseline did.

:func:`not_learned` lists why one model's validation predictions say it did not learn (the trust report's "barely
learned" — every probability within :data:`~bioattn.tasks.trust.NEAR_CHANCE` of chance —, one class predicted for
every validation volume, or a validation accuracy no better than always predicting the largest class; the same
conditions ``summary.md`` warns about). :func:`choose_model` keeps the attention model unless it did not learn while
the baseline did (then the baseline, whose validation AUROC, the run's selection criterion, is shown beside the
attention model's); when both learned the attention model stays, and ``summary.md`` still names a baseline that
beats it. :func:`save_kept_model` writes the kept model where ``bioattn predict ct --model RUN`` and ``bioattn explain
ct`` read it (``RUN/config.json``, ``model.safetensors``, ``preprocessing.json`` with its own decision threshold) and
the other one in a run directory of its own: ``RUN/baseline_resnet/`` (always the baseline) or, when the baseline is
kept, ``RUN/hybrid_attention/`` for the attention model. :meth:`ModelChoice.to_dict` is what ``metrics.json`` and
``run_config.json`` record as ``kept_model``; :meth:`ModelChoice.statement` the paragraph that opens ``summary.md``.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from torch import nn

from bioattn.io import write_json
from bioattn.tasks.ct.options import BASELINE_DIR, BASELINE_NAME, HYBRID_DIR, HYBRID_NAME
from bioattn.tasks.ct.preprocessing import SavedPreprocessing

__all__ = ["CRITERION", "ModelChoice", "not_learned", "choose_model", "save_kept_model"]

#: The validation number the run selects epochs by, and shows beside each model's choice.
CRITERION = "val_auroc"


def not_learned(metrics: Mapping[str, Any]) -> list[str]:
    """Why the validation numbers of one model (its entry of ``metrics.json`` ``models``: ``val_accuracy`` and
    ``trust``, see :func:`~bioattn.tasks.trust.trust_report`) say it did not learn; empty when it learned."""
    trust = metrics.get("trust") or {}
    reasons = []
    if trust.get("barely_learned"):
        reasons.append(f"it has barely learned: every validation probability lies within "
                       f"{float(trust.get('chance_distance', 0.0)):.3f} of chance")
    if trust.get("single_class"):
        reasons.append("it predicts one class for every validation volume")
    counts = [int(n) for n in (trust.get("class_counts") or {}).values()]
    accuracy = metrics.get("val_accuracy")
    if counts and sum(counts) and accuracy is not None and accuracy <= max(counts) / sum(counts) + 1e-9:
        reasons.append(f"its validation accuracy {accuracy:.3f} is no better than always predicting the largest "
                       f"class ({max(counts) / sum(counts):.3f})")
    return reasons


@dataclass(frozen=True)
class ModelChoice:
    """The model a single run keeps (``kept``, a model name of ``metrics.json`` ``models``) and the other one
    (``other``, ``None`` without a baseline); ``reason`` says why; ``scores``: per model its ``val_auroc``,
    ``val_accuracy`` and ``not_learned`` reasons."""

    kept: str
    other: str | None
    reason: str
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def baseline_kept(self) -> bool:
        """Whether the baseline replaces the attention model in the run directory."""
        return self.kept == BASELINE_NAME

    def other_dir(self, run_dir: Path) -> Path | None:
        """The run directory of the model not kept: ``RUN/baseline_resnet`` or ``RUN/hybrid_attention``."""
        if self.other is None:
            return None
        return run_dir / (HYBRID_DIR if self.baseline_kept else BASELINE_DIR)

    def other_command(self, run_dir: Path) -> str | None:
        """The ``bioattn predict ct`` command that uses the model not kept."""
        other = self.other_dir(run_dir)
        return None if other is None else f"bioattn predict ct --model {other} --input SCAN --output predictions.csv"

    def to_dict(self, run_dir: Path) -> dict[str, Any]:
        """JSON-ready: ``name``, ``model_type``, ``criterion``, ``reason``, ``scores`` and the ``alternative``
        (``name``, ``model_type``, ``path`` relative to the run directory, ``command``; ``None`` without a baseline)."""
        kind = {HYBRID_NAME: "HybridCT3D", BASELINE_NAME: "ResNetCT3D"}
        other = self.other_dir(run_dir)
        alternative = None if other is None else {
            "name": self.other, "model_type": kind.get(self.other or ""), "path": other.name,
            "command": self.other_command(run_dir)}
        return {"name": self.kept, "model_type": kind.get(self.kept), "criterion": CRITERION, "reason": self.reason,
                "scores": self.scores, "alternative": alternative}

    def statement(self, run_dir: Path) -> str:
        """The paragraph that opens ``summary.md``: which model the run directory holds, why, and the command that
        uses the other."""
        text = (f"kept model: {self.kept} (in {run_dir}: bioattn predict ct --model {run_dir} and explain ct use "
                f"it). {self.reason}")
        command = self.other_command(run_dir)
        if command:
            text += f"\nthe other model ({self.other}): {command} (explain ct --model {self.other_dir(run_dir)} too)"
        return text


def _shown(scores: Mapping[str, Any]) -> str:
    values = [f"{label} {scores[key]:.3f}" for key, label in ((CRITERION, "validation AUROC"),
                                                              ("val_accuracy", "accuracy"))
              if scores.get(key) is not None]
    return ", ".join(values) or "no validation numbers"


def choose_model(models: Mapping[str, Mapping[str, Any]]) -> ModelChoice:
    """The model a single run keeps among ``models`` (``metrics.json`` ``models``: the attention model under
    :data:`~bioattn.tasks.ct.options.HYBRID_NAME`, the baseline, when trained, under ``BASELINE_NAME``): the
    attention model, unless :func:`not_learned` finds reasons in its validation numbers and none in the baseline's."""
    scores = {name: {CRITERION: m.get(CRITERION), "val_accuracy": m.get("val_accuracy"),
                     "not_learned": not_learned(m)} for name, m in models.items()}
    if BASELINE_NAME not in models:
        return ModelChoice(HYBRID_NAME, None, "The run trained no baseline.", scores)
    hybrid, baseline = scores[HYBRID_NAME], scores[BASELINE_NAME]
    both = (f"attention model {_shown(hybrid)}; same-run ResNet {_shown(baseline)} (validation AUROC is the "
            "criterion each model's best epoch was kept by)")
    if hybrid["not_learned"] and not baseline["not_learned"]:
        return ModelChoice(BASELINE_NAME, HYBRID_NAME,
                           f"Why: the attention model did not learn on this data ({'; '.join(hybrid['not_learned'])}), "
                           f"while the same-run ResNet did. {both[0].upper()}{both[1:]}.", scores)
    if hybrid["not_learned"]:
        return ModelChoice(HYBRID_NAME, BASELINE_NAME,
                           f"Why: neither model learned on this data (the ResNet: {'; '.join(baseline['not_learned'])});"
                           f" the attention model is the default. {both[0].upper()}{both[1:]}.", scores)
    return ModelChoice(HYBRID_NAME, BASELINE_NAME, f"Why: the attention model (the default) learned. {both[0].upper()}{both[1:]}.",
                       scores)


def save_kept_model(run_dir: Path, choice: ModelChoice, hybrid: nn.Module, baseline: nn.Module | None,
                    saved: SavedPreprocessing, thresholds: Mapping[str, float]) -> None:
    """Write the kept model into ``run_dir`` (``config.json``, ``model.safetensors``, ``preprocessing.json`` with
    its decision threshold from ``thresholds`` {model name: threshold}) and, when the baseline is kept, the attention
    model into ``run_dir/hybrid_attention/`` (removed when the attention model is kept, e.g. by a resumed run); the
    baseline stays in ``run_dir/baseline_resnet/``. Records :meth:`ModelChoice.to_dict` in ``run_config.json``."""
    models = {HYBRID_NAME: hybrid, **({BASELINE_NAME: baseline} if baseline is not None else {})}
    kept = models[choice.kept]
    kept.save_pretrained(run_dir)  # type: ignore[operator]
    dataclasses.replace(saved, threshold=thresholds.get(choice.kept, 0.5)).save(run_dir)
    elsewhere = run_dir / HYBRID_DIR
    if choice.baseline_kept:
        hybrid.save_pretrained(elsewhere)  # type: ignore[operator]
        dataclasses.replace(saved, threshold=thresholds.get(HYBRID_NAME, 0.5)).save(elsewhere)
    elif elsewhere.is_dir():
        shutil.rmtree(elsewhere)
    record = run_dir / "run_config.json"
    if record.is_file():
        write_json(record, {**json.loads(record.read_text(encoding="utf-8")), "kept_model": choice.to_dict(run_dir)})
