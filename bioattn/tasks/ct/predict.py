"""Class probabilities of a trained CT model for a MedMNIST ``.npz``, a manifest of scans, or one NIfTI/DICOM."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import torch
from monai.data import MetaTensor
from monai.transforms import Compose, DivisiblePad

from bioattn.data.ct import (
    VolumeDataset, VolumePreprocessing, check_volume, invert_to_input_grid, load_medmnist3d_npz, read_ct_volume,
    world_geometry,
)
from bioattn.data.ct_manifest import ManifestVolumes, read_manifest
from bioattn.errors import UserInputError
from bioattn.io import table_writer
from bioattn.metrics import classification_metrics
from bioattn.models.ensemble import average_over_members, ensemble_members
from bioattn.models.ct_classifier import CTClassifier, predict_probabilities
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.registry import load_pretrained, resolve_model_dir
from bioattn.tasks.ct.preprocessing import SavedPreprocessing, distribution_warnings, predicted_index, volume_statistics
from bioattn.progress import progress_bar

__all__ = [
    "CTPrediction", "load_run", "resolve_preprocessing", "resolve_flip_tta", "prepare_volume", "predict_npz",
    "predict_manifest", "predict_volume", "write_predictions", "report_warnings", "summarize_predictions",
]

MAX_WARNING_LINES = 20


@dataclass
class CTPrediction:
    """One scored volume: the file, probabilities ``(K,)``, label, split, index (``.npz``), warnings, manifest line."""
    source: str
    probabilities: np.ndarray
    label: str | int | None = None
    split: str = ""
    index: int | None = None
    warnings: list[str] = field(default_factory=list)
    where: str = ""

    def describe(self) -> str:
        """The input: ``"labels.csv, line 3: scan.nii.gz"``, ``"x.npz [val 4]"`` or the file."""
        if self.where:
            return f"{self.where}: {self.source}"
        return self.source + (f" [{self.split} {self.index}]" if self.index is not None else "")


def load_run(run_dir: str | os.PathLike,
             map_location: str | torch.device = "cpu") -> tuple[HybridCT3D, SavedPreprocessing | None]:
    """The run's (or a shipped model's) model and its saved preprocessing (``None`` for older runs)."""
    run_dir = resolve_model_dir(run_dir)
    model = load_pretrained(run_dir, map_location=map_location, expect=CTClassifier)
    return model, SavedPreprocessing.load(run_dir)  # type: ignore[return-value]


def resolve_preprocessing(saved: SavedPreprocessing | None, *, size: Sequence[int] | None = None,
                          fit: str | None = None, resize: Sequence[int] | None = None,
                          **overrides: Any) -> VolumePreprocessing:
    """The saved NIfTI/DICOM preprocessing with every override that is not ``None`` replacing its step."""
    from bioattn.tasks.ct.preprocessing import FITS
    base = saved.preprocessing if saved is not None else VolumePreprocessing()
    base = dataclasses.replace(base, **{name: value for name, value in overrides.items() if value is not None})
    if size is not None or fit is not None:
        if fit is not None and fit not in FITS:
            raise UserInputError(f"fit must be one of {', '.join(FITS)}, got {fit!r}")
        fit = fit or ("crop-pad" if base.resize is None and base.size is not None else "resize")
        if size is not None:
            size = tuple(int(v) for v in size)
            if len(size) not in (1, 3) or min(size) < 1:
                raise UserInputError(f"--size needs 1 or 3 positive sizes (X Y Z), got {' '.join(map(str, size))}")
            target = size * 3 if len(size) == 1 else size
        else:
            target = base.resize if base.resize is not None else base.size
            if target is None:
                raise UserInputError("--fit needs --size: the run saved no input size")
        base = dataclasses.replace(base, resize=target if fit == "resize" else None,
                                   size=target if fit == "crop-pad" else None)
    if resize is not None:
        base = dataclasses.replace(base, resize=tuple(resize))
    return base


def resolve_flip_tta(saved: SavedPreprocessing | None, flip_tta: bool | None) -> bool:
    """``flip_tta`` when given, else how the run evaluated (off for runs without ``preprocessing.json``)."""
    return flip_tta if flip_tta is not None else bool(saved is not None and saved.flip_tta)


def _profile(saved: SavedPreprocessing | None) -> dict[str, Any]:
    return dict(saved.profile) if saved is not None else {}


def prepare_volume(model: HybridCT3D, path: str | os.PathLike, preprocessing: VolumePreprocessing,
                   saved: SavedPreprocessing | None) -> tuple[MetaTensor, MetaTensor, Compose, list[str]]:
    """``(volume as read, model input, the invertible pipeline, warnings)`` of one NIfTI/DICOM volume."""
    volume = read_ct_volume(path)
    check_volume(volume, path, in_channels=model.in_channels)
    pipeline = preprocessing.pipeline(divisible_by=model.stride)
    image = pipeline(volume)
    warnings = distribution_warnings(_profile(saved), volume_statistics(image), world_geometry(volume))
    return volume, image, pipeline, warnings


def predict_npz(model: HybridCT3D, path: str | os.PathLike, saved: SavedPreprocessing | None, *,
                split: str | None = None, batch_size: int = 32, flip_tta: bool = False) -> list[CTPrediction]:
    """Every volume of every split of a MedMNIST-style ``.npz`` (or of ``split``), zero-padded to the stride."""
    splits = load_medmnist3d_npz(path)
    if split is not None:
        if split not in splits:
            raise UserInputError(f"{path}: has no {split} split (has {', '.join(splits)})")
        splits = {split: splits[split]}
    predictions = []
    for name, volumes in splits.items():
        if volumes.num_channels != model.in_channels:
            raise UserInputError(f"{path} [{name}_images]: volumes have {volumes.num_channels} channel(s), "
                                 f"the model expects {model.in_channels}")
        dataset = VolumeDataset(volumes, DivisiblePad(k=model.stride))
        probs = predict_probabilities(model, dataset, batch_size=batch_size, flip_tta=flip_tta)
        for index, (label, p) in enumerate(zip(volumes.labels, probs)):
            warnings = distribution_warnings(_profile(saved), volume_statistics(dataset[index][0]))
            predictions.append(CTPrediction(str(path), p, int(label), name, index, warnings))
    return predictions


class _ManifestRecords(torch.utils.data.Dataset):
    """``(row index, record)`` of the manifest rows ``indices`` (read and preprocessed in DataLoader workers)."""

    def __init__(self, volumes: ManifestVolumes, indices: list[int]) -> None:
        self.volumes, self.indices = volumes, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int) -> tuple[int, dict[str, Any]]:
        return self.indices[k], self.volumes.record(self.indices[k])


def _as_is(item: Any) -> Any:
    return item


def _same_shape_batches(records: Iterable[tuple[int, dict[str, Any]]], total: int,
                        batch_size: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """Consecutive ``(index, record)`` of equal image shape, at most ``batch_size`` at a time."""
    batch: list[tuple[int, dict[str, Any]]] = []
    for index, record in progress_bar(records, total=total, desc="scoring", unit="scan", leave=False):
        if batch and (len(batch) == batch_size or batch[0][1]["image"].shape != record["image"].shape):
            yield batch
            batch = []
        batch.append((index, record))
    if batch:
        yield batch


def predict_manifest(model: HybridCT3D, path: str | os.PathLike, preprocessing: VolumePreprocessing,
                     saved: SavedPreprocessing | None, *, split: str | None = None, batch_size: int = 32,
                     flip_tta: bool = False, workers: int = 0) -> list[CTPrediction]:
    """Every scan of a manifest (or of ``split``), in file order; under ``torchrun`` the first process returns all."""
    from bioattn import distributed
    if workers < 0:
        raise UserInputError(f"the number of DataLoader workers must be >= 0, got {workers}")
    manifest = read_manifest(path, require_labels=False)
    rows = list(manifest.rows)
    if split is not None:
        if not manifest.has_split:
            raise UserInputError(f"{path}: --split {split} needs a split column")
        rows = [row for row in rows if row.split == split]
        if not rows:
            raise UserInputError(f"{path}: no rows of split {split!r}")
    volumes = ManifestVolumes(manifest, rows, preprocessing, class_index={}, divisible_by=model.stride, cache=False)
    distributed.init_distributed()
    ranks, rank = distributed.world_size(), distributed.rank()
    share = [int(i) for i in np.array_split(np.arange(len(rows)), ranks)[rank]]
    loader = torch.utils.data.DataLoader(_ManifestRecords(volumes, share), batch_size=None, shuffle=False,
                                         num_workers=workers, collate_fn=_as_is)
    predictions, error = [], None
    try:
        for batch in _same_shape_batches(loader, len(share), batch_size):
            images = [(record["image"].as_tensor().float(), 0) for _, record in batch]
            for (_, record), (image, _) in zip(batch, images):
                check_volume(image, f"{record['where']}: {record['path']}", in_channels=model.in_channels)
            probabilities = predict_probabilities(model, images, batch_size=len(images), flip_tta=flip_tta)
            for (index, record), (image, _), p in zip(batch, images, probabilities):
                row = rows[index]
                warnings = distribution_warnings(_profile(saved), volume_statistics(image), record["geometry"])
                predictions.append(CTPrediction(str(row.image), p, row.label, row.split or "", warnings=warnings,
                                                where=record["where"]))
    except UserInputError as exc:
        if ranks == 1:
            raise
        error = str(exc)
    if ranks == 1:
        return predictions
    errors = distributed.gather_bytes(json.dumps(error).encode())
    first = distributed.broadcast_json(next((m for m in map(json.loads, errors) if m), None) if errors else None)
    if first is not None:
        raise UserInputError(first)
    payload = json.dumps([{**dataclasses.asdict(p), "probabilities": [float(v) for v in p.probabilities]}
                          for p in predictions]).encode()
    gathered = distributed.gather_bytes(payload)
    if gathered is None:
        return []
    merged = [item for part in gathered for item in json.loads(part.decode())]
    return [CTPrediction(**{**item, "probabilities": np.asarray(item["probabilities"])}) for item in merged]


def predict_volume(model: HybridCT3D, path: str | os.PathLike, preprocessing: VolumePreprocessing,
                   saved: SavedPreprocessing | None, *, flip_tta: bool = False, attention_map: bool = False,
                   head_fusion: str = "mean") -> tuple[CTPrediction, tuple[torch.Tensor, torch.Tensor, dict] | None]:
    """One NIfTI/DICOM volume → its prediction and, with ``attention_map``, :func:`~bioattn.data.ct.write_nifti`'s
    arguments for the rollout on the input grid."""
    volume, image, pipeline, warnings = prepare_volume(model, path, preprocessing, saved)
    batch, overlay = image.as_tensor()[None].float(), None
    if attention_map and not all(isinstance(m, HybridCT3D) for m in ensemble_members(model)):
        raise UserInputError(f"{path}: an attention map needs the attention model; {type(model).__name__} has no "
                             "attention (explain ct gives its attribution maps)")
    if attention_map:
        voxel_map = average_over_members(model, lambda member: member.attention_map(batch, head_fusion=head_fusion)[1])
        restored = invert_to_input_grid(pipeline, image, voxel_map)[0].as_tensor()
        overlay = (restored / restored.max().clamp_min(torch.finfo(restored.dtype).tiny), volume.affine, volume.meta)
    probs = predict_probabilities(model, [(batch[0], 0)], batch_size=1, flip_tta=flip_tta)[0]
    return CTPrediction(str(path), probs, warnings=warnings), overlay


def write_predictions(path: str | os.PathLike, predictions: Sequence[CTPrediction], class_names: Sequence[str], *,
                      threshold: float = 0.5) -> None:
    """The predictions as CSV/TSV: ``image,label,split,index,p_<class>...,predicted_label,warning``."""
    header = [*FIRST_COLUMNS, *(f"p_{name}" for name in class_names), "predicted_label", "warning"]
    with table_writer(path, header) as write_row:
        for p in predictions:
            write_row([p.source, p.label, p.split, p.index, *map(float, p.probabilities),
                       class_names[predicted_index(p.probabilities, threshold)], "; ".join(p.warnings)])


FIRST_COLUMNS = ["image", "label", "split", "index"]


def report_warnings(predictions: Sequence[CTPrediction]) -> int:
    """One ``warning:`` line on stderr per input with warnings (the first 20, then a count); returns how many."""
    flagged = [p for p in predictions if p.warnings]
    for p in flagged[:MAX_WARNING_LINES]:
        print(f"warning: {p.describe()}: {'; '.join(p.warnings)}; its probabilities may mean little", file=sys.stderr)
    if len(flagged) > MAX_WARNING_LINES:
        print(f"warning: {len(flagged) - MAX_WARNING_LINES} more inputs differ from the training volumes "
              "(see the warning column)", file=sys.stderr)
    return len(flagged)


def summarize_predictions(predictions: Sequence[CTPrediction], class_names: Sequence[str],
                          threshold: float = 0.5) -> dict[str, dict[str, float]]:
    """``{split or "all": classification metrics + "volumes"}`` of the labelled predictions (2 classes or more)."""
    index = {name: i for i, name in enumerate(class_names)}
    groups: dict[str, tuple[list[int], list[np.ndarray]]] = {}
    for p in predictions:
        label = p.label if isinstance(p.label, int) else index.get(p.label) if p.label is not None else None
        if label is None or not 0 <= label < len(class_names):
            continue
        labels, probs = groups.setdefault(p.split or "all", ([], []))
        labels.append(label)
        probs.append(p.probabilities)
    def scored(probs: np.ndarray) -> np.ndarray:
        return probs[:, 1] if probs.shape[1] == 2 else probs

    return {split: {**classification_metrics(np.array(labels), scored(np.stack(probs)), threshold=threshold),
                    "volumes": len(labels)}
            for split, (labels, probs) in groups.items() if len(set(labels)) > 1}
