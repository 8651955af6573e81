"""The CT flags ``bioattn predict ct`` and ``bioattn explain ct`` share: the NIfTI/DICOM preprocessing steps."""
from __future__ import annotations

import argparse

PREPROCESSING_FLAGS = ("window", "spacing", "orientation", "resize", "size")


def add_preprocessing_arguments(parser: argparse.ArgumentParser) -> None:
    """The NIfTI/DICOM preprocessing flags shared by ``predict ct`` and ``explain ct`` (:data:`PREPROCESSING_FLAGS`)."""
    group = parser.add_argument_group(
        "NIfTI / DICOM preprocessing (default: the run's preprocessing.json; each flag replaces its step; then zero "
        "padding to a multiple of the CNN stride)")
    group.add_argument("--window", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                       help="map intensities LOW..HIGH (e.g. HU -160 240 for abdomen) onto 0..1, clipped "
                            "(default: the run's)")
    group.add_argument("--spacing", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample to this voxel size in mm (default: the run's)")
    group.add_argument("--orientation", default=None, metavar="CODES", help="reorient, e.g. RAS (default: the run's)")
    group.add_argument("--resize", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample the whole volume to this size (default: the run's)")
    group.add_argument("--size", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="then centre crop / zero pad to this size (default: the run's)")


def preprocessing_overrides(args: argparse.Namespace) -> dict:
    """The preprocessing steps given on the command line (step name -> value)."""
    given = {name: getattr(args, name) for name in PREPROCESSING_FLAGS if getattr(args, name) is not None}
    return {name: tuple(v) if isinstance(v, list) else v for name, v in given.items()}


def preprocessing_from_args(args: argparse.Namespace, saved):
    """The run's saved :class:`~bioattn.data.ct.VolumePreprocessing` with the flags that were given applied."""
    from bioattn.tasks.ct_predict import resolve_preprocessing

    return resolve_preprocessing(saved, **preprocessing_overrides(args))
