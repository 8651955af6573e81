""":class:`CTClassifier`: prediction of in-memory volumes with a run's saved settings, and its helpers."""
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

__all__ = ["CTClassifier", "flip_axis_sets", "in_memory_volume", "predict_probabilities", "predicted_index"]


def in_memory_volume(array: np.ndarray | Tensor, source: str, *, spacing: Sequence[float] | None = None,
                     needs_spacing: bool = False) -> MetaTensor:
    """``(X, Y, Z)`` or ``(C, X, Y, Z)`` → a channel-first float32 ``MetaTensor`` of ``spacing`` mm voxels."""
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
    """A saved 3D volume classifier with its run's inference settings (see :meth:`init_run_settings`)."""

    def init_run_settings(self) -> None:
        self.input_preprocessing, self.flip_tta, self.threshold = VolumePreprocessing(), False, 0.5

    def check_attention_size(self, spatial_shape: Sequence[int], source: str) -> None:
        """Refuse inputs too large for the model (nothing to check without attention maps)."""

    @classmethod
    def from_pretrained(cls, run_dir: str | os.PathLike, map_location: str | torch.device = "cpu") -> CTClassifier | Ensemble:
        """:meth:`PretrainedModel.from_pretrained`, keeping the run's ``preprocessing.json`` settings."""
        model = super().from_pretrained(run_dir, map_location=map_location)
        cls.attach_run_settings(model, resolve_model_dir(run_dir))
        return model

    @staticmethod
    def attach_run_settings(model: nn.Module, model_dir: Path) -> None:
        """Give ``model`` (or an ensemble's members) the settings of ``model_dir``'s ``preprocessing.json``, if any."""
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
        """Class probabilities ``(N, K)`` float32 of in-memory volumes, as ``bioattn predict ct`` computes them.

        ``volumes``: ``(X, Y, Z)``, ``(C, X, Y, Z)`` (RAS+) or ``(N, C, X, Y, Z)``, or a sequence of volumes of
        ``spacing`` mm voxels; ``sources``: a name per volume for errors.
        """
        items = _volume_list(volumes)
        names = list(sources) if sources is not None else [f"volume {number}" for number in range(len(items))]
        if len(names) != len(items):
            raise ValueError(f"{len(names)} sources for {len(items)} volumes")
        steps = preprocessing or self.input_preprocessing
        pipeline, rows = steps.pipeline(divisible_by=self.stride), []
        flips = self.flip_tta if flip_tta is None else flip_tta
        for source, item in zip(names, items):
            volume = in_memory_volume(item, source, spacing=spacing, needs_spacing=steps.spacing is not None)
            check_volume(volume, source, in_channels=self.in_channels)
            image = pipeline(volume).as_tensor().float()
            self.check_attention_size(tuple(image.shape[1:]), source)
            rows.append(predict_probabilities(self, [(image, 0)], batch_size=1, flip_tta=flips)[0])
        return np.stack(rows)

    def predict(self, volumes: np.ndarray | Tensor | Sequence[np.ndarray | Tensor], **options) -> np.ndarray:
        """Class labels ``(N,)`` from :meth:`predict_proba` (``options``) at the run's ``threshold``."""
        probabilities = self.predict_proba(volumes, **options)
        return np.asarray([self.class_names[predicted_index(row, self.threshold)] for row in probabilities])


def _volume_list(volumes: object) -> list:
    """``volumes`` (one volume, a batch ``(N, C, X, Y, Z)`` or a sequence) as a list of single volumes."""
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
    """Class 1 of a binary model when its probability is at least ``threshold``, else the most probable class."""
    values = [float(v) for v in probabilities]
    return int(values[1] >= threshold) if len(values) == 2 else int(np.argmax(values))


def flip_axis_sets(spatial_dims: int = 3) -> list[tuple[int, ...]]:
    """Every subset of the spatial axes (dims ``2 .. 1 + spatial_dims``) of a batch, for :meth:`torch.Tensor.flip`."""
    axes = range(2, 2 + spatial_dims)
    return [tuple(axis for bit, axis in enumerate(axes) if mask >> bit & 1) for mask in range(2**spatial_dims)]


@torch.no_grad()
def predict_probabilities(model: nn.Module, dataset: Dataset, *, batch_size: int = 32,
                          flip_tta: bool = False) -> np.ndarray:
    """Class probabilities ``(N, num_classes)`` over ``(image, label)`` items; ``flip_tta``: mean over the 8 flips."""
    was_training, device = model.training, next(model.parameters()).device
    model.eval()
    flips, chunks = flip_axis_sets() if flip_tta else [()], []
    for images, _ in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        images = images.to(device)
        if flip_tta and images.dim() != 5:
            raise UserInputError("flip test-time augmentation needs volumes (B, C, D, H, W), got shape "
                                 f"{tuple(images.shape)}")
        probs = [model(images.flip(axes) if axes else images).float().softmax(dim=-1) for axes in flips]
        chunks.append(torch.stack(probs).mean(dim=0).cpu())
    model.train(was_training)
    return torch.cat(chunks).numpy()
