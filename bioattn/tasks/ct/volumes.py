"""NIfTI and DICOM files read for a :class:`~bioattn.models.ct_classifier.CTClassifier`, as ``predict ct`` does."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
from monai.data import MetaTensor
from torch import nn

from bioattn.data.ct import read_ct_volume
from bioattn.errors import UserInputError

__all__ = ["predict_files", "predict_proba_files", "read_volumes"]

Paths = str | os.PathLike | Sequence[str | os.PathLike]


def _path_list(paths: Paths) -> list[str | os.PathLike]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise UserInputError("no volumes given")
    return items


def read_volumes(paths: Paths) -> list[MetaTensor]:
    """Each volume of ``paths`` as a ``MetaTensor`` ``(C, X, Y, Z)`` (:func:`~bioattn.data.ct.read_ct_volume`)."""
    return [read_ct_volume(path) for path in _path_list(paths)]


def predict_proba_files(model: nn.Module, paths: Paths, **options: Any) -> np.ndarray:
    """Class probabilities ``(N, K)`` of the volumes in ``paths`` (``options``: of ``predict_proba``)."""
    items = _path_list(paths)
    return model.predict_proba(read_volumes(items), sources=[str(path) for path in items], **options)


def predict_files(model: nn.Module, paths: Paths, **options: Any) -> np.ndarray:
    """Class labels ``(N,)`` of the volumes in ``paths`` at the run's threshold."""
    items = _path_list(paths)
    return model.predict(read_volumes(items), sources=[str(path) for path in items], **options)
