"""How a CT volume becomes a model input (:class:`VolumePreprocessing`) and a run's ``preprocessing.json``."""
from __future__ import annotations

import copy
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

import monai.transforms
import torch
from monai.data import MetaTensor
from monai.transforms import Compose, DivisiblePad, DivisiblePadd, MapTransform

from bioattn.errors import UserInputError
from bioattn.io import write_json


@dataclass(frozen=True)
class VolumePreprocessing:
    """Steps from a :func:`~bioattn.data.ct.read_ct_volume` output to a model input, in order; ``None`` skips one.

    orientation: axis codes (``"RAS"``); spacing: mm ``(X, Y, Z)``; window: ``(low, high)`` mapped onto [0, 1];
    resize: ``(X, Y, Z)`` (trilinear); size: centre crop / zero pad to ``(X, Y, Z)``."""
    orientation: str | None = None
    spacing: tuple[float, float, float] | None = None
    window: tuple[float, float] | None = None
    resize: tuple[int, int, int] | None = None
    size: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        def triple(name: str, values: Sequence[float] | None, kind: type) -> tuple | None:
            if values is None:
                return None
            values = tuple(kind(v) for v in values)
            if len(values) != 3 or min(values) <= 0:
                raise UserInputError(f"{name} needs 3 positive values (X Y Z), got {list(values)}")
            return values
        object.__setattr__(self, "spacing", triple("spacing", self.spacing, float))
        object.__setattr__(self, "resize", triple("resize", self.resize, int))
        object.__setattr__(self, "size", triple("size", self.size, int))
        if self.window is not None:
            low, high = (float(v) for v in self.window)
            if not high > low:
                raise UserInputError(f"intensity window must have high > low, got ({low}, {high})")
            object.__setattr__(self, "window", (low, high))

    @property
    def output_size(self) -> tuple[int, int, int] | None:
        """The spatial size after these steps, or ``None`` when it follows the input."""
        return self.size or self.resize

    def _steps(self) -> list[tuple[str, dict]]:
        steps: list[tuple[str, dict]] = []
        if self.orientation is not None:
            steps.append(("Orientation", {"axcodes": self.orientation, "labels": None}))
        if self.spacing is not None:
            steps.append(("Spacing", {"pixdim": self.spacing, "mode": "bilinear"}))
        if self.window is not None:
            low, high = self.window
            steps.append(("ScaleIntensityRange",
                          {"a_min": low, "a_max": high, "b_min": 0.0, "b_max": 1.0, "clip": True}))
        if self.resize is not None:
            steps.append(("Resize", {"spatial_size": self.resize, "mode": "trilinear"}))
        if self.size is not None:
            steps.append(("ResizeWithPadOrCrop", {"spatial_size": self.size}))
        return steps

    def pipeline(self, *, divisible_by: int = 1) -> Compose:
        """The invertible array transforms, then zero padding of each spatial size to a multiple of ``divisible_by``."""
        steps = [getattr(monai.transforms, name)(**options) for name, options in self._steps()]
        if divisible_by > 1:
            steps.append(DivisiblePad(k=divisible_by))
        return Compose(steps)

    def dict_pipeline(self, keys: str | Sequence[str], *, divisible_by: int = 1) -> list[MapTransform]:
        """The same steps as MONAI dictionary transforms (``Orientationd``, ``Spacingd``, ...) on ``keys``."""
        steps = [getattr(monai.transforms, f"{name}d")(keys, **options) for name, options in self._steps()]
        if divisible_by > 1:
            steps.append(DivisiblePadd(keys, k=divisible_by))
        return steps

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples become lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> VolumePreprocessing:
        """Inverse of :meth:`to_dict`; unknown keys are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UserInputError(f"unknown preprocessing option(s) {unknown}; known: {sorted(known)}")
        return cls(**values)


PREPROCESSING_NAME = "preprocessing.json"
PREPROCESSING_FORMAT = 1


@dataclass(frozen=True)
class SavedPreprocessing:
    """A run's ``preprocessing.json`` (:meth:`load`, :meth:`save`); ``threshold``: the decision threshold on class 1."""
    source: str
    preprocessing: VolumePreprocessing = field(default_factory=VolumePreprocessing)
    flip_tta: bool = False
    profile: dict[str, Any] = field(default_factory=dict)
    threshold: float = 0.5

    def save(self, run_dir: str | os.PathLike) -> Path:
        """Write ``run_dir/preprocessing.json`` (atomically); returns its path."""
        path = Path(run_dir) / PREPROCESSING_NAME
        write_json(path, {"format": PREPROCESSING_FORMAT, "source": self.source,
                          "preprocessing": self.preprocessing.to_dict(), "flip_tta": self.flip_tta,
                          "training_volumes": dict(self.profile), "threshold": self.threshold})
        return path

    @classmethod
    def load(cls, run_dir: str | os.PathLike) -> SavedPreprocessing | None:
        """The run's saved preprocessing, or ``None`` without ``preprocessing.json``."""
        path = Path(run_dir) / PREPROCESSING_NAME
        if not path.is_file():
            return None
        try:
            values = json.loads(path.read_text())
            return cls(source=values["source"], preprocessing=VolumePreprocessing.from_dict(values["preprocessing"]),
                       flip_tta=bool(values["flip_tta"]), profile=dict(values.get("training_volumes", {})),
                       threshold=float(values.get("threshold", 0.5)))
        except (json.JSONDecodeError, KeyError, TypeError, UserInputError) as exc:
            raise UserInputError(f"{path}: not a valid {PREPROCESSING_NAME} ({exc})") from exc


def ct_preprocessing(*, orientation: str | None = None, spacing: Sequence[float] | None = None,
                     window: tuple[float, float] | None = None, resize: Sequence[int] | None = None,
                     spatial_size: Sequence[int] | None = None, divisible_by: int = 1) -> Compose:
    """``VolumePreprocessing(..., size=spatial_size).pipeline(divisible_by=...)``, the invertible MONAI pipeline."""
    return VolumePreprocessing(orientation, spacing, window, resize, spatial_size).pipeline(divisible_by=divisible_by)


def invert_to_input_grid(pipeline: Compose, model_input: MetaTensor, values: torch.Tensor) -> MetaTensor:
    """Map ``values (C, X', Y', Z')`` on the grid of ``model_input = pipeline(volume)`` back onto ``volume``'s grid."""
    tracked = MetaTensor(values, meta=copy.deepcopy(model_input.meta),
                         applied_operations=copy.deepcopy(model_input.applied_operations))
    return pipeline.inverse(tracked)
