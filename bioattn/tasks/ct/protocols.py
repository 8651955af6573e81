"""The CT task's protocols on the shared driver (:mod:`bioattn.tasks.driver`): one run of the attention model beside
the baseline (``_train_pair``), one run per seed on the same split (``seeds``), and K-fold cross-validation over
train + val (``cv``, with the one-number
depth baseline on binary masks, :func:`mean_mask_depth` / :func:`depth_baseline_probabilities`). The options are in
:mod:`bioattn.tasks.ct.options`, the fitting of one model in :mod:`bioattn.tasks.ct.fit`, and
:func:`~bioattn.tasks.ct.train.train_ct` picks the protocol and writes the report."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import ConcatDataset, Dataset, Subset

from bioattn.data.ct import apply_random_transform, foreground_distance
from bioattn.io import write_json
from bioattn.metrics import mean_std
from bioattn.models.ensemble import Ensemble
from bioattn.models.ct_classifier import predict_probabilities
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.progress import progress_bar
from bioattn.tasks.driver import Member, RunProtocol, plan_members, run_members, write_out_of_fold
from bioattn.tasks.ct.data import CTData, WithoutMetadata
from bioattn.tasks.ct.fit import _class_names, _scores, build_models, prepare_for_training, train_one
from bioattn.tasks.ct.options import (
    BASELINE_DIR,
    BASELINE_NAME,
    DEPTH_BASELINE_NAME,
    HYBRID_NAME,
    OOF_PREFIXES,
    VAL_CURVE_NAME,
    CTOptions,
    Protocol,
)
from bioattn.tasks.ct.preprocessing import SavedPreprocessing
from bioattn.training import TrainConfig, seed_everything
from bioattn.plots import plot_metric_per_epoch
from bioattn.distributed import is_main_process

__all__ = ["fold_data", "mean_mask_depth", "depth_baseline_probabilities"]


class _Augmented(Dataset):
    """``(transform(image), label)`` of the ``(image, label)`` items of ``base``."""

    def __init__(self, base: Dataset, transform: Any) -> None:
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, label = self.base[index]
        return apply_random_transform(self.transform, image), label


def _pool_records(data: CTData) -> list[str]:
    """Where each volume of the cross-validation pool (train, then val) came from: its manifest image, else
    ``train[i]`` / ``val[i]`` (its index in that split of the ``.npz``)."""
    records: list[str] = []
    for split in ("train", "val"):
        if data.rows is not None:
            records += [str(row.image) for row in data.rows[split]]
        else:
            records += [f"{split}[{i}]" for i in range(len(data.labels[split]))]
    return records


def fold_data(data: CTData, train_index: np.ndarray, held_out_index: np.ndarray) -> CTData:
    """``data`` with train + val pooled and re-split: ``train`` = ``train_index``, ``val`` = ``held_out_index`` of the pool
    (indices into train followed by val); a test split stays as it is."""
    pool = ConcatDataset([data.splits["train"], data.splits["val"]])
    labels = np.concatenate([data.labels["train"], data.labels["val"]])
    train = Subset(pool, train_index.tolist())
    splits = {"train": train, "val": Subset(pool, held_out_index.tolist())}
    split_labels = {"train": labels[train_index], "val": labels[held_out_index]}
    if "test" in data.splits:
        splits["test"], split_labels["test"] = data.splits["test"], data.labels["test"]
    return dataclasses.replace(data, splits=splits, labels=split_labels, rows=None,
                               augmented=lambda transform: _Augmented(train, WithoutMetadata([transform])))


@dataclass
class _Trained:
    """One member run: its metrics per model name and the trained models (baseline ``None`` without one)."""

    results: dict[str, dict[str, Any]]
    hybrid: HybridCT3D
    baseline: nn.Module | None


def _train_pair(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
                run_info: dict[str, Any], saved: SavedPreprocessing, *, select_best: bool = True) -> _Trained:
    """Train the attention model and the baseline on ``data`` into ``run_dir`` (a complete run directory)."""
    seed_everything(config.seed)
    hybrid, baseline = build_models(options, max(data.num_classes, 2), data.in_channels, _class_names(options, data),
                                    seed=config.seed)
    common = dict(augment=options.augment, resume=options.resume and run_dir.exists(), run_info=run_info,
                  select_best=select_best)
    prepare_for_training(hybrid, config)
    results = {HYBRID_NAME: train_one("hybrid", hybrid, run_dir, data, config, protocol, **common)}
    if baseline is not None:  # in fp32: under bf16 autocast its gradient norm overflows at the first step
        seed_everything(config.seed)  # the attention model's starting RNG state: its options do not move the baseline
        results[BASELINE_NAME] = train_one("baseline", baseline, run_dir / BASELINE_DIR, data,
                                           dataclasses.replace(config, precision="fp32"), protocol, **common)
    if is_main_process():
        hybrid.save_pretrained(run_dir)
        dataclasses.replace(saved, threshold=results[HYBRID_NAME].get("threshold", 0.5)).save(run_dir)
        if baseline is not None:  # a run directory of its own: predict ct / explain ct --model RUN/baseline_resnet
            baseline.save_pretrained(run_dir / BASELINE_DIR)
            dataclasses.replace(saved, threshold=results[BASELINE_NAME].get("threshold", 0.5)).save(run_dir / BASELINE_DIR)
        if select_best:
            plot_metric_per_epoch(
                {f"{name} ({m['parameters'] / 1e6:.2f} M)":
                 [(h["epoch"], h["val_auroc"]) for h in m["val_history"] if h.get("val_auroc") is not None]
                 for name, m in results.items()},
                run_dir / VAL_CURVE_NAME, ylabel="validation AUROC",
            )
    return _Trained(results, hybrid, baseline)


def _models(trained: _Trained) -> dict[str, nn.Module]:
    return {HYBRID_NAME: trained.hybrid, **({BASELINE_NAME: trained.baseline} if trained.baseline is not None else {})}


def _ensemble_scores(members: list[_Trained], data: CTData, protocol: Protocol, batch_size: int) -> dict[str, Any]:
    """Each model's ensemble (mean probability over ``members``) scored on val (and test)."""
    scores: dict[str, Any] = {}
    for name in _models(members[0]):
        ensemble = Ensemble([_models(m)[name] for m in members])
        scores[name] = {}
        for split in [s for s in ("val", "test") if s in data.splits]:
            probs = predict_probabilities(ensemble, data.splits[split], batch_size=batch_size, flip_tta=protocol.flip_tta)
            scores[name].update(_scores(data.labels[split], probs, split))
    return scores


