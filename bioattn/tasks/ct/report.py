"""The CT task's tables, trust sections and hints of ``summary.md``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bioattn.report import format_mean_sd, format_table
from bioattn.tasks.ct.data import CTData
from bioattn.tasks.ct.options import BASELINE_DIR, BASELINE_NAME, HYBRID_NAME, PUBLISHED
from bioattn.tasks.ct.preprocessing import SavedPreprocessing
from bioattn.tasks.ct.selection import ModelChoice
from bioattn.tasks.trust import baseline_warning, format_trust

__all__ = ["comparison_table", "construction_line", "ensemble_table", "trust_sections", "not_learned_hints"]


def comparison_table(dataset: str | None, results: dict[str, dict[str, Any]]) -> str:
    """Markdown table: this run's models (val, and test when present) beside the published MedMNIST numbers."""
    header = ["model", "params", "val AUROC", "val accuracy", "test AUROC", "test accuracy", "source"]
    rows: list[list[Any]] = [
        [name, f"{m['parameters'] / 1e6:.2f} M", m.get("val_auroc"), m.get("val_accuracy"), m.get("test_auroc"),
         m.get("test_accuracy"), f"this run ({m['epochs_run']} epochs, "
                                 f"{m['train_wall_minutes_this_invocation']:.1f} min wall, "
                                 f"{m['train_cpu_minutes_this_invocation']:.1f} CPU-min)"]
        for name, m in results.items()
    ]
    rows += [[name, None, None, None, auroc, accuracy, "MedMNIST v2 paper, official test split"]
             for name, (auroc, accuracy) in PUBLISHED.get(dataset or "", {}).items()]
    return format_table(header, rows)


def ensemble_table(results: dict[str, Any]) -> str:
    """Markdown table of a ``--seeds`` / ``--cv`` run."""
    key = "oof" if "oof" in results else "val"
    header = ["model", f"{'out-of-fold' if key == 'oof' else 'ensemble val'} AUROC", "accuracy",
              f"members' {'held-out fold' if key == 'oof' else 'val'} AUROC (mean ± sd)", "CPU-min (sum)"]
    rows = []
    for name, summary in results["members"].items():
        headline = results["oof"][name] if key == "oof" else results["ensemble"][name]
        cpu = summary.get("train_cpu_minutes_this_invocation", {})
        rows.append([name, headline.get(f"{key}_auroc"), headline.get(f"{key}_accuracy"),
                     format_mean_sd(summary.get("val_auroc"), 3),
                     f"{cpu.get('mean', 0) * cpu.get('n', 0):.1f}" if cpu else None])
    for name in [n for n in results.get("oof", {}) if n not in results["members"]]:  # baselines without members
        rows.append([name, results["oof"][name].get("oof_auroc"), results["oof"][name].get("oof_accuracy"),
                     format_mean_sd(results["cv"][name].get("val_auroc"), 3), None])
    return format_table(header, rows)


def trust_sections(results: dict[str, Any], run_dir: Path | None = None, *,
                   choice: ModelChoice | None = None) -> list[str]:
    """The trust part of a single run's ``summary.md`` (each model's warnings and confusion matrix)."""
    models = results.get("models")
    if not models:
        return []
    for name, m in models.items():
        report = m.get("trust") or {}
        report["warnings"] = [_naming(line, name) for line in report.get("warnings", [])]
    sections = [format_trust(m["trust"], name) for name, m in models.items() if m.get("trust")]
    hybrid = models.get(HYBRID_NAME, {})
    beaten = baseline_warning(HYBRID_NAME, hybrid.get("val_auroc"),
                              {name: m.get("val_auroc") for name, m in models.items() if name != HYBRID_NAME},
                              "validation AUROC")
    if choice is not None and choice.baseline_kept:
        beaten = None
    if beaten and BASELINE_NAME in models and run_dir is not None:
        beaten += (f"; it is saved as a run of its own: bioattn predict ct --model {run_dir / BASELINE_DIR} --input "
                   "SCAN --output predictions.csv (explain ct --model accepts it too)")
    if beaten:
        hybrid.setdefault("trust", {}).setdefault("warnings", []).append(beaten)
        sections.insert(0, beaten)
    return sections


def _naming(line: str, model: str) -> str:
    """``"warning: ..."`` → ``"warning: [model] ..."`` (the same for ``note:``), once."""
    for prefix in ("warning: ", "note: "):
        if line.startswith(prefix) and not line.startswith(f"{prefix}[{model}]"):
            return f"{prefix}[{model}] {line[len(prefix):]}"
    return line


def construction_line(models: dict[str, dict[str, Any]]) -> str | None:
    """How the attention model started, when it started from the same-run ResNet."""
    hybrid = models.get(HYBRID_NAME, {})
    if hybrid.get("init") != "resnet":
        return None
    epoch = hybrid.get("best_epoch")
    kept = ("epoch 0, the ResNet's own weights: training attention did not improve validation AUROC"
            if epoch == 0 else f"epoch {epoch}")
    return (f"the attention model started as the same-run ResNet (its trunk and readout, frozen) plus an attention "
            f"branch behind a gate that started at 0; only the branch and the gate trained. Kept: {kept}; gate "
            f"{hybrid.get('attention_gate', 0.0):.4g} (--init scratch trains it from random weights instead)")


def not_learned_hints(data: CTData, saved: SavedPreprocessing, models: dict[str, dict[str, Any]]) -> list[str]:
    """``hint:`` lines when the attention model of a single manifest run did not learn."""
    hybrid = models.get(HYBRID_NAME, {})
    report = hybrid.get("trust") or {}
    counts = list((report.get("class_counts") or {}).values())
    at_chance = bool(counts) and hybrid.get("val_accuracy", 1.0) <= max(counts) / sum(counts) + 1e-9
    warned = any(line.startswith("warning: ") for line in report.get("warnings", []))
    if data.source != "manifest" or not (warned or at_chance):
        return []
    counts = np.bincount(data.labels["train"])
    smallest = int(counts[counts > 0].min())
    how = ("starts as the same-run ResNet and trains attention only"
           if hybrid.get("init") == "resnet" else "is trained from scratch")
    hints = [f"hint: the attention model {how} on {len(data.labels['train'])} volumes "
             f"({smallest} of the smallest class); with a few dozen, a small or faint finding often stays below what "
             "it can pick up: more volumes help most, and --cv 5 shows whether any split learns"]
    profile = saved.profile
    if data.preprocessing is not None and data.preprocessing.window is None and not profile.get("binary"):
        hints.append(f"hint: the inputs were not windowed (they span {profile.get('intensity_min', 0):.4g}.."
                     f"{profile.get('intensity_max', 0):.4g}); --intensity-window LOW HIGH maps the range of the finding onto "
                     "0..1 (CT: e.g. -160 240 HU for soft tissue)")
    size = data.preprocessing.output_size if data.preprocessing is not None else None
    largest = profile.get("shape_max")
    if size is not None and largest is not None and any(n > s for n, s in zip(largest, size)):
        hints.append(f"hint: volumes of up to {' x '.join(map(str, largest))} voxels are resized to "
                     f"{' x '.join(map(str, size))}: a finding a few voxels across shrinks further (a larger --size, "
                     "or --spacing with --fit crop-pad, keeps its detail)")
    return hints
