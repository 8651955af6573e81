"""The promoter task's protocols (:func:`run_promoter`) on the shared driver (:mod:`bioattn.tasks.driver`):
holdout (one model, or one per seed as an ensemble) and stratified, grouped cross-validation (the fold models as
an ensemble, out-of-fold probabilities), each beside the same-run baselines, written as ``metrics.json`` (the
shared schema) and ``summary.md``. The options, data loading and fitting of one model are in
:mod:`bioattn.tasks.promoter.train`; the tables in :mod:`bioattn.tasks.promoter.report`."""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Mapping

import numpy as np
from torch import nn

from bioattn.metrics import classification_metrics, mean_std
from bioattn.models.ensemble import Ensemble
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.driver import (
    Member,
    RunProtocol,
    metrics_document,
    plan_members,
    run_members,
    write_out_of_fold,
    write_run_report,
)
from bioattn.tasks.promoter.composition import save_composition
from bioattn.tasks.promoter.baselines import run_baselines
from bioattn.tasks.trust import baseline_warning, trust_report
from bioattn.tasks.promoter.data import Split, dev_split, stratified_group_folds
from bioattn.training import TrainConfig, check_run_dir, prepare_run_dir
from bioattn.distributed import is_main_process
from bioattn.tasks.promoter.report import (
    format_report,
    model_metrics,
)
from bioattn.tasks.promoter.train import (
    CV_FOLDS,
    ENSEMBLE_NAME,
    MEMBERS_NAME,
    MODEL_NAME,
    PUBLISHED_GUE,
    PromoterData,
    PromoterOptions,
    QUICK_ROWS,
    Scores,
    default_config,
    load_data,
    quick_config,
    quick_options,
    score,
    train_model,
)


