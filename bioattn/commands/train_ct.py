"""Train the hybrid 3D CNN + attention model (beside a MONAI 3D ResNet) on MedMNIST 3D or your own NIfTI/DICOM volumes.

    bioattn train ct --dataset adrenalmnist3d [--size 64|28] --out RUN_DIR [--protocol tuned|medmnist] [--quick]
    bioattn train ct --dataset adrenalmnist3d --cv 5 --out RUN_DIR          # 5-fold CV, fold models = ensemble
    bioattn train ct --manifest labels.csv --out RUN_DIR [--size X Y Z] [--intensity-window LOW HIGH] [--spacing X Y Z]

Your own data: ``labels.csv`` has the columns ``image,label[,split]``; ``image`` is a NIfTI file or a DICOM series
folder (relative paths: relative to the CSV), ``label`` any text or number (the sorted distinct labels are the
classes, saved with the model), ``split`` train/val/test (without it, or without val rows, a seeded stratified 20 %
of the training rows is held out for validation). Every volume is read once (MONAI CacheDataset), reoriented
(--orientation, RAS), optionally resampled (--spacing) and windowed (--intensity-window, e.g. HU -160 240 onto [0, 1];
the default for CT in Hounsfield units), then
resized (--fit resize) or centre cropped / zero padded (--fit crop-pad) to --size (default 64 64 64; divisible by
the CNN stride: 16 above 32 voxels, else 8; above 32 voxels each 2³ block of voxels is folded into channels before
the CNN, --unshuffle); random flips and rotations follow the cache. The preprocessing, the
evaluation (flip averaging) and a profile of the training volumes are saved in RUN_DIR/preprocessing.json, so
``bioattn predict ct`` and ``bioattn explain ct`` apply them by default and warn about inputs unlike the training
volumes.

Protocols: ``tuned`` (default) trains 15 epochs with AdamW (weight decay 0.05), warm-up + cosine decay, label
smoothing 0.1, no intensity jitter, and averages each prediction over the 8 flips of the volume. ``medmnist`` is
MedMNIST v2's official one: Adam, lr 1e-3, batch 32, no weight decay, lr x0.1 at 50 % and 75 % of --epochs (100).
Both keep the weights with the best validation AUROC and score them on the test split when there is one.

Ensembles: --seeds S1 S2 ... trains one complete run per seed (RUN_DIR/seed<S>/) on the same split; --cv K runs a
K-fold stratified cross-validation over train + val (RUN_DIR/fold<k>/; each fold keeps its final weights, nothing
is selected on the held-out fold) and reports the out-of-fold AUROC of both models. RUN_DIR then loads as the
ensemble of the attention models (mean probability) in predict, explain and from_pretrained.

Writes into RUN_DIR: config.json + model.safetensors + preprocessing.json (the attention model), metrics.json,
val_auc.png (validation AUROC per epoch, both models), training_curve.png, train_log.csv, checkpoint/ (--resume
continues), splits.csv (manifest runs), and the same for the baseline in RUN_DIR/baseline_resnet/. Runs under
torchrun (only rank 0 evaluates and writes).
"""
from __future__ import annotations

import argparse

from bioattn.commands.ct_train_args import add_train_arguments as add_arguments, train_options_from_args

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.ct.task import TASK

    options = train_options_from_args(args)
    metrics = TASK.run(options)
    if metrics:  # rank 0 only
        print((options.out / "summary.md").read_text(encoding="utf-8").rstrip("\n"))
        if not metrics["test_split_present"]:
            print("note: no test split; this run's numbers are validation numbers"
                  + (", the published ones are test numbers (compare with care)"
                     if metrics["published_test_auroc_accuracy"] else ""))
        print(f"wrote {options.out / 'metrics.json'}")
    return 0
