"""Which model a single ``bioattn train ct`` run keeps: the attention model, or the baseline when only it learned."""
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

#: The validation number the run selects epochs by.
CRITERION = "val_auroc"


def not_learned(metrics: Mapping[str, Any]) -> list[str]:
    """Why one model's validation numbers (its ``metrics.json`` entry) say it did not learn; empty when it learned."""
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
    """The model a single run keeps (``kept``), the other one (``None`` without a baseline) and why."""
    kept: str
    other: str | None
    reason: str
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def baseline_kept(self) -> bool:
        return self.kept == BASELINE_NAME

    def other_dir(self, run_dir: Path) -> Path | None:
        """The run directory of the model not kept."""
        if self.other is None:
            return None
        return run_dir / (HYBRID_DIR if self.baseline_kept else BASELINE_DIR)

    def other_command(self, run_dir: Path) -> str | None:
        """The ``bioattn predict ct`` command that uses the model not kept."""
        other = self.other_dir(run_dir)
        return None if other is None else f"bioattn predict ct --model {other} --input SCAN --output predictions.csv"

    def to_dict(self, run_dir: Path) -> dict[str, Any]:
        """JSON-ready ``kept_model`` record."""
        kind = {HYBRID_NAME: "HybridCT3D", BASELINE_NAME: "ResNetCT3D"}
        other = self.other_dir(run_dir)
        alternative = None if other is None else {
            "name": self.other, "model_type": kind.get(self.other or ""), "path": other.name,
            "command": self.other_command(run_dir)}
        return {"name": self.kept, "model_type": kind.get(self.kept), "criterion": CRITERION, "reason": self.reason,
                "scores": self.scores, "alternative": alternative}

    def statement(self, run_dir: Path) -> str:
        """The paragraph that opens ``summary.md``."""
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
    """The attention model, unless :func:`not_learned` finds reasons for it and none for the baseline."""
    scores = {name: {CRITERION: m.get(CRITERION), "val_accuracy": m.get("val_accuracy"),
                     "not_learned": not_learned(m)} for name, m in models.items()}
    if BASELINE_NAME not in models:
        return ModelChoice(HYBRID_NAME, None, "The run trained no baseline.", scores)
    hybrid, baseline = scores[HYBRID_NAME], scores[BASELINE_NAME]
    both = (f"Attention model {_shown(hybrid)}; same-run ResNet {_shown(baseline)} (validation AUROC is the "
            "criterion each model's best epoch was kept by).")
    if hybrid["not_learned"] and not baseline["not_learned"]:
        return ModelChoice(BASELINE_NAME, HYBRID_NAME, "Why: the attention model did not learn on this data "
                           f"({'; '.join(hybrid['not_learned'])}), while the same-run ResNet did. {both}", scores)
    if hybrid["not_learned"]:
        return ModelChoice(HYBRID_NAME, BASELINE_NAME, "Why: neither model learned on this data (the ResNet: "
                           f"{'; '.join(baseline['not_learned'])}); the attention model is the default. {both}", scores)
    return ModelChoice(HYBRID_NAME, BASELINE_NAME, f"Why: the attention model (the default) learned. {both}", scores)


def save_kept_model(run_dir: Path, choice: ModelChoice, hybrid: nn.Module, baseline: nn.Module | None,
                    saved: SavedPreprocessing, thresholds: Mapping[str, float]) -> None:
    """Write the kept model into ``run_dir`` (the attention model into ``hybrid_attention/`` if not kept)."""
    models = {HYBRID_NAME: hybrid, **({BASELINE_NAME: baseline} if baseline is not None else {})}
    models[choice.kept].save_pretrained(run_dir)  # type: ignore[operator]
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