def _member_scores(per_member: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """{split: mean ± sd over members} of the members' {split: metrics}."""
    return {split: mean_std([member[split] for member in per_member]) for split in per_member[0]}


def row_cap(options: PromoterOptions) -> str:
    """What the split sizes printed before training were capped by: ``" (at most 1,500 per split: --quick)"``, or
    ``""`` when every row was read."""
    if options.max_rows is None:
        return ""
    by = "--quick" if options.quick and options.max_rows == QUICK_ROWS else "--max-rows"
    return f" (at most {options.max_rows:,} per split, a seeded random subset: {by})"


def run_holdout(data: PromoterData, options: PromoterOptions, config: TrainConfig) -> dict[str, Any]:
    """Train on ``train``, early-stop on ``dev``, score every split but ``train``; fit the baselines the same way.

    With ``options.seeds`` one model per seed (``seed<S>/``, each a complete run directory) on the same split;
    the run directory itself becomes their ensemble (averaged probabilities), scored on the same splits.
    """
    splits = data.splits
    evals = {name: split for name, split in splits.items() if name != "train"}
    print(f"{options.name}: " + ", ".join(f"{n} {len(s):,}" for n, s in splits.items())
          + f" sequences{row_cap(options)}, {len(data.class_names)} classes, up to {data.max_len} nt", file=sys.stderr)
    plan = plan_members(options.out, RunProtocol.of(options), config.seed)
    seeds = [member.index for member in plan]

    def train_seed(member: Member) -> tuple[nn.Module, dict[str, Any]]:
        return train_model(splits["train"], splits["dev"], evals, member.run_dir,
                           dataclasses.replace(config, seed=member.index), options, data.max_len, data.class_names,
                           options.resume and member.run_dir.exists())

    trained = run_members(options.out, plan, train_seed, member_type="PromoterClassifier").results
    members = [model for model, _ in trained]
    member_scores = [info.pop("scores", {}) for _, info in trained]
    member_info = [info for _, info in trained]
    if not is_main_process():
        return {}
    print("fitting baselines (GC threshold, k-mer logistic regression) on the same split ...", file=sys.stderr)
    baselines = run_baselines(splits["train"], evals, config.seed)
    sizes = {n: len(s) for n, s in splits.items()}
    if not options.seeds:
        scores = {MODEL_NAME: member_scores[0], **baselines}
        return {"splits": sizes, "scores": scores, "training": member_info[0],
                "trust": _trust(members[0], splits["dev"], data.class_names, scores, "dev", "--cv 5")}
    ensemble = Ensemble(members).eval()
    ensemble_name = ENSEMBLE_NAME.format(n=len(seeds), kind="seeds" if len(seeds) > 1 else "seed")
    scores = {ensemble_name: {name: score(ensemble, split) for name, split in evals.items()},
              MEMBERS_NAME.format(kind="seeds"): _member_scores(member_scores), **baselines}
    return {"splits": sizes, "scores": scores, "seeds": dict(zip(map(str, seeds), member_scores)),
            "training": {"seeds": dict(zip(map(str, seeds), member_info))},
            "trust": _trust(ensemble, splits["dev"], data.class_names, scores, "dev", "--cv 5")}


def _trust(model: nn.Module, dev: Split, class_names: list[str], scores: Scores, split: str, cv_hint: str,
           probs: np.ndarray | None = None, label: str | None = None) -> dict[str, Any]:
    """:func:`~bioattn.tasks.trust.trust_report` of the kept ``model`` (or of its ``probs``) on ``dev`` (MCC the
    headline; ``label``: the examples' name in the text, default ``split``), plus a warning when a same-run baseline
    beats it on ``split`` MCC (``scores``' first method is the model)."""
    threshold = float(getattr(model, "threshold", 0.5))
    if probs is None:
        probs = model.predict_tokens(dev.tokens, batch_size=512)  # type: ignore[operator]
    report = trust_report(dev.labels, probs, threshold=threshold, class_names=class_names, headline="mcc",
                          split=label or split, cv_hint=cv_hint)
    name, *others = list(scores)
    value = lambda method: _mean(scores[method].get(split, {}).get("mcc"))  # noqa: E731
    beaten = baseline_warning(name, value(name), {other: value(other) for other in others}, "MCC×100", scale=100.0)
    if beaten:
        report["warnings"].append(beaten)
    return report


def _mean(value: Any) -> float | None:
    return value["mean"] if isinstance(value, Mapping) else value


def cross_validation_pool(data: PromoterData) -> Split:
    """Every labelled sequence a cross-validation may use: ``all`` (E. coli), else train + dev (never test)."""
    if "all" in data.splits:
        return data.splits["all"]
    train, dev = data.splits["train"], data.splits["dev"]
    return Split(train.sequences + dev.sequences, train.tokens + dev.tokens, np.concatenate([train.labels, dev.labels]),
                 train.where + dev.where)


def run_cross_validation(data: PromoterData, options: PromoterOptions, config: TrainConfig) -> dict[str, Any]:
    """K-fold stratified CV (``options.cv``, default :data:`CV_FOLDS`) over :func:`cross_validation_pool`.

    Folds are grouped by sequence (identical sequences stay in one fold); each fold model (``fold<k>/``)
    early-stops on a stratified 10 % of its training part and predicts its held-out fold. Reported: the
    out-of-fold metrics of all predictions pooled (``oof``), the mean ± sd over folds (``cv``), the baselines
    the same way; the run directory becomes the ensemble of the K fold models.
    """
    folds_k, repeats = options.cv or CV_FOLDS, options.cv_repeats
    everything, class_names, max_len = cross_validation_pool(data), data.class_names, data.max_len
    print(f"{options.name}: {len(everything):,} sequences{row_cap(options)}, {folds_k}-fold CV grouped by sequence"
          + (f", repeated {repeats} times" if repeats > 1 else ""), file=sys.stderr)
    members = folds_k * repeats
    per_run = dataclasses.replace(config, max_minutes=config.max_minutes / members if config.max_minutes else None)
    plan = plan_members(options.out, RunProtocol(cv=folds_k, cv_repeats=repeats), config.seed,
                        lambda k, seed: stratified_group_folds(everything, k, seed))
    fold_scores: list[Scores] = []
    fold_info = []

    def train_fold(member: Member) -> PromoterClassifier:
        train = everything.subset(member.train_index)
        inner_train, inner_dev = dev_split(train, config.seed, f"{options.name} fold {member.index}", class_names)
        model, info = train_model(inner_train, inner_dev, {}, member.run_dir, per_run, options, max_len, class_names,
                                  options.resume and member.run_dir.exists())
        info.pop("scores", None)
        fold_info.append(info)
        return model

    def held_out(member: Member, model: PromoterClassifier) -> dict[str, np.ndarray]:
        train, held = everything.subset(member.train_index), everything.subset(member.held_out_index)
        probs = model.predict_tokens(held.tokens, batch_size=512)
        fold_scores.append({MODEL_NAME: {"cv": classification_metrics(held.labels, probs, threshold=model.threshold)},
                            **run_baselines(train, {"cv": held}, config.seed)})
        return {"": probs}

    fitted = run_members(options.out, plan, train_fold, member_type="PromoterClassifier", held_out=held_out,
                         pool_size=len(everything))
    if not is_main_process():
        return {}
    model = fitted.results[-1]
    assert fitted.out_of_fold is not None
    oof = fitted.out_of_fold.probabilities[""]
    write_out_of_fold(options.out, everything.where, fitted.out_of_fold.fold_of, everything.labels, class_names,
                      {"": oof})
    scores = {method: {"cv": mean_std([fold[method]["cv"] for fold in fold_scores])} for method in fold_scores[0]}
    scores[MODEL_NAME] = {"oof": classification_metrics(everything.labels, oof, threshold=model.threshold),
                          **scores[MODEL_NAME]}
    trust = _trust(model, everything, class_names, scores, "cv", f"--cv {folds_k} --cv-repeats {max(3, repeats + 1)}", probs=oof,
                   label="out-of-fold")
    return {
        "trust": trust,
        "splits": {"pool": len(everything)},
        "class_counts": {name: int((everything.labels == i).sum()) for i, name in enumerate(class_names)},
        "scores": scores,
        "folds": fold_scores,
        "training": {"folds": fold_info},
    }


def run_promoter(options: PromoterOptions, config: TrainConfig | None = None) -> dict[str, Any]:
    """Run the protocol of ``options`` into ``options.out``; returns what ``metrics.json`` holds (``{}`` off rank 0).

    ``config`` defaults to :func:`default_config` of the task and its pretraining.
    ``options.quick`` shortens ``config`` (:func:`quick_config`) and caps each split at :data:`QUICK_ROWS` rows.
    """
    check_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)  # before any sequence is read
    config = config or default_config(options.task, options.pretrain_epochs)
    if options.quick:
        config, options = quick_config(config), quick_options(options)
    data = load_data(options, config.seed)
    # run_config.json records the options that ran: the data root actually read (or the embedded sample)
    options = dataclasses.replace(options, data_root=data.data_root,
                                  out=prepare_run_dir(options.out, resume=options.resume, overwrite=options.overwrite))
    if is_main_process():  # what predict compares new sequences with (bioattn.tasks.promoter.composition)
        save_composition(options.out, data.splits["all" if "all" in data.splits else "train"].sequences)
    cross_validate = "all" in data.splits or options.cv is not None
    results = (run_cross_validation if cross_validate else run_holdout)(data, options, config)
    if not is_main_process():
        return {}
    protocol = data.protocol
    if options.cv is not None and "all" not in data.splits:
        protocol = (f"{options.cv}-fold stratified CV over the training and dev sequences, grouped by sequence; each fold "
                    "early-stops on 10% of its training part; out-of-fold metrics")
    if options.cv_repeats > 1:
        protocol += f"; repeated {options.cv_repeats} times with different shuffles (out-of-fold probabilities averaged)"
    if options.seeds:
        protocol += f"; one model per seed ({', '.join(map(str, options.seeds))}), ensemble = mean probability"
    source: dict[str, Any] = {"data_root": options.data_root}
    if options.train is not None:
        source["files"] = {n: str(p) for n, p in (("train", options.train), ("dev", options.dev), ("test", options.test)) if p}
    metrics = metrics_document(
        "promoter", dataset=options.name,
        protocol=RunProtocol(options.seeds, (options.cv or CV_FOLDS) if cross_validate else None, options.cv_repeats,
                             protocol).to_dict(),
        splits=results.pop("splits"), scores=results.pop("scores"), class_names=data.class_names,
        **source, quick=options.quick, max_length=data.max_len, **results,
        published_mcc_x100={name: values[options.task] for name, values in PUBLISHED_GUE.items()
                            if options.task in values})
    metrics["metrics"] = model_metrics(metrics["scores"])
    write_run_report(options.out, metrics, format_report(metrics))
    return metrics
