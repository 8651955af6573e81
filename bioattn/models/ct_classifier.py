"""What every CT classifier of bioattn shares: :class:`CTClassifier`, a saved model that predicts in-memory volumes
with its run's settings (preprocessing, flip averaging, decision threshold): ``predict_proba`` gives the ``(N, K)``
class probabilities, ``predict`` the class labels, as ``bioattn predict ct`` and ``bioattn explain ct`` compute them
(reading NIfTI files and DICOM series is the CT task's: :mod:`bioattn.tasks.ct.volumes`); and the helpers of
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

from bioattn.data.ct import SavedPreprocessing, VolumePreprocessing, check_volume
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
        raise UserInputError(f"{source}: expected a numpy array or a torch tensor, got {type(array).__name__}")
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
        #: how :meth:`predict_proba` prepares a volume and whether it averages over flips; ``from_pretrained``
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
        orientation, size and flip averaging) kept for :meth:`predict_proba`; an ensemble's members take the ensemble's."""
        model = super().from_pretrained(run_dir, map_location=map_location)
        cls.attach_run_settings(model, resolve_model_dir(run_dir))
        return model

    @staticmethod
    def attach_run_settings(model: nn.Module, model_dir: Path) -> None:
        """Give ``model`` (one model or an ensemble's members) the preprocessing and flip averaging of the run in
        ``model_dir`` (its ``preprocessing.json``), for :meth:`predict_proba`; nothing when the run has none."""
        saved = SavedPreprocessing.load(model_dir)
        if saved is not None:
            for member in ensemble_members(model):
                member.input_preprocessing, member.flip_tta = saved.preprocessing, saved.flip_tta
                member.threshold = saved.threshold

    def predict_proba(
        self, volumes: np.ndarray | Tensor | Sequence[np.ndarray | Tensor], *, flip_tta: bool | None = None,
        preprocessing: VolumePreprocessing | None = None, spacing: Sequence[float] | None = None,
        sources: Sequence[str] | None = None,
    ) -> np.ndarray:
        """Class probabilities ``(N, K)`` float32 of in-memory volumes, rows summing to 1, classes in
        ``self.class_names`` order, as ``bioattn predict ct`` computes them (one volume: ``N = 1``).

        A volume is a numpy array or torch tensor as a file would hold it: ``(X, Y, Z)`` or channel-first ``(C, X,
        Y, Z)`` (a ``(N, C, X, Y, Z)`` array is N volumes), axes as in a NIfTI file read into RAS+ (x increasing
        towards the patient's right, y anterior, z superior), intensities in the units of the training volumes
        (Hounsfield units for CT runs: the run's window is applied to them, not assumed done), voxels of
        ``spacing`` mm (X Y Z; default 1 1 1; needed when the run resamples to a voxel size). A MONAI
        ``MetaTensor`` (what :func:`~bioattn.data.ct.read_ct_volume` returns for a NIfTI file or DICOM series)
        keeps its own affine. The model reads no files: :func:`bioattn.tasks.ct.volumes.predict_proba_files`
        reads them and calls this. Each volume is prepared as the run's ``preprocessing.json`` says (or as
        ``preprocessing`` replaces it) and zero-padded to the stem stride; ``flip_tta`` (default: as the run
        evaluated) averages over the 8 flips. On an ensemble, the members' mean probability. An array of another
        shape or the wrong channels is a :class:`~bioattn.errors.UserInputError` naming it (``sources``: a name
        per volume for these errors, default ``volume <i>``). The checks of inputs unlike the training volumes
        (``warning:`` lines) are those of ``bioattn predict ct`` / :func:`bioattn.tasks.ct.predict.predict_volume`.
        """
        items = _volume_list(volumes)
        names = list(sources) if sources is not None else [f"volume {number}" for number in range(len(items))]
        if len(names) != len(items):
            raise ValueError(f"{len(names)} sources for {len(items)} volumes")
        steps = preprocessing or self.input_preprocessing
        pipeline = steps.pipeline(divisible_by=self.stride)
        flips = self.flip_tta if flip_tta is None else flip_tta
        rows = []
        for source, item in zip(names, items):
            volume = in_memory_volume(item, source, spacing=spacing, needs_spacing=steps.spacing is not None)
            check_volume(volume, source, in_channels=self.in_channels)
            image = pipeline(volume).as_tensor().float()
            self.check_attention_size(tuple(image.shape[1:]), source)
            rows.append(predict_probabilities(self, [(image, 0)], batch_size=1, flip_tta=flips)[0])
        return np.stack(rows)

    def predict(self, volumes: np.ndarray | Tensor | Sequence[np.ndarray | Tensor], **options) -> np.ndarray:
        """Class labels ``(N,)`` (names from ``self.class_names``) of in-memory volumes, from :meth:`predict_proba`'s
        probabilities (``options`` are its keywords) with the run's decision threshold (:attr:`threshold`), as
        ``bioattn predict ct`` writes ``predicted_label``."""
        probabilities = self.predict_proba(volumes, **options)
        return np.asarray([self.class_names[predicted_index(row, self.threshold)] for row in probabilities])


def _volume_list(volumes: object) -> list:
    """``volumes`` as a list of single volumes: one array / tensor ``(X, Y, Z)`` or ``(C, X, Y, Z)``, a batch
    ``(N, C, X, Y, Z)``, or a sequence of volumes; a path is an error pointing to the CT task's file readers."""
    if isinstance(volumes, (str, os.PathLike)) or (
            isinstance(volumes, Sequence) and any(isinstance(v, (str, os.PathLike)) for v in volumes)):
        raise UserInputError("a model reads no files: read NIfTI / DICOM volumes with "
                             "bioattn.tasks.ct.volumes.predict_proba_files(model, paths) (or bioattn.data.ct.read_ct_volume "
                             "then model.predict_proba(volume))")
    if isinstance(volumes, (np.ndarray, Tensor)):
        return list(volumes) if volumes.ndim == 5 else [volumes]
    items = list(volumes) if isinstance(volumes, Sequence) else [volumes]
    if not items:
        raise UserInputError("no volumes given")
    return items


def predicted_index(probabilities: Sequence[float], threshold: float = 0.5) -> int:
    """Class 1 of a binary model when its probability is at least ``threshold`` (class 0 otherwise); the most
    probable class for more classes. The one rule ``predict ct``, ``explain ct`` and :meth:`CTClassifier.predict`
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