def _summaries(members: list[_Trained]) -> dict[str, dict[str, Any]]:
    """Mean ± sd over members of each model's numeric metrics."""
    return {name: mean_std([{k: v for k, v in m.results[name].items() if isinstance(v, (int, float))} for m in members])
            for name in members[0].results}


def _train_seeds(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
                 run_info: dict[str, Any], saved: SavedPreprocessing) -> dict[str, Any]:
    """One run per seed (``seed<S>/``) on the same split; the run directory becomes the attention models' ensemble."""
    assert options.seeds is not None
    plan = plan_members(run_dir, RunProtocol.of(options), config.seed)
    members = run_members(run_dir, plan, lambda member: _train_pair(
        options, data, dataclasses.replace(config, seed=member.index), protocol, member.run_dir, run_info, saved),
        member_type="HybridCT3D").results
    if not is_main_process():
        return {}
    saved.save(run_dir)
    return {"ensemble": _ensemble_scores(members, data, protocol, config.batch_size), "members": _summaries(members),
            "seeds": {str(seed): m.results for seed, m in zip(options.seeds, members)}}


def mean_mask_depth(volumes: Dataset) -> np.ndarray:
    """``(N,)``: the mean :func:`~bioattn.data.ct.foreground_distance` over each volume's mask (0 for an empty mask);
    ``volumes`` serves ``(image (C, X, Y, Z), label)`` items."""
    depths = []
    for index in progress_bar(range(len(volumes)), desc="mean depth inside the mask",  # type: ignore[arg-type]
                              leave=False):
        image = volumes[index][0][None]
        depth = foreground_distance(image)[0, 0]
        inside = image[0, 0] > 0.5
        depths.append(float(depth[inside].mean()) if inside.any() else 0.0)
    return np.asarray(depths)


