"""The CT task's member hooks of the shared driver: :func:`fit`, :func:`held_out` and :func:`ensemble_results`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
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
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.tasks.driver import Member, MembersRun
from bioattn.tasks.ct.data import CTData, WithoutMetadata
from bioattn.tasks.ct.fit import _class_names, _scores, build_models, prepare_for_training, train_one
from bioattn.tasks.ct.options import (
    BASELINE_DIR, BASELINE_NAME, DEPTH_BASELINE_NAME, HYBRID_NAME, VAL_CURVE_NAME, CTOptions, Protocol,
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
    """Where each volume of the cross-validation pool (train, then val) came from."""
    if data.rows is not None:
        return [str(row.image) for split in ("train", "val") for row in data.rows[split]]
    return [f"{split}[{i}]" for split in ("train", "val") for i in range(len(data.labels[split]))]


def fold_data(data: CTData, train_index: np.ndarray, held_out_index: np.ndarray) -> CTData:
    """``data`` with train + val pooled and re-split into ``train_index`` and ``held_out_index``."""
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
    """One member run: its metrics per model name and the trained models."""
    results: dict[str, dict[str, Any]]
    hybrid: HybridCT3D
    baseline: nn.Module | None


def _train_pair(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
                run_info: dict[str, Any], saved: SavedPreprocessing, *, select_best: bool = True) -> _Trained:
    """Train the attention model and the baseline on ``data`` into ``run_dir``."""
    seed_everything(config.seed)
    hybrid, baseline = build_models(options, max(data.num_classes, 2), data.in_channels, _class_names(options, data),
                                    seed=config.seed)
    common = dict(augment=options.augment, resume=options.resume and run_dir.exists(), run_info=run_info,
                  select_best=select_best)
    results: dict[str, dict[str, Any]] = {}

    def train_baseline() -> None:  # in fp32: bf16 overflows its gradients
        assert baseline is not None
        seed_everything(config.seed)
        results[BASELINE_NAME] = train_one("baseline", baseline, run_dir / BASELINE_DIR, data,
                                           dataclasses.replace(config, precision="fp32"), protocol, **common)

    if options.init_name == "resnet":
        train_baseline()
        assert baseline is not None
        hybrid.start_from_resnet(baseline).freeze_trunk()
        seed_everything(config.seed)
        results[HYBRID_NAME] = train_one("hybrid", hybrid, run_dir, data, config, protocol, **common,
                                         evaluate_start=True)
        results[HYBRID_NAME].update(init="resnet", attention_gate=float(hybrid.attention_gate))
        results = {HYBRID_NAME: results[HYBRID_NAME], BASELINE_NAME: results[BASELINE_NAME]}
    else:
        prepare_for_training(hybrid, config)
        results[HYBRID_NAME] = train_one("hybrid", hybrid, run_dir, data, config, protocol, **common)
        if baseline is not None:
            train_baseline()
    if is_main_process():
        hybrid.save_pretrained(run_dir)
        dataclasses.replace(saved, threshold=results[HYBRID_NAME].get("threshold", 0.5)).save(run_dir)
        if baseline is not None:
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


def mean_mask_depth(volumes: Dataset) -> np.ndarray:
    """``(N,)``: the mean :func:`~bioattn.data.ct.foreground_distance` over each volume's mask (0 when empty)."""
    depths = []
    for index in progress_bar(range(len(volumes)), desc="mean depth inside the mask",  # type: ignore[arg-type]
                              leave=False):
        image = volumes[index][0][None]
        depth = foreground_distance(image)[0, 0]
        inside = image[0, 0] > 0.5
        depths.append(float(depth[inside].mean()) if inside.any() else 0.0)
    return np.asarray(depths)


def depth_baseline_probabilities(train_depth: np.ndarray, train_labels: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Class probabilities ``(N, C)`` of a logistic regression on the mean mask depth of the training volumes."""
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(train_depth[:, None], train_labels)
    return model.predict_proba(depth[:, None])


def fit(data: TaskData, member: Member) -> FittedMember:
    """One member (a seed's or a fold's) in ``member.run_dir``: the attention model and the baseline."""
    ready = data.extra["prepared"]
    options, config, protocol, run_info, saved = ready.options, ready.config, ready.protocol, ready.run_info, ready.saved
    if member.kind == "fold":
        assert member.train_index is not None and member.held_out_index is not None
        folded = fold_data(ready.data, member.train_index, member.held_out_index)
        trained = _train_pair(options, folded, config, protocol, member.run_dir, run_info, saved, select_best=False)
    else:
        folded = ready.data
        trained = _train_pair(options, folded, dataclasses.replace(config, seed=member.index), protocol, member.run_dir,
                              run_info, saved)
    return FittedMember(model=trained.hybrid, summary=trained.results[HYBRID_NAME], saved_to=member.run_dir,
                        extra={"trained": trained, "folded": folded})


def held_out(data: TaskData, member: Member, fitted: FittedMember) -> dict[str, np.ndarray]:
    """Each model's probabilities on a fold's held-out volumes, scored into ``fold_metrics.json``."""
    ready, trained, folded = data.extra["prepared"], fitted.extra["trained"], fitted.extra["folded"]
    train_index, held_index, labels, depth = member.train_index, member.held_out_index, data.pool.labels, data.extra["depth"]
    assert train_index is not None and held_index is not None
    scores: dict[str, Any] = {}
    probabilities: dict[str, np.ndarray] = {}
    for name, model in _models(trained).items():
        probabilities[name] = predict_probabilities(model, folded.splits["val"], batch_size=ready.config.batch_size,
                                                    flip_tta=ready.protocol.flip_tta)
        scores[name] = _scores(labels[held_index], probabilities[name], "val")
        trained.results[name].update(scores[name])
    if depth is not None:
        probabilities[DEPTH_BASELINE_NAME] = depth_baseline_probabilities(depth[train_index], labels[train_index],
                                                                          depth[held_index])
        scores[DEPTH_BASELINE_NAME] = _scores(labels[held_index], probabilities[DEPTH_BASELINE_NAME], "val")
    fitted.extra["scores"] = scores
    write_json(member.run_dir / "fold_metrics.json", {"train_index": train_index.tolist(),
                                                      "held_out_index": held_index.tolist(), "scores": scores})
    return probabilities


def ensemble_results(data: TaskData, run: MembersRun[FittedMember]) -> dict[str, Any]:
    """The results of a seeds or cv run: ensemble scores, mean ± sd over members, and a cv's out-of-fold metrics."""
    ready = data.extra["prepared"]
    members = [fitted.extra["trained"] for fitted in run.results]
    ready.saved.save(ready.options.out)
    if run.out_of_fold is None:
        return {"ensemble": _ensemble_scores(members, ready.data, ready.protocol, ready.config.batch_size),
                "members": _summaries(members),
                "seeds": {str(member.index): m.results for member, m in zip(run.members, members)}}
    labels, folds = data.pool.labels, [fitted.extra["scores"] for fitted in run.results]
    results: dict[str, Any] = {
        "oof": {name: _scores(labels, probs, "oof") for name, probs in run.out_of_fold.probabilities.items()},
        "cv": {name: mean_std([fold[name] for fold in folds]) for name in folds[0]},
        "members": _summaries(members), "folds": folds,
    }
    if "test" in ready.data.splits:
        results["ensemble"] = _ensemble_scores(members, ready.data, ready.protocol, ready.config.batch_size)
    return results
