"""Benchmark: wall seconds of whole CT training epochs (data loading + augmentation + steps + evaluation).

Runs the ``tuned`` protocol's real training loop (:func:`bioattn.tasks.ct.train_one`: the shared Trainer, MONAI flips
and rotations, the 8-flip validation) of the attention model on AdrenalMNIST3D 28³ for ``--epochs`` epochs under
each setting, in one process, and prints seconds per epoch and the ratio to the first setting (the defaults before
this benchmark: dropout 0.1, fp32, contiguous conv weights, CNN stages of 16, 32 and 64 channels, volumes padded to
the stem stride as they are served, MONAI metadata tracked through the augmentation). ``--breakdown`` first times the parts of
one epoch of that default separately: serving the augmented training split, the optimizer steps on those batches,
and the validation. Wall time depends on the machine's other load; the CPU seconds of the main process
(``time.process_time``, loader workers excluded, i.e. the critical path on a machine with a core to spare) less so.

    python bench/ct_epoch.py --data-root DATA [--epochs 2] [--breakdown]
    python bench/ct_epoch.py --smoke      # smoke test: one epoch of the first and the default setting on 8 random volumes
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from monai.transforms import Compose, DivisiblePad
from torch.utils.data import DataLoader

from bioattn.data import resolve_data_root
from bioattn.data.ct import (
    VolumeDataset,
    load_medmnist3d_npz,
    medmnist_npz_path,
    train_augmentation,
)
from bioattn.models.ct_classifier import predict_probabilities
from bioattn.report import format_table
from bioattn.tasks.ct.fit import build_models, train_one
from bioattn.tasks.ct.options import CTOptions, protocol_train_config, resolve_protocol
from bioattn.tasks.ct.data import CTData, load_medmnist
from bioattn.training import Trainer
from bioattn.training.schedules import build_optimizer

DATASET = "adrenalmnist3d"
EDGE = 28
BEFORE_STEM = (16, 32, 64)  # the CT model's CNN channels at 28³ before this benchmark


@dataclass(frozen=True)
class Setting:
    name: str
    dropout: float = 0.1
    precision: str = "fp32"
    attention_backend: str = "auto"
    num_workers: int = 0
    fast_data: bool = True  # volumes padded once at load, augmentation without MONAI metadata
    channels_last: bool = False  # channels-last stem weights (the recipe's choice in fp32; wrong bf16 gradients)
    stem_channels: tuple[int, ...] | None = BEFORE_STEM  # None: the recipe's default CNN (8, 16, 64 at 28³)
    distance_channel: bool = False  # the depth inside the mask as a second stem input (the default on binary masks)


SETTINGS = (
    Setting("before: fp32, dropout 0.1", fast_data=False),
    Setting("data: pad once, no metadata"),
    Setting("+ channels-last stem", channels_last=True),
    Setting("+ dropout 0", dropout=0.0, channels_last=True),
    Setting("+ CNN stages 8/16/64 (the default, fp32)", dropout=0.0, channels_last=True, stem_channels=None),
    Setting("default + bf16 autocast + math attention (opt-in, contiguous stem)", dropout=0.0, precision="bf16",
            attention_backend="math", stem_channels=None),
    Setting("default + 1 loader worker (optional)", dropout=0.0, channels_last=True, num_workers=1, stem_channels=None),
    Setting("default + distance channel (binary masks)", dropout=0.0, channels_last=True, stem_channels=None,
            distance_channel=True),
)


def per_item_padding_data(data_root: str | os.PathLike, stride: int) -> CTData:
    """The MedMNIST data as served before: ``DivisiblePad`` on every item, augmentation with MONAI metadata."""
    path = medmnist_npz_path(data_root, DATASET, EDGE)
    splits = load_medmnist3d_npz(path)
    pad = DivisiblePad(k=stride)
    return CTData(source="medmnist", path=path,
                  splits={name: VolumeDataset(split, pad) for name, split in splits.items()},
                  labels={name: split.labels for name, split in splits.items()}, class_names=None, in_channels=1,
                  augmented=lambda augment: VolumeDataset(splits["train"], Compose([pad, augment])))


def epoch_seconds(setting: Setting, data_root: str, epochs: int, stride: int, *, evaluate: bool = True,
                  smoke: bool = False) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (loader workers excluded) per epoch of ``train_one`` (attention
    model, ``tuned`` protocol) under ``setting``; ``evaluate=False``: no validation, as in a cross-validation fold."""
    options = CTOptions(out=Path("."), protocol="tuned", dropout=setting.dropout, baseline="none",
                        stem_channels=setting.stem_channels, distance_channel=setting.distance_channel)
    protocol = resolve_protocol(options)
    config = dataclasses.replace(protocol_train_config("tuned"), max_epochs=epochs, precision=setting.precision,
                                 attention_backend=setting.attention_backend, num_workers=setting.num_workers)
    if smoke:  # exactly the epochs asked for, on batches of 4 (no small-data minimum of steps)
        config = dataclasses.replace(config, batch_size=4, min_steps=0, min_batches_per_epoch=0)
    data = load_medmnist(data_root, DATASET, EDGE, divisible_by=stride) if setting.fast_data \
        else per_item_padding_data(data_root, stride)
    torch.manual_seed(0)
    model, _ = build_models(options, num_classes=2, in_channels=1)
    model.channels_last_stem(setting.channels_last)
    with tempfile.TemporaryDirectory() as run_dir:
        start, cpu = time.perf_counter(), time.process_time()
        if evaluate:
            train_one("bench", model, Path(run_dir), data, config, protocol)
        else:  # what train_one runs for a cross-validation fold, without the one evaluation at the end
            train_set = data.augmented(train_augmentation(intensity_jitter=protocol.intensity_jitter))

            def loss_fn(module: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
                images, labels = batch
                return F.cross_entropy(module(images), labels, label_smoothing=protocol.label_smoothing)

            Trainer(model, train_set, config, run_dir, loss_fn=loss_fn).fit()
        return (time.perf_counter() - start) / epochs, (time.process_time() - cpu) / epochs


def breakdown(data_root: str, stride: int) -> list[list[object]]:
    """Seconds of the parts of one epoch of today's default: augmented loading, optimizer steps, validation."""
    options = CTOptions(out=Path("."), protocol="tuned", baseline="none")
    protocol, config = resolve_protocol(options), protocol_train_config("tuned")
    rows = []
    for label, data in (("before", per_item_padding_data(data_root, stride)),
                        ("pad once, no metadata", load_medmnist(data_root, DATASET, EDGE, divisible_by=stride))):
        torch.manual_seed(0)
        train_set = data.augmented(train_augmentation(intensity_jitter=protocol.intensity_jitter))
        start = time.process_time()
        batches = list(DataLoader(train_set, batch_size=config.batch_size, shuffle=True))
        rows.append([f"serve the augmented training split ({label})", time.process_time() - start])
    model, _ = build_models(options, num_classes=2, in_channels=1)
    optimizer = build_optimizer(model, config)
    model.train()
    start = time.process_time()
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels, label_smoothing=protocol.label_smoothing).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip or float("inf"))
        optimizer.step()
    rows.append([f"{len(batches)} optimizer steps (fp32, dropout 0.1)", time.process_time() - start])
    for label, data in (("before", per_item_padding_data(data_root, stride)),
                        ("pad once", load_medmnist(data_root, DATASET, EDGE, divisible_by=stride))):
        start = time.process_time()
        with torch.no_grad():
            predict_probabilities(model, data.splits["val"], batch_size=config.batch_size, flip_tta=True)
            predict_probabilities(model, data.splits["val"], batch_size=config.batch_size)
        rows.append([f"validation, 8 flips + plain ({label})", time.process_time() - start])
    return rows