def depth_baseline_probabilities(train_depth: np.ndarray, train_labels: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Class probabilities ``(N, C)`` of a logistic regression on the mean mask depth alone, fitted on the training
    volumes: the one-number baseline of binary-mask runs (how far thickness alone goes)."""
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(train_depth[:, None], train_labels)
    return model.predict_proba(depth[:, None])


def _train_cv(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
              run_info: dict[str, Any], saved: SavedPreprocessing) -> dict[str, Any]:
    """K-fold stratified CV over train + val (``fold<k>/``, final weights, no selection on the held-out fold);
    out-of-fold metrics of the pooled predictions; the run directory becomes the K attention models' ensemble."""
    assert options.cv is not None
    labels = np.concatenate([data.labels["train"], data.labels["val"]])
    plan = plan_members(run_dir, RunProtocol.of(options), config.seed, lambda k, seed: StratifiedKFold(
        k, shuffle=True, random_state=seed).split(np.zeros(len(labels)), labels))
    folds: list[dict[str, Any]] = []
    # binary masks: how far the mean depth inside the mask goes alone, on the same folds
    depth = mean_mask_depth(ConcatDataset([data.splits["train"], data.splits["val"]])) \
        if saved.profile.get("binary") and is_main_process() else None

    def train_fold(member: Member) -> tuple[_Trained, CTData]:
        assert member.train_index is not None and member.held_out_index is not None
        folded = fold_data(data, member.train_index, member.held_out_index)
        return _train_pair(options, folded, config, protocol, member.run_dir, run_info, saved,
                           select_best=False), folded

    def held_out_of(member: Member, fitted: tuple[_Trained, CTData]) -> dict[str, np.ndarray]:
        (trained, folded), train_index, held_index = fitted, member.train_index, member.held_out_index
        assert train_index is not None and held_index is not None
        folds.append({})
        held_out: dict[str, np.ndarray] = {}
        for name, model in _models(trained).items():
            held_out[name] = predict_probabilities(model, folded.splits["val"], batch_size=config.batch_size,
                                                   flip_tta=protocol.flip_tta)
            folds[-1][name] = _scores(labels[held_index], held_out[name], "val")
            trained.results[name].update(folds[-1][name])
        if depth is not None:
            held_out[DEPTH_BASELINE_NAME] = depth_baseline_probabilities(depth[train_index], labels[train_index],
                                                                         depth[held_index])
            folds[-1][DEPTH_BASELINE_NAME] = _scores(labels[held_index], held_out[DEPTH_BASELINE_NAME], "val")
        write_json(member.run_dir / "fold_metrics.json", {"train_index": train_index.tolist(),
                                                          "held_out_index": held_index.tolist(), "scores": folds[-1]})
        return held_out  # pooled as the mean over repeats of each volume's out-of-fold probability

    fitted = run_members(run_dir, plan, train_fold, member_type="HybridCT3D", held_out=held_out_of,
                         pool_size=len(labels))
    members = [trained for trained, _ in fitted.results]
    if not is_main_process():
        return {}
    saved.save(run_dir)
    assert fitted.out_of_fold is not None
    oof, fold_of = fitted.out_of_fold.probabilities, fitted.out_of_fold.fold_of
    class_names = _class_names(options, data) or [str(k) for k in range(next(iter(oof.values())).shape[1])]
    write_out_of_fold(run_dir, _pool_records(data), fold_of, labels, class_names,
                      {OOF_PREFIXES[name]: probs for name, probs in oof.items()})
    results: dict[str, Any] = {
        "oof": {name: _scores(labels, probs, "oof") for name, probs in oof.items()},
        "cv": {name: mean_std([fold[name] for fold in folds]) for name in folds[0]},
        "members": _summaries(members), "folds": folds,
    }
    if "test" in data.splits:
        results["ensemble"] = _ensemble_scores(members, data, protocol, config.batch_size)
    return results
