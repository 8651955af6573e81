"""Train the hybrid 3D CNN + attention model on a MedMNIST 3D dataset or your own NIfTI/DICOM volumes, beside a
MONAI 3D ResNet baseline.

    python recipes/ct_classify.py --data-root DIR --dataset adrenalmnist3d [--size 28|64] --out RUN_DIR \\
        [--protocol medmnist|tuned] [--max-minutes M] [--quick]
    python recipes/ct_classify.py --manifest labels.csv --out RUN_DIR [--size X Y Z] [--window LOW HIGH]

A thin wrapper around ``bioattn train ct`` (same flags; ``bioattn train ct --help`` describes them). Runs under
``torchrun`` too.
"""
from __future__ import annotations

import sys

from bioattn.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "ct", *sys.argv[1:]]))
