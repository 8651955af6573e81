"""The CT task's files for a model: NIfTI files, DICOM files and DICOM series folders read into the in-memory
volumes :class:`~bioattn.models.ct_classifier.CTClassifier` takes (a model reads no files).

    from bioattn.models import load_pretrained
    from bioattn.tasks.ct.volumes import predict_files, predict_proba_files

    model = load_pretrained("adrenalmnist3d-28")             # or a run directory of bioattn train ct
    P = predict_proba_files(model, ["a.nii.gz", "dicom_series/"])   # (N, K), classes in model.class_names order
    labels = predict_files(model, ["a.nii.gz"])                      # (N,) class names, the run's threshold

Both equal what ``bioattn predict ct`` writes for the same files (the run's saved preprocessing, flip averaging
and threshold; the keywords of :meth:`~bioattn.models.ct_classifier.CTClassifier.predict_proba` replace them).
"""
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
    """Each NIfTI file, DICOM file or DICOM series folder of ``paths`` (one path or several) as the channel-first
    ``MetaTensor`` ``(C, X, Y, Z)`` of :func:`~bioattn.data.ct.read_ct_volume` (RAS+ affine kept); a file that cannot
    be read is a :class:`~bioattn.errors.UserInputError` naming it."""
    return [read_ct_volume(path) for path in _path_list(paths)]


def predict_proba_files(model: nn.Module, paths: Paths, **options: Any) -> np.ndarray:
    """Class probabilities ``(N, K)`` of the volumes in ``paths`` (:func:`read_volumes`) by ``model`` (a CT
    classifier or an ensemble of them), errors naming each file; ``options``: the keywords of
    :meth:`~bioattn.models.ct_classifier.CTClassifier.predict_proba` (``flip_tta``, ``preprocessing``)."""
    items = _path_list(paths)
    return model.predict_proba(read_volumes(items), sources=[str(path) for path in items], **options)


def predict_files(model: nn.Module, paths: Paths, **options: Any) -> np.ndarray:
    """Class labels ``(N,)`` of the volumes in ``paths`` with the run's decision threshold (see
    :func:`predict_proba_files`)."""
    items = _path_list(paths)
    return model.predict(read_volumes(items), sources=[str(path) for path in items], **options)
