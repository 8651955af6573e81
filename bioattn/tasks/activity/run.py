"""An activity run's preparation (:func:`prepare`) and its ``metrics.json`` and ``summary.md`` (:func:`report`)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bioattn.io import write_table
from bioattn.metrics import mean_std
from bioattn.report import format_mean_sd, format_table
from bioattn.tasks.activity.scores import BLEND_NAME, DEEP_NAME, METRICS, MOTIF_RIDGE_NAME, RIDGE_NAME
from bioattn.tasks.activity.branches import BLEND_PARTS
from bioattn.tasks.activity.protocols import keep_best, out_of_fold_rows
from bioattn.tasks.activity.train import CANDIDATE_NAMES, HEADLINE, QUICK_ROWS, ActivityOptions, load_data
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.tasks.driver import MembersRun, RunProtocol, metrics_document
from bioattn.training import check_run_dir, prepare_run_dir

MODEL_NAME = "ActivityRegressor (this run)"
#: The first line of a ``--quick`` run's summary and of its terminal headline.
SMOKE_TEXT = (f"smoke run (--quick): a tiny model, 2 short epochs, at most {QUICK_ROWS} rows; these numbers only show "
              "that the pipeline runs, not what a model reaches on this data: rerun without --quick")
KEPT_TEXT = {"blend": "the blend", "deep": "the deep model alone", "kmers": "the k-mer ridge alone",
             "motifs": "the known-motif ridge alone"}
#: ``metrics.json`` ``protocol.description`` of each of :attr:`ActivityOptions.protocol`'s values.
PROTOCOL_TEXT = {"holdout": "train on the training file(s), early stopping and scores on the --dev file",
                 "fit_all": "train on every row (early stopping on a held-back tenth); nothing held out is scored",
                 "file_folds": "one fold per training file (the data's own folds); scores on each held-out file",
                 "cv": "K-fold cross-validation grouped by element; scores on each held-out fold"}


def summarise(results: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model summary, {baseline: summary})``: each metric's mean ± sd over the members' held-out scores."""
    scored = [r["scores"] for r in results if "scores" in r]
    if not scored:
        return {}, {}
    names = list(scored[0])
    summaries = {name: mean_std([s[name] for s in scored]) for name in names}
    return summaries.pop("model"), summaries


def warnings_of(model: dict[str, Any], baselines: dict[str, Any], results: list[dict[str, Any]],
                candidates: tuple[str, ...] = ()) -> list[str]:
    """The summary's warnings: a model that learned nothing, a baseline (not in ``candidates``) at least as good."""
    out = []
    for result in results:
        validation = result["training"]["validation"].get(f"val_{HEADLINE}", 0.0)
        if validation <= 0.05:
            weight = result["training"].get("deep_weight")
            advice = (f"the saved blend gives it weight {weight:g}" if weight is not None else
                      "use the k-mer ridge baseline, or give more sequences")
            out.append(f"{result['member']}: the model learned nothing usable (validation Pearson {validation:.3f} on "
                       f"{result['training']['sizes']['validation']} sequences); {advice}")
    if model:
        for name, summary in baselines.items():
            if name in candidates:
                continue
            better = summary[HEADLINE]["mean"] > model[HEADLINE]["mean"]
            if better or (summary[HEADLINE]["mean"] == model[HEADLINE]["mean"] and name != DEEP_NAME):
                advice = "rerun with --blend none to keep it" if name == DEEP_NAME else "prefer it on this data"
                out.append(f"{name} reaches Pearson {summary[HEADLINE]['mean']:.3f}, at least the model's "
                           f"{model[HEADLINE]['mean']:.3f}: {advice}")
    return out


