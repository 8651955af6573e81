"""What every CT classifier of bioattn shares: :class:`CTClassifier`, a saved model that predicts NIfTI files, DICOM
series and in-memory volumes with its run's settings (preprocessing, flip averaging, decision threshold), the one
path ``bioattn predict ct``, ``bioattn explain ct`` and ``from_pretrained(run).predict`` take; and the helpers of
that path (:func:`predict_probabilities`, :func:`flip_axis_sets`, :func:`predicted_index`,
:func:`in_memory_volume`). The attention model is :class:`~bioattn.models.hybrid_ct.HybridCT3D`; the same-run
ResNet baseline :class:`~bioattn.models.ct_resnet.ResNetCT3D`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from monai.data import MetaTensor
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from bioattn.data.ct import SavedPreprocessing, VolumePreprocessing, check_volume, read_ct_volume
from bioattn.errors import UserInputError
from bioattn.models.base import PretrainedModel
from bioattn.models.ensemble import Ensemble, ensemble_members
from bioattn.models.registry import resolve_model_dir

__all__ = [
    "CTClassifier",
    "flip_axis_sets",
    "in_memory_volume",
    "predict_probabilities",
    "predicted_index",
]


def in_memory_volume(array: np.ndarray | Tensor, source: str, *, spacing: Sequence[float] | None = None,
                     needs_spacing: bool = False) -> MetaTensor:
    """An in-memory volume ``(X, Y, Z)`` or ``(C, X, Y, Z)`` (axes in RAS order) as the channel-first ``MetaTensor``
    a file would give, float32, with an affine of ``spacing`` mm voxels (default 1 mm; a ``MetaTensor`` keeps its
    own). ``needs_spacing``: refuse a plain array without ``spacing`` (the run resamples to a voxel size)."""
    if isinstance(array, MetaTensor):
        return array if array.dim() == 4 else MetaTensor(array[None], affine=array.affine)
    if not isinstance(array, (np.ndarray, Tensor)):
        raise UserInputError(f"{source}: expected a path, a numpy array or a torch tensor, got {type(array).__name__}")
    values = torch.as_tensor(np.asarray(array.detach().cpu() if isinstance(array, Tensor) else array),
                             dtype=torch.float32)
    if values.dim() not in (3, 4):
        raise UserInputError(f"{source}: an array of shape {tuple(values.shape)}; a volume is (X, Y, Z) or "
                             "channel-first (C, X, Y, Z)")
    if spacing is None and needs_spacing:
        raise UserInputError(f"{source}: the run resamples to a voxel size, so an array needs spacing=(X, Y, Z) in mm")
    sizes = tuple(float(v) for v in (spacing if spacing is not None else (1.0, 1.0, 1.0)))
    if len(sizes) != 3 or min(sizes) <= 0:
        raise UserInputError(f"{source}: spacing must be 3 positive voxel sizes in mm, got {spacing}")
    affine = torch.diag(torch.tensor([*sizes, 1.0], dtype=torch.float64))
    return MetaTensor(values if values.dim() == 4 else values[None], affine=affine)


class CTClassifier(PretrainedModel):
    """A saved 3D volume classifier with its run's inference settings. Subclasses set ``in_channels``,
    ``class_names`` and ``stride`` (inputs are zero-padded to a multiple of it) and call :meth:`init_run_settings`."""

    def init_run_settings(self) -> None:
        #: how :meth:`predict` prepares a NIfTI/DICOM file and whether it averages over flips; ``from_pretrained``
        #: sets both from the run's ``preprocessing.json``
        self.input_preprocessing = VolumePreprocessing()
        self.flip_tta = False
        #: decision threshold on class 1 of a binary model (the run's, from its ``preprocessing.json``)
        self.threshold = 0.5

    def check_attention_size(self, spatial_shape: Sequence[int], source: str) -> None:
        """Refuse inputs too large for the model (nothing to check without attention maps)."""

    @classmethod
    def from_pretrained(cls, run_dir: str | os.PathLike, map_location: str | torch.device = "cpu") -> CTClassifier | Ensemble:
        """:meth:`PretrainedModel.from_pretrained`, with the run's ``preprocessing.json`` (its window, spacing,
        orientation, size and flip averaging) kept for :meth:`predict`; an ensemble's members take the ensemble's."""
        model = super().from_pretrained(run_dir, map_location=map_location)
        cls.attach_run_settings(model, resolve_model_dir(run_dir))
        return model

    @staticmethod
    def attach_run_settings(model: nn.Module, model_dir: Path) -> None:
        """Give ``model`` (one model or an ensemble's members) the preprocessing and flip averaging of the run in
        ``model_dir`` (its ``preprocessing.json``), for :meth:`predict`; nothing when the run has none."""
        saved = SavedPreprocessing.load(model_dir)
        if saved is not None:
            for member in ensemble_members(model):
                member.input_preprocessing, member.flip_tta = saved.preprocessing, saved.flip_tta
                member.threshold = saved.threshold

    def predict(
        self, paths: str | os.PathLike | np.ndarray | Tensor | Sequence[str | os.PathLike | np.ndarray | Tensor], *,
        flip_tta: bool | None = None, preprocessing: VolumePreprocessing | None = None,
        spacing: Sequence[float] | None = None,
    ) -> np.ndarray:
        """Class probabilities of NIfTI files, DICOM series folders or in-memory volumes, as ``bioattn predict ct``
        computes them: ``(K,)`` for one volume, ``(N, K)`` for a list, float32, classes in ``self.class_names``
        order.

        A file is read (:func:`~bioattn.data.ct.read_ct_volume`). An array or tensor is a volume as a file would
        hold it: ``(X, Y, Z)`` or channel-first ``(C, X, Y, Z)``, axes as in a NIfTI file read into RAS+ (x
        increasing towards the patient's right, y anterior, z superior), intensities in the units of the training
        volumes (Hounsfield units for CT runs: the run's window is applied to them, not assumed done), voxels of
        ``spacing`` mm (X Y Z; default 1 1 1; needed when the run resamples to a voxel size). A MONAI
        ``MetaTensor`` keeps its own affine. Each volume is then prepared as the run's ``preprocessing.json`` says
        (or as ``preprocessing`` replaces it) and zero-padded to the stem stride; ``flip_tta`` (default: as the
        run evaluated) averages over the 8 flips. On an ensemble, the members' mean probability. A file that
        cannot be read, an array of another shape, or the wrong channels is a
        :class:`~bioattn.errors.UserInputError` naming it. The checks of inputs unlike the training volumes
        (``warning:`` lines) are those of ``bioattn predict ct`` / :func:`bioattn.tasks.ct.predict.predict_volume`.
        """
        single = isinstance(paths, (str, os.PathLike, np.ndarray, Tensor))
        items = [paths] if single else list(paths)
        if not items:
            raise UserInputError("no volumes given")
        steps = preprocessing or self.input_preprocessing
        pipeline = steps.pipeline(divisible_by=self.stride)
        flips = self.flip_tta if flip_tta is None else flip_tta
        rows = []
        for number, item in enumerate(items):
            if isinstance(item, (str, os.PathLike)):
                source, volume = str(item), read_ct_volume(item)
            else:
                source = "the volume" if single else f"volume {number}"
                volume = in_memory_volume(item, source, spacing=spacing, needs_spacing=steps.spacing is not None)
            check_volume(volume, source, in_channels=self.in_channels)
            image = pipeline(volume).as_tensor().float()
            self.check_attention_size(tuple(image.shape[1:]), source)
            rows.append(predict_probabilities(self, [(image, 0)], batch_size=1, flip_tta=flips)[0])
        return rows[0] if single else np.stack(rows)

    def predict_classes(self, paths: str | os.PathLike | np.ndarray | Tensor | Sequence, **options) -> str | list[str]:
        """The predicted class name of each volume (one name for one volume), from :meth:`predict`'s probabilities
        (``options`` are its keywords) with the run's decision threshold (:attr:`threshold`), as ``bioattn predict
        ct`` writes ``predicted_label``."""
        probabilities = np.atleast_2d(self.predict(paths, **options))
        names = [self.class_names[predicted_index(row, self.threshold)] for row in probabilities]
        return names[0] if isinstance(paths, (str, os.PathLike, np.ndarray, Tensor)) else names


def predicted_index(probabilities: Sequence[float], threshold: float = 0.5) -> int:
    """Class 1 of a binary model when its probability is at least ``threshold`` (class 0 otherwise); the most
    probable class for more classes. The one rule ``predict ct``, ``explain ct`` and :meth:`HybridCT3D.predict_classes`
    apply (``threshold``: the run's, saved in ``preprocessing.json``)."""
    values = [float(v) for v in probabilities]
    if len(values) == 2:
        return int(values[1] >= threshold)
    return int(np.argmax(values))


def flip_axis_sets(spatial_dims: int = 3) -> list[tuple[int, ...]]:
    """Every subset of the spatial axes of a ``(B, C, *spatial)`` batch (dims ``2 .. 1 + spatial_dims``).

    ``2**spatial_dims`` tuples for :meth:`torch.Tensor.flip`; ``()`` is the identity.
    """
    axes = range(2, 2 + spatial_dims)
    return [tuple(axis for bit, axis in enumerate(axes) if mask >> bit & 1) for mask in range(2**spatial_dims)]


@torch.no_grad()
def predict_probabilities(
    model: nn.Module, dataset: Dataset, *, batch_size: int = 32, flip_tta: bool = False
) -> np.ndarray:
    """Class probabilities ``(N, num_classes)`` of any logits classifier over ``(image, label)`` items.

    With ``flip_tta`` (test-time augmentation) each volume's probabilities are the mean of the softmax over
    all ``2**3 = 8`` combinations of flips of its three spatial axes (see :func:`flip_axis_sets`): 8x the
    compute, for models trained with random flips along every axis.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    flips = flip_axis_sets() if flip_tta else [()]
    chunks = []
    for images, _ in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        images = images.to(device)
        if flip_tta and images.dim() != 5:
            raise UserInputError(
                f"flip test-time augmentation needs volumes (B, C, D, H, W), got shape {tuple(images.shape)}"
            )
        probs = [model(images.flip(axes) if axes else images).float().softmax(dim=-1) for axes in flips]
        chunks.append(torch.stack(probs).mean(dim=0).cpu())
    model.train(was_training)
    return torch.cat(chunks).numpy()
