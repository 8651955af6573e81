"""Run an activity training end to end (:func:`run_activity`) and write what it found.

The run directory gets, besides each model's ``config.json`` + ``model.safetensors`` (in ``fold<k>/`` or
``seed<s>/`` for several models, with a top ``config.json`` naming them):

- ``metrics.json``: ``schema_version``, ``task`` (``"activity"``), ``headline_metric`` (``"pearson"``),
  ``protocol``, ``splits`` (sizes), ``target_names``, ``flanks``, ``strand``, ``model`` and ``baselines`` (per
  metric ``{"mean", "sd", "n"}`` over the members), ``members`` (each member's scores and training summary) and
  ``warnings``.
- ``summary.md``: the same as a table, model beside the baselines, with any warning (a baseline that beats the
  model, a model that learned nothing on its validation rows).
- ``out_of_fold.csv`` (cross-validation): ``record, fold, target, measured, prediction, ridge_prediction``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bioattn.io import write_json, write_table, write_text
from bioattn.metrics import mean_std
from bioattn.report import format_mean_sd, format_table
from bioattn.tasks.activity.scores import METRICS, RIDGE_NAME
from bioattn.tasks.activity.train import HEADLINE, ActivityOptions, load_data, run_members
from bioattn.tasks.base import METRICS_SCHEMA_VERSION
from bioattn.tasks.common import save_ensemble
from bioattn.training import check_run_dir, prepare_run_dir

MODEL_NAME = "ActivityRegressor (this run)"


def summarise(results: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model summary, {baseline: summary})``: each metric's mean ± sd over the members' held-out scores."""
    scored = [r["scores"] for r in results if "scores" in r]
    if not scored:
        return {}, {}
    names = list(scored[0])
    summaries = {name: mean_std([s[name] for s in scored]) for name in names}
    return summaries.pop("model"), summaries


def warnings_of(model: dict[str, Any], baselines: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    """What the summary must say about the numbers: a baseline at least as good as the model, a model that
    learned nothing on its validation rows."""
    out = []
    for result in results:
        validation = result["training"]["validation"].get(f"val_{HEADLINE}", 0.0)
        if validation <= 0.05:
            out.append(f"{result['member']}: the model learned nothing usable (validation Pearson {validation:.3f} on "
                       f"{result['training']['sizes']['validation']} sequences); use the k-mer ridge baseline, or "
                       "give more sequences")
    if model:
        for name, summary in baselines.items():
            if summary[HEADLINE]["mean"] >= model[HEADLINE]["mean"]:
                out.append(f"{name} reaches Pearson {summary[HEADLINE]['mean']:.3f}, at least the model's "
                           f"{model[HEADLINE]['mean']:.3f}: prefer it on this data")
    return out


def format_summary(metrics: dict[str, Any]) -> str:
    rows = []
    for name, summary in [(MODEL_NAME, metrics["model"]), *metrics["baselines"].items()]:
        rows.append([name, *(format_mean_sd(summary.get(m)) for m in METRICS)])
    lines = [f"# Activity regression: {metrics['source']}", "",
             f"Protocol: {metrics['protocol']}; targets: {', '.join(metrics['target_names'])}; flanks stripped: "
             f"{metrics['flanks'][0] or '-'} / {metrics['flanks'][1] or '-'}; strand: {metrics['strand']}.", ""]
    if rows and metrics["model"]:
        lines.append(format_table(["model", *METRICS], rows,
                                  title="Held-out scores, mean ± sd over the models of the run"))
    else:
        lines.append("No held-out rows (--fit-all): only validation scores, per model below.")
    lines.append("")
    for result in metrics["members"]:
        training = result["training"]
        lines.append(f"- {result['member']}: train {result['sizes']['train']}, held out {result['sizes']['held_out']}; "
                     f"validation Pearson {training['validation'].get('val_pearson', float('nan')):.3f}; best epoch "
                     f"{training['best_epoch']} of {training['epochs_run']} ({training['stop_reason']})")
    for warning in metrics["warnings"]:
        lines.append(f"\n**warning:** {warning}")
    return "\n".join(lines) + "\n"


def run_activity(options: ActivityOptions) -> dict[str, Any]:
    """Train and score the run of ``options`` (protocols: :mod:`bioattn.tasks.activity.train`); write
    ``metrics.json``, ``summary.md`` and (cross-validation) ``out_of_fold.csv``; return the metrics."""
    check_run_dir(options.out, resume=False, overwrite=options.overwrite, resumable=False)
    data = load_data(options)
    run_dir = prepare_run_dir(options.out, resume=False, overwrite=options.overwrite, resumable=False)
    outcome = run_members(options, data, run_dir)
    results = outcome["members"]
    if outcome["member_dirs"]:
        save_ensemble(run_dir, "ActivityRegressor", outcome["member_dirs"])
    model, baselines = summarise(results)
    metrics: dict[str, Any] = {
        "schema_version": METRICS_SCHEMA_VERSION, "task": "activity", "headline_metric": HEADLINE,
        "protocol": options.protocol, "source": ", ".join(Path(f).name for f in data.files),
        "splits": {"pool": len(data.pool), **({"dev": len(data.dev)} if data.dev is not None else {})},
        "target_names": list(data.pool.target_names), "flanks": list(data.flanks), "strand": options.strand,
        "input_length": data.input_length, "model": model, "baselines": baselines,
        "members": results, "warnings": warnings_of(model, baselines, results),
    }
    write_json(run_dir / "metrics.json", metrics)
    if outcome["out_of_fold"]:
        write_table(run_dir / "out_of_fold.csv", ["record", "fold", "target", "measured", "prediction",
                                                  "ridge_prediction"], outcome["out_of_fold"])
    summary = format_summary(metrics)
    write_text(run_dir / "summary.md", summary)
    for warning in metrics["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return metrics


def headline_line(metrics: dict[str, Any]) -> str:
    """One line for the terminal: the model's and the ridge's Pearson."""
    model, ridge = metrics["model"], metrics["baselines"].get(RIDGE_NAME)
    if not model:
        validation = [r["training"]["validation"].get("val_pearson") for r in metrics["members"]]
        return f"validation Pearson {validation[0]:.3f} (no held-out rows: --fit-all)"
    text = f"Pearson {format_mean_sd(model[HEADLINE])}"
    return text + (f" (k-mer ridge {format_mean_sd(ridge[HEADLINE])})" if ridge else "")
