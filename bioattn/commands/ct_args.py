"""The flags of ``bioattn predict ct``, and those ``train``, ``predict`` and ``explain ct`` share: the NIfTI/DICOM
preprocessing steps, named and meaning the same in training and prediction (training's own: :mod:`bioattn.commands.ct_train_args`)."""
from __future__ import annotations

import argparse
from pathlib import Path


#: preprocessing flag destination -> (library keyword, canonical flag)
PREPROCESSING_FLAGS = {"intensity_window": ("window", "--intensity-window"), "spacing": ("spacing", "--spacing"),
                       "orientation": ("orientation", "--orientation"), "size": ("size", "--size"),
                       "fit": ("fit", "--fit")}


def add_intensity_window_argument(group, *, default_help: str) -> None:
    """``--intensity-window LOW HIGH``."""
    group.add_argument("--intensity-window", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                                help="map intensities LOW..HIGH (e.g. HU -160 240 for abdomen) onto 0..1, clipped "
                                     f"(default: {default_help})")


def add_fit_argument(group, *, default, default_help: str) -> None:
    """``--fit resize|crop-pad``: how a volume is brought to ``--size``."""
    from bioattn.tasks.ct.preprocessing import FITS

    group.add_argument("--fit", choices=FITS, default=default,
                       help="bring every volume to --size by resampling it whole (resize), or by centre crop / zero "
                            f"pad (crop-pad) (default: {default_help})")


def add_tta_argument(parser, *, default_help: str) -> None:
    """``--tta none|flips``."""
    parser.add_argument("--tta", choices=("none", "flips"), default=None,
                              help="test-time augmentation: flips averages the probabilities over the 8 flips of the "
                                   f"three axes (8x the compute) (default: {default_help})")


def add_preprocessing_arguments(parser: argparse.ArgumentParser) -> None:
    """The NIfTI/DICOM preprocessing flags of ``predict ct`` and ``explain ct``; each replaces the run's step."""
    group = parser.add_argument_group(
        "NIfTI / DICOM preprocessing (default: the run's preprocessing.json; each flag replaces its step; then zero "
        "padding to a multiple of the CNN stride)")
    add_intensity_window_argument(group, default_help="the run's")
    group.add_argument("--spacing", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample to this voxel size in mm (default: the run's)")
    group.add_argument("--orientation", default=None, metavar="CODES", help="reorient, e.g. RAS (default: the run's)")
    group.add_argument("--size", type=int, nargs="+", default=None, metavar="N",
                              help="the model input X Y Z, or one value for a cube, reached as --fit says "
                                   "(default: the run's)")
    add_fit_argument(group, default=None, default_help="the run's")


def preprocessing_overrides(args: argparse.Namespace) -> dict:
    """The preprocessing steps given on the command line, as library keywords
    (:func:`bioattn.tasks.ct.predict.resolve_preprocessing`)."""
    return {keyword: tuple(value) if isinstance(value, list) else value
            for dest, (keyword, _) in PREPROCESSING_FLAGS.items() if (value := getattr(args, dest, None)) is not None}


# ------------------------------------------------------------------------------------------------ predict ct
def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn predict ct``."""
    from bioattn.attention.rollout import HEAD_FUSIONS
    from bioattn.commands.common import add_model_and_device_arguments

    add_model_and_device_arguments(parser, trained_by="bioattn train ct")
    parser.add_argument("--input", type=Path, required=True,
                        help="manifest .csv, .nii/.nii.gz, DICOM file or folder, or MedMNIST .npz")
    parser.add_argument("--output", type=Path, required=True,
                        help="CSV of class probabilities to write ('-': standard output; the summary then goes to stderr)")
    parser.add_argument("--attention-map", nargs="?", const="auto", default=None, metavar="MAP.nii.gz",
                        help="also write the [CLS] attention rollout as NIfTI on the input grid "
                             "(default path: OUTPUT with suffix .attention.nii.gz)")
    parser.add_argument("--split", choices=("train", "val", "test"), default=None,
                        help=".npz or manifest with a split column: predict only this split (default: every row)")
    parser.add_argument("--head-fusion", choices=HEAD_FUSIONS, default="mean",
                        help="how heads are fused in the attention rollout (default: mean)")
    parser.add_argument("--batch-size", type=int, default=32, help="volumes per batch (default: 32)")
    parser.add_argument("--workers", type=int, default=0,
                        help="manifest: DataLoader worker processes reading and preprocessing the scans (0: in the "
                             "main process) (default: %(default)s)")
    add_tta_argument(parser, default_help="as the run evaluated: flips after --protocol tuned, else none")
    add_preprocessing_arguments(parser)
