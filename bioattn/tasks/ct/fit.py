"""Fitting one CT model: :func:`build_models` and :func:`train_one`."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import update_bn
from torch.utils.data import DataLoader

from bioattn.data.ct import train_augmentation
from bioattn.errors import UserInputError
from bioattn.metrics import classification_metrics, decision_threshold, margin_threshold, with_prefix
from bioattn.models.ct_resnet import ResNetCT3D
from bioattn.models.ct_classifier import predict_probabilities
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.common import count_parameters, fit_timed
from bioattn.tasks.ct.data import CTData
from bioattn.tasks.ct.options import (
    BASELINE_BLOCKS, BASELINE_WIDTHS, CLASS_NAMES, HISTORY_KEYS, QUICK_BASELINE_BLOCKS, QUICK_BASELINE_WIDTHS, CTOptions,
    Protocol,
)
from bioattn.tasks.trust import trust_report
from bioattn.training import TrainConfig, Trainer, plot_curves
from bioattn.distributed import is_main_process
from bioattn.training.mixup import mixup_cross_entropy

__all__ = ["build_models", "prepare_for_training", "recalibrates_batch_norm", "thresholds_on_training_volumes",
           "train_one"]


def build_models(options: CTOptions, num_classes: int, in_channels: int, class_names: list[str] | None = None, *,
                 seed: int | None = None) -> tuple[HybridCT3D, nn.Module | None]:
    """The attention model and the ResNet baseline (``None`` with ``baseline="none"``; seeded with ``seed``)."""
    channels, strides = options.stem()
    widths, blocks = (QUICK_BASELINE_WIDTHS, QUICK_BASELINE_BLOCKS) if options.quick else (BASELINE_WIDTHS, BASELINE_BLOCKS)
    from_resnet = options.init_name == "resnet"
    layout = (dict(stem_depth=2 * blocks, unshuffle=1, conv1_stride=options.unshuffle_factor(), token_stage=-2)
              if from_resnet else dict(stem_depth=options.stem_depth, unshuffle=options.unshuffle_factor()))
    try:
        hybrid = HybridCT3D(in_channels, num_classes, stem_channels=channels, stem_strides=strides, **layout,
                            distance_channel=bool(options.distance_channel),
                            embed_dim=24 if options.quick else options.embed_dim,
                            num_heads=2 if options.quick else options.heads,
                            num_layers=1 if options.quick else options.layers, dropout=options.dropout,
                            class_names=class_names, pool=options.pool_name, stem=options.stem_name)
    except ValueError as exc:
        raise UserInputError(f"invalid model options: {exc}") from exc
    if options.baseline == "none":
        return hybrid, None
    if seed is not None:
        torch.manual_seed(seed)
    baseline = ResNetCT3D(in_channels, num_classes, widths=list(widths), layers=[blocks] * 4,
                          conv1_stride=options.unshuffle_factor(), distance_channel=bool(options.distance_channel),
                          input_multiple=hybrid.stride, class_names=class_names)
    return hybrid, baseline


def recalibrates_batch_norm(model: nn.Module, train_size: int, config: TrainConfig) -> bool:
    """Whether :func:`train_one` re-estimates batch-norm statistics before each evaluation (small training sets)."""
    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
    has_batch_norm = any(isinstance(m, norms) and any(p.requires_grad for p in m.parameters()) for m in model.modules())
    return has_batch_norm and config.small_set_batch(train_size) is not None


def thresholds_on_training_volumes(train_size: int, config: TrainConfig) -> bool:
    """Whether :func:`train_one` places a binary threshold on the training volumes (small training sets)."""
    return config.small_set_batch(train_size) is not None


def _class_names(options: CTOptions, data: CTData) -> list[str] | None:
    if data.class_names is not None:
        return data.class_names
    names = CLASS_NAMES.get(options.dataset_name or "")
    return list(names) if names and len(names) == data.num_classes else None


def _scores(labels: np.ndarray, probs: np.ndarray, split: str, threshold: float = 0.5) -> dict[str, float]:
    return with_prefix(split, classification_metrics(labels, probs, threshold=threshold))


def prepare_for_training(model: nn.Module, config: TrainConfig) -> None:
    """Channels-last stem weights for a :class:`HybridCT3D` trained in fp32, contiguous otherwise."""
    if isinstance(model, HybridCT3D):
        model.channels_last_stem(config.precision == "fp32")


def train_one(name: str, model: nn.Module, run_dir: Path, data: CTData, config: TrainConfig, protocol: Protocol, *,
              augment: bool = True, resume: bool = False, run_info: dict[str, Any] | None = None,
              select_best: bool = True, evaluate_start: bool = False) -> dict[str, Any]:
    """Train ``model`` with the shared Trainer; its metrics on rank 0 (``{}`` elsewhere)."""
    augmentation = train_augmentation(intensity_jitter=protocol.intensity_jitter) if augment else None
    train_set = data.augmented(augmentation) if augmentation is not None else data.splits["train"]
    val_set, val_labels = data.splits["val"], data.labels["val"]

    def loss_fn(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return mixup_cross_entropy(module, images, labels, alpha=protocol.mixup,
                                   label_smoothing=protocol.label_smoothing)

    def evaluate(module: nn.Module) -> dict[str, float]:
        if recalibrate:
            update_bn(DataLoader(data.splits["train"], batch_size=trainer.micro_batch, shuffle=False), module,
                      device=next(module.parameters()).device)
        probs = predict_probabilities(module, val_set, batch_size=config.batch_size, flip_tta=protocol.flip_tta)
        metrics = _scores(val_labels, probs, "val")
        if protocol.flip_tta:
            plain = predict_probabilities(module, val_set, batch_size=config.batch_size)
            metrics["val_auroc_no_tta"] = _scores(val_labels, plain, "val")["val_auroc"]
        return metrics

    print(f"[{name}] {count_parameters(model) / 1e6:.2f} M parameters, training in {run_dir}", file=sys.stderr)
    recalibrate = select_best and recalibrates_batch_norm(model, len(data.splits["train"]), config)
    if recalibrate:
        print(f"[{name}] note: small training set: batch normalisation's statistics are re-estimated on the "
              f"{len(data.splits['train'])} training volumes before each evaluation, so each step is judged and "
              f"kept with statistics of its own weights", file=sys.stderr)
    trainer = Trainer(model, train_set, config, run_dir, loss_fn=loss_fn, evaluate=evaluate if select_best else None,
                      resume=resume, run_info=run_info, evaluate_start=evaluate_start and select_best)
    result, info = fit_timed(trainer)
    if not is_main_process():
        return {}
    if not select_best:
        plot_curves(run_dir)
        return {**info, "val_history": []}
    history = result.history
    metrics: dict[str, Any] = {
        **info,
        "val_history": [{key: h[key] for key in HISTORY_KEYS if key in h} for h in history],
        **{k: v for k, v in result.best_metrics.items() if k.startswith("val_")},
        "val_auroc_last_epoch": history[-1].get("val_auroc") if history else None,
    }
    kept = predict_probabilities(model, val_set, batch_size=config.batch_size, flip_tta=protocol.flip_tta)
    binary = kept.shape[1] == 2
    positive = (data.class_names or ["0", "1"])[1]
    threshold, from_training = 0.5, binary and thresholds_on_training_volumes(len(data.splits["train"]), config)
    if from_training:
        train_probs = predict_probabilities(model, data.splits["train"], batch_size=config.batch_size,
                                            flip_tta=protocol.flip_tta)
        threshold = margin_threshold(data.labels["train"], train_probs[:, 1])
        at_threshold = _scores(val_labels, kept, "val", threshold=threshold)
        metrics.update({key: at_threshold[key] for key in ("val_mcc", "val_accuracy", "val_f1")})
    elif binary:
        threshold = decision_threshold(val_labels, kept[:, 1])
    metrics["threshold"] = threshold
    if "test" in data.splits:
        probs = predict_probabilities(model, data.splits["test"], batch_size=config.batch_size,
                                      flip_tta=protocol.flip_tta)
        metrics.update(_scores(data.labels["test"], probs, "test", threshold=threshold if from_training else 0.5))
    metrics["trust"] = trust_report(val_labels, kept[:, 1] if binary else kept, threshold=threshold,
                                    class_names=data.class_names, headline="auroc", split="validation",
                                    cv_hint="--cv 5")
    if from_training:
        metrics["trust"]["warnings"].append(
            f"note: small training set: the decision threshold is {threshold:.4g} on p({positive}), the middle of the "
            f"widest gap between the {len(data.splits['train'])} training volumes' probabilities of the two classes; "
            "predict ct and explain ct apply it; the validation volumes did not choose it, and the accuracies above are "
            "measured at it")
    elif threshold != 0.5:
        metrics["trust"]["warnings"].append(
            f"note: the decision threshold is {threshold:.4g} on p({positive}), chosen on "
            "these validation volumes (at 0.5 they separate worse); predict ct and explain ct apply it; the accuracy "
            "above is at 0.5, and on the volumes it was chosen on the threshold's own accuracy is optimistic")
    plot_curves(run_dir)
    return metrics