def blend_of(options: ActivityOptions, data: Any) -> dict[str, Any]:
    """``metrics.json``'s ``blend``: what the saved models add to their deep part."""
    if options.blend == "none":
        return {"kind": "none", "text": "the deep model alone"}
    sources = []
    if options.blend in ("auto", "kmers"):
        sources.append("k-mer counts (k=1..6)")
    if options.blend in ("auto", "motifs"):
        motifs = data.motif_set.config
        sources.append(f"scores of {len(motifs['ids'])} motif matrices ({motifs['source']}, {motifs['bins']} parts "
                       "of the element)")
    ridges = " and ".join(f"a ridge regression on {source}" for source in sources)
    if options.deep_weight is None:
        text = (f"the deep model blended with {ridges} (penalties by leave-one-out CV, features clipped to their "
                "training range), fitted on the same training rows, the weights chosen on the rows each deep model "
                "early-stopped on (per model below)")
    else:
        text = (f"{options.deep_weight:g} × the deep model + {1 - options.deep_weight:g} × {ridges} (shared "
                "equally), fitted on the same training rows")
    return {"kind": options.blend, "deep_weight": options.deep_weight if options.deep_weight is not None else "auto",
            "text": text}


def kept_text(blend: dict[str, Any], kept: dict[str, Any]) -> str:
    """The summary's "Saved model:" sentence."""
    means = kept.get("means") or {}
    if not means:
        return blend["text"]
    others = ", ".join(f"{KEPT_TEXT[name].replace(' alone', '')} {value:.3f}" for name, value in means.items()
                       if name not in ("blend", kept["kept"]))
    if kept["kept"] == "blend":
        return (f"{blend['text']}; kept because it beat each of its parts on the held-out rows of the same models "
                f"(mean {HEADLINE} {means['blend']:.3f}; {others})")
    return (f"{KEPT_TEXT[kept['kept']]} (mean {HEADLINE} {means[kept['kept']]:.3f} on the held-out rows), because "
            f"the blend did not beat it on the same rows (blend {means['blend']:.3f}; {others}); the blend was "
            f"{blend['text']}")


def format_summary(metrics: dict[str, Any]) -> str:
    named = [(MODEL_NAME, metrics["model"]), *metrics["baselines"].items()]
    rows = [[name, *(format_mean_sd(summary.get(m)) for m in METRICS)] for name, summary in named]
    lines = [f"# Activity regression: {metrics['source']}", ""]
    if metrics.get("quick"):
        lines += [f"**{SMOKE_TEXT[0].upper() + SMOKE_TEXT[1:]}.**", ""]
    lines += [*(f"{line[0].upper()}{line[1:]}" for line in metrics.get("plan", [])), ""] if metrics.get("plan") else []
    lines += [f"Protocol: {metrics['protocol']['description']}; targets: {', '.join(metrics['target_names'])}; flanks "
              f"stripped: {metrics['flanks'][0] or '-'} / {metrics['flanks'][1] or '-'}; strand: {metrics['strand']}.",
              f"Saved model: {kept_text(metrics['blend'], metrics.get('kept', {}))}.", ""]
    if rows and metrics["model"]:
        lines.append(format_table(["model", *METRICS], rows,
                                  title="Held-out scores, mean ± sd over the models of the run"))
        targets = metrics["target_names"]
        if len(targets) > 1:
            per_output = [[name, *(format_mean_sd(summary.get(f"{HEADLINE}:{t}")) for t in targets)]
                          for name, summary in named]
            lines += ["", format_table(["model", *(f"{HEADLINE} {t}" for t in targets)], per_output,
                                       title="Per output, on the held-out rows that measured it")]
    else:
        lines.append("No held-out rows (--fit-all): only validation scores, per model below.")
    lines.append("")
    for result in metrics["members"]:
        training = result["training"]
        lines.append(f"- {result['member']}: train {result['sizes']['train']}, held out {result['sizes']['held_out']}; "
                     f"deep model's validation Pearson {training['validation'].get('val_pearson', float('nan')):.3f}; best epoch "
                     f"{training['best_epoch']} of {training['epochs_run']} ({training['stop_reason']})"
                     + (f"; blend weights {weights_text(training['blend_weights'])}" if "blend_weights" in training
                        else f"; deep weight {training['deep_weight']:g}" if "deep_weight" in training else "")
                     + (f" ({training['blend_note']})" if "blend_note" in training else ""))
    for warning in metrics["warnings"]:
        lines.append(f"\n**warning:** {warning}")
    return "\n".join(lines) + "\n"


def candidates_of(options: ActivityOptions) -> tuple[str, ...]:
    """The scores-table names of what the run chose its saved model among."""
    parts = BLEND_PARTS[options.blend]
    return tuple(CANDIDATE_NAMES[name] for name in ("blend", "deep", *parts)) if parts else ()


