"""The promoter task's hooks of the shared driver (:func:`bioattn.tasks.driver.run_task`)."""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Mapping

import numpy as np
from torch import nn

from bioattn.metrics import classification_metrics, mean_std
from bioattn.models.ensemble import Ensemble
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.tasks.driver import Member, MembersRun, RunProtocol, metrics_document
from bioattn.tasks.promoter.composition import save_composition
from bioattn.tasks.promoter.baselines import run_baselines
from bioattn.tasks.trust import baseline_warning, trust_report
from bioattn.tasks.promoter.data import Split, concatenate, dev_split
from bioattn.training import TrainConfig, check_run_dir, prepare_run_dir
from bioattn.distributed import is_main_process
from bioattn.tasks.promoter.report import format_report, model_metrics
from bioattn.tasks.promoter.train import (CV_FOLDS, ENSEMBLE_NAME, MEMBERS_NAME, MODEL_NAME, PUBLISHED_GUE,
                                          PromoterData, PromoterOptions, QUICK_ROWS, Scores, default_config, load_data,
                                          quick_config, quick_options, score, train_model)


def _member_scores(per_member: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """{split: mean ± sd over members} of the members' {split: metrics}."""
    return {split: mean_std([member[split] for member in per_member]) for split in per_member[0]}


def row_cap(options: PromoterOptions) -> str:
    """What the split sizes printed before training were capped by (``""`` when every row was read)."""
    if options.max_rows is None:
        return ""
    by = "--quick" if options.quick and options.max_rows == QUICK_ROWS else "--max-rows"
    return f" (at most {options.max_rows:,} per split, a seeded random subset: {by})"


def prepare(options: PromoterOptions, config: TrainConfig | None = None) -> tuple[PromoterOptions, TaskData]:
    """Check ``options.out``, read the data, create the run directory and print the split line."""
    check_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    config = config or default_config(options.task, options.pretrain_epochs)
    if options.quick:
        config, options = quick_config(config), quick_options(options)
    data = load_data(options, config.seed)
    options = dataclasses.replace(options, data_root=data.data_root,
                                  out=prepare_run_dir(options.out, resume=options.resume, overwrite=options.overwrite))
    splits = data.splits
    if is_main_process():
        save_composition(options.out, splits["all" if "all" in splits else "train"].sequences)
    pool = cross_validation_pool(data) if "all" in splits or options.cv is not None else None
    if pool is None:
        print(f"{options.name}: " + ", ".join(f"{n} {len(s):,}" for n, s in splits.items()) + f" sequences"
              f"{row_cap(options)}, {len(data.class_names)} classes, up to {data.max_len} nt", file=sys.stderr)
    else:
        repeats = options.cv_repeats
        print(f"{options.name}: {len(pool):,} sequences{row_cap(options)}, {options.cv or CV_FOLDS}-fold CV grouped "
              "by sequence" + (f", repeated {repeats} times" if repeats > 1 else ""), file=sys.stderr)
    return options, TaskData(train=splits.get("train"), dev=splits.get("dev"), pool=pool, class_names=data.class_names,
                             records=pool.where if pool is not None else None, source=data.data_root or "",
                             seed=config.seed, extra={"data": data, "config": config, "max_len": data.max_len})


def protocol(options: PromoterOptions, data: TaskData) -> RunProtocol:
    """The run's protocol and its sentence for ``metrics.json``."""
    promoter: PromoterData = data.extra["data"]
    text = promoter.protocol
    if options.cv is not None and "all" not in promoter.splits:
        text = (f"{options.cv}-fold stratified CV over the training and dev sequences, grouped by sequence; each fold "
                "early-stops on 10% of its training part; out-of-fold metrics")
    if options.cv_repeats > 1:
        text += f"; repeated {options.cv_repeats} times with different shuffles (out-of-fold probabilities averaged)"
    if options.seeds:
        text += f"; one model per seed ({', '.join(map(str, options.seeds))}), ensemble = mean probability"
    return RunProtocol(options.seeds, (options.cv or CV_FOLDS) if data.pool is not None else None, options.cv_repeats,
                       text)


def fit(options: PromoterOptions, data: TaskData, member: Member) -> FittedMember:
    """One model in ``member.run_dir``: a seed's early-stops on ``dev``, a fold's on 10 % of its training part."""
    config = data.extra.get("config") or default_config(options.task, options.pretrain_epochs)
    class_names, max_len = list(data.class_names or ()), data.extra["max_len"]
    resume = options.resume and member.run_dir.exists()
    if member.kind == "fold":
        members = member.total
        per_run = dataclasses.replace(config, max_minutes=config.max_minutes / members if config.max_minutes else None)
        train = data.pool.subset(member.train_index)
        inner_train, inner_dev = dev_split(train, config.seed, f"{options.name} fold {member.index}", class_names)
        model, info = train_model(inner_train, inner_dev, {}, member.run_dir, per_run, options, max_len, class_names,
                                  resume)
    else:
        splits = data.extra["data"].splits if "data" in data.extra else {"train": data.train, "dev": data.dev}
        evals = {name: split for name, split in splits.items() if name != "train"}
        model, info = train_model(splits["train"], splits["dev"], evals, member.run_dir,
                                  dataclasses.replace(config, seed=member.index), options, max_len, class_names, resume)
    scores = info.pop("scores", {})
    return FittedMember(model=model, summary=info, saved_to=member.run_dir, extra={"scores": scores})


def held_out(data: TaskData, member: Member, fitted: FittedMember) -> dict[str, np.ndarray]:
    """A fold model's probabilities on its held-out fold (its and the baselines' scores: ``fitted.extra["scores"]``)."""
    model, pool = fitted.model, data.pool
    train, held = pool.subset(member.train_index), pool.subset(member.held_out_index)
    probs = model.predict_tokens(held.tokens, batch_size=512)
    fitted.extra["scores"] = {MODEL_NAME: {"cv": classification_metrics(held.labels, probs, threshold=model.threshold)},
                              **run_baselines(train, {"cv": held}, data.seed)}
    return {"": probs}


def _trust(model: nn.Module, dev: Split, class_names: list[str], scores: Scores, split: str, cv_hint: str,
           probs: np.ndarray | None = None, label: str | None = None) -> dict[str, Any]:
    """The trust report of ``model`` (or its ``probs``) on ``dev``, warning when a baseline beats it."""
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
    return concatenate([data.splits["train"], data.splits["dev"]])


def _cross_validation(options: PromoterOptions, data: TaskData, run: MembersRun[FittedMember]) -> dict[str, Any]:
    """The pooled out-of-fold metrics (``oof``) and the mean ± sd over folds (``cv``), baselines alike."""
    everything, class_names = data.pool, list(data.class_names or ())
    model = run.results[-1].model
    assert run.out_of_fold is not None
    oof = run.out_of_fold.probabilities[""]
    fold_scores = [fitted.extra["scores"] for fitted in run.results]
    scores = {method: {"cv": mean_std([fold[method]["cv"] for fold in fold_scores])} for method in fold_scores[0]}
    scores[MODEL_NAME] = {"oof": classification_metrics(everything.labels, oof, threshold=model.threshold),
                          **scores[MODEL_NAME]}
    folds_k, repeats = options.cv or CV_FOLDS, options.cv_repeats
    trust = _trust(model, everything, class_names, scores, "cv", f"--cv {folds_k} --cv-repeats {max(3, repeats + 1)}",
                   probs=oof, label="out-of-fold")
    return {"trust": trust, "splits": {"pool": len(everything)},
            "class_counts": {name: int((everything.labels == i).sum()) for i, name in enumerate(class_names)},
            "scores": scores, "folds": fold_scores, "training": {"folds": [fitted.summary for fitted in run.results]}}


def _holdout(options: PromoterOptions, data: TaskData, run: MembersRun[FittedMember]) -> dict[str, Any]:
    """Each split but ``train`` scored beside the baselines; with ``options.seeds``, the members' ensemble."""
    splits = data.extra["data"].splits
    evals = {name: split for name, split in splits.items() if name != "train"}
    members = [fitted.model for fitted in run.results]
    member_scores = [fitted.extra["scores"] for fitted in run.results]
    member_info = [fitted.summary for fitted in run.results]
    print("fitting baselines (GC threshold, k-mer logistic regression) on the same split ...", file=sys.stderr)
    baselines = run_baselines(splits["train"], evals, data.seed)
    sizes = {n: len(s) for n, s in splits.items()}
    if not options.seeds:
        scores = {MODEL_NAME: member_scores[0], **baselines}
        return {"splits": sizes, "scores": scores, "training": member_info[0],
                "trust": _trust(members[0], splits["dev"], data.class_names, scores, "dev", "--cv 5")}
    seeds = [member.index for member in run.members]
    ensemble = Ensemble(members).eval()
    ensemble_name = ENSEMBLE_NAME.format(n=len(seeds), kind="seeds" if len(seeds) > 1 else "seed")
    scores = {ensemble_name: {name: score(ensemble, split) for name, split in evals.items()},
              MEMBERS_NAME.format(kind="seeds"): _member_scores(member_scores), **baselines}
    return {"splits": sizes, "scores": scores, "seeds": dict(zip(map(str, seeds), member_scores)),
            "training": {"seeds": dict(zip(map(str, seeds), member_info))},
            "trust": _trust(ensemble, splits["dev"], data.class_names, scores, "dev", "--cv 5")}


def report(options: PromoterOptions, data: TaskData, run_protocol: RunProtocol,
           run: MembersRun[FittedMember]) -> tuple[dict[str, Any], str]:
    """``metrics.json`` (the shared schema, the published GUE MCC beside it) and ``summary.md`` of the run."""
    results = (_cross_validation if data.pool is not None else _holdout)(options, data, run)
    source: dict[str, Any] = {"data_root": options.data_root}
    if options.train is not None:
        source["files"] = {n: str(p) for n, p in (("train", options.train), ("dev", options.dev), ("test", options.test)) if p}
    metrics = metrics_document(
        "promoter", dataset=options.name, protocol=run_protocol.to_dict(), splits=results.pop("splits"),
        scores=results.pop("scores"), class_names=data.class_names, **source, quick=options.quick,
        max_length=data.extra["max_len"], **results, published_mcc_x100={
            name: values[options.task] for name, values in PUBLISHED_GUE.items() if options.task in values})
    metrics["metrics"] = model_metrics(metrics["scores"])
    return metrics, format_report(metrics)
