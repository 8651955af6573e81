"""The flags ``train``, ``predict`` and ``explain ct`` share: the NIfTI/DICOM preprocessing steps and ``--tta``."""
from __future__ import annotations

from typing import Any

from bioattn.options import flag
from bioattn.tasks.ct.preprocessing import FITS

#: preprocessing field -> (library keyword, canonical flag)
PREPROCESSING_FLAGS = {"intensity_window": ("window", "--intensity-window"), "spacing": ("spacing", "--spacing"),
                       "orientation": ("orientation", "--orientation"), "size": ("size", "--size"),
                       "fit": ("fit", "--fit")}
#: The argument group of the preprocessing flags of ``predict ct`` and ``explain ct``.
PREPROCESSING = ("NIfTI / DICOM preprocessing (default: the run's preprocessing.json; each flag replaces its step; "
                 "then zero padding to a multiple of the CNN stride)")


def intensity_window_flag(*, group: str, default_help: str) -> Any:
    """``--intensity-window LOW HIGH``."""
    return flag("--intensity-window", default=None, nargs=2, metavar=("LOW", "HIGH"), group=group,
                help="map intensities LOW..HIGH (e.g. HU -160 240 for abdomen) onto 0..1, clipped "
                     f"(default: {default_help})")


def spacing_flag(*, group: str, default_help: str) -> Any:
    """``--spacing X Y Z``."""
    return flag("--spacing", default=None, nargs=3, metavar=("X", "Y", "Z"), group=group,
                help=f"resample to this voxel size in mm (default: {default_help})")


def fit_flag(*, group: str, default: str | None, default_help: str) -> Any:
    """``--fit resize|crop-pad``: how a volume is brought to ``--size``."""
    return flag("--fit", default=default, choices=FITS, group=group,
                help="bring every volume to --size by resampling it whole (resize), or by centre crop / zero pad "
                     f"(crop-pad) (default: {default_help})")


def tta_flag(*, default_help: str) -> Any:
    """``--tta none|flips``."""
    return flag("--tta", default=None, choices=("none", "flips"),
                help="test-time augmentation: flips averages the probabilities over the 8 flips of the three axes "
                     f"(8x the compute) (default: {default_help})")


def orientation_flag() -> Any:
    """``--orientation`` of ``predict`` and ``explain ct``."""
    return flag("--orientation", default=None, metavar="CODES", group=PREPROCESSING,
                help="reorient, e.g. RAS (default: the run's)")


def size_flag() -> Any:
    """``--size`` of ``predict`` and ``explain ct``."""
    return flag("--size", default=None, nargs="+", metavar="N", group=PREPROCESSING,
                help="the model input X Y Z, or one value for a cube, reached as --fit says (default: the run's)")


def preprocessing_overrides(options: Any) -> dict:
    """The preprocessing steps ``options`` give, as :func:`bioattn.tasks.ct.predict.resolve_preprocessing` keywords."""
    return {keyword: value for name, (keyword, _) in PREPROCESSING_FLAGS.items()
            if (value := getattr(options, name, None)) is not None}