def smoke_data_root(folder: Path) -> str:
    """A data root holding a MedMNIST-shaped file of 8 random 28³ volumes per split (for ``--smoke``)."""
    rng = np.random.default_rng(0)
    arrays = {}
    for split in ("train", "val", "test"):
        arrays[f"{split}_images"] = rng.integers(0, 2, (8, EDGE, EDGE, EDGE), dtype=np.uint8)
        arrays[f"{split}_labels"] = np.array([[0], [1]] * 4, dtype=np.uint8)
    np.savez(folder / f"{DATASET}.npz", **arrays)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=None, help="data folder (default: $BIOATTN_DATA_ROOT or ../shared/data)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per setting (default: %(default)s)")
    parser.add_argument("--breakdown", action="store_true", help="first time the parts of one default epoch")
    parser.add_argument("--no-eval", action="store_true",
                        help="no validation after each epoch, as in a --cv fold (default: validate every epoch)")
    parser.add_argument("--settings", type=int, nargs="+", default=None,
                        help="indices of the settings to run (default: all; the first is the reference)")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: one epoch of the first and the default setting on 8 random volumes per "
                             "split (no data root needed); measures nothing")
    args = parser.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory() as folder:
            root = smoke_data_root(Path(folder))
            for setting in (SETTINGS[0], SETTINGS[4]):
                wall, _ = epoch_seconds(setting, root, 1, 8, smoke=True)
                print(f"  {setting.name}: {wall:.1f} s/epoch (smoke)")
        return
    data_root = str(resolve_data_root(args.data_root))
    stride = 8  # the 28³ model: 3 stages of stride 2
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}")
    if args.breakdown:
        print(format_table(["part of one epoch", "CPU seconds"], breakdown(data_root, stride), digits=2), flush=True)
    chosen = [SETTINGS[i] for i in args.settings] if args.settings else list(SETTINGS)
    rows, reference = [], None
    for setting in chosen:
        wall, cpu = epoch_seconds(setting, data_root, args.epochs, stride, evaluate=not args.no_eval)
        reference = reference or (wall, cpu)
        rows.append([setting.name, wall, reference[0] / wall, cpu, reference[1] / cpu])
        print(f"  {setting.name}: {wall:.1f} s/epoch wall, {cpu:.1f} CPU-s/epoch "
              f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    print(format_table(["setting", "wall s/epoch", "speedup (wall)", "CPU s/epoch (main process)",
                        "speedup (CPU)"], rows, digits=2,
                       title=f"CT tuned, attention model, {args.epochs} epochs per setting, "
                             f"{'no validation' if args.no_eval else 'validation after each epoch'} "
                             f"(load average at the end {os.getloadavg()[0]:.2f})"))


if __name__ == "__main__":
    main()