def weights_text(weights: dict[str, float]) -> str:
    names = {"deep": "deep", "kmers": "k-mer ridge", "motifs": "motif ridge"}
    return ", ".join(f"{names[name]} {value:g}" for name, value in weights.items())


def prepare(options: ActivityOptions) -> tuple[ActivityOptions, TaskData]:
    """Check ``options.out``, read the data, create the run directory."""
    check_run_dir(options.out, resume=False, overwrite=options.overwrite, resumable=False)
    data = load_data(options)
    run_dir = prepare_run_dir(options.out, resume=False, overwrite=options.overwrite, resumable=False)
    options = dataclasses.replace(options, out=run_dir)
    return options, TaskData(train=data.pool, dev=data.dev, pool=data.pool, target_names=list(data.pool.target_names),
                             source=", ".join(data.files), seed=options.seed, extra={"activity_data": data})


def report(options: ActivityOptions, data: TaskData, run: MembersRun[FittedMember]) -> tuple[dict[str, Any], str]:
    """``(metrics.json, summary.md)`` after :func:`~bioattn.tasks.activity.protocols.keep_best`."""
    activity = data.extra["activity_data"]
    kept = keep_best(options, run)
    data.extra["out_of_fold"] = out_of_fold_rows(kept, run)
    results = [fitted.summary for fitted in run.results]
    model, baselines = summarise(results)
    held_out = {name: {"held_out": summary} for name, summary in [(MODEL_NAME, model), *baselines.items()] if summary}
    members = sum(not member.alone for member in run.members) or 1
    protocol = RunProtocol(seeds=options.seeds, cv=members if options.protocol in ("cv", "file_folds") else None,
                           description=PROTOCOL_TEXT[options.protocol].replace("K-fold", f"{members}-fold"),
                           name_override="fit_all" if options.protocol == "fit_all" else None)
    metrics = metrics_document(
        "activity", dataset=options.dataset or ", ".join(Path(f).name for f in activity.files),
        protocol=protocol.to_dict(),
        splits={"pool": len(activity.pool), **({"dev": len(activity.dev)} if activity.dev is not None else {})},
        scores=held_out, target_names=list(activity.pool.target_names), headline_split="held_out",
        source=", ".join(Path(f).name for f in activity.files), flanks=list(activity.flanks), strand=options.strand,
        input_length=activity.input_length, blend=blend_of(options, activity), model=model, baselines=baselines,
        members=results, kept=kept, plan=data.extra["plan"].lines, quick=options.quick,
        warnings=warnings_of(model, baselines, results, candidates=candidates_of(options)))
    return metrics, format_summary(metrics)


def write_out_of_fold(run_dir: Path, rows: list[list[Any]]) -> None:
    """``out_of_fold.csv`` of a cross-validation."""
    if rows:
        write_table(run_dir / "out_of_fold.csv", ["record", "fold", "target", "measured", "prediction",
                                                  "ridge_prediction"], rows)


def headline_line(metrics: dict[str, Any]) -> str:
    """One line for the terminal: the model's and the ridge's Pearson."""
    model = metrics["model"]
    if not model:
        validation = [r["training"]["validation"].get("val_pearson") for r in metrics["members"]]
        return f"deep model's validation Pearson {validation[0]:.3f} (no held-out rows: --fit-all)"
    kept = (metrics.get("kept") or {}).get("kept", "blend")
    text = ("smoke run (--quick), not a model to use: " if metrics.get("quick") else "") + \
        f"Pearson {format_mean_sd(model[HEADLINE])}" + (f", {KEPT_TEXT[kept]}" if kept != "blend" else "")
    beside = [f"{label} {format_mean_sd(metrics['baselines'][name][HEADLINE])}"
              for name, label in ((BLEND_NAME, "blend"), (DEEP_NAME, "deep alone"), (RIDGE_NAME, "k-mer ridge"),
                                  (MOTIF_RIDGE_NAME, "motif ridge"))
              if name in metrics["baselines"] and not (name == BLEND_NAME and kept == "blend")]
    return text + (f" ({', '.join(beside)})" if beside else "")
