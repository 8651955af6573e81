"""``explain_ct``: [CLS] attention rollout and attribution maps of a CT model on the input's voxel grid, from Python.

The pipeline of ``bioattn explain ct``: the input prepared as the run's ``preprocessing.json`` says (each override
replaces its step), the rollout and the chosen attribution mapped back through every spatial step onto the input
grid, per-layer head maps and diversity, head sharpness and every method's faithfulness. The result holds the maps
and summary; :meth:`~bioattn.explain.result.Explanation.save` writes the command's files. It reads a run's saved
preprocessing from the CT task (:mod:`bioattn.tasks.ct.predict`); :func:`bioattn.explain.explain_ct` re-exports it.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.errors import UserInputError
from bioattn.explain.result import (
    Explanation, check_out_dir, load_explained_model, resolve_method, saved_under, where,
)

#: Every CT method, from most to least faithful on the 98 AdrenalMNIST3D validation volumes (deletion AUC,
#: docs/results/motifs.md); ``--method auto`` measures those that fit its time budget on the volume and keeps the
#: most faithful, the one the faithfulness table stars.
FAITHFULNESS_ORDER = ("gradient_x_input", "integrated_gradients", "occlusion", "relevance", "rollout", "gradcam")
#: The preprocessing steps an override may replace (:class:`~bioattn.data.ct.VolumePreprocessing` fields).
PREPROCESSING_STEPS = ("window", "spacing", "orientation", "resize", "size")


@dataclasses.dataclass
class CTExplanation(Explanation):
    """``rollout (X, Y, Z)`` and ``attribution (X, Y, Z)`` (``None`` when the method is rollout) on the input's
    voxel grid with ``affine (4, 4)``; ``image (X, Y, Z)`` the input's first channel; ``probabilities`` per class;
    ``label`` (``.npz`` input only); ``method``; ``description`` of the input."""

    rollout: torch.Tensor = None
    attribution: torch.Tensor | None = None
    affine: np.ndarray = None
    image: torch.Tensor = None
    probabilities: list[float] = None
    label: int | None = None
    method: str = ""
    description: str = ""

    def _write_files(self, out: Path) -> None:
        from bioattn.data.ct import write_nifti

        write_nifti(out / "rollout.nii.gz", self.rollout, self.affine)
        if self.label is not None:
            write_nifti(out / "input.nii.gz", self.image, self.affine)
        if self.attribution is not None:
            write_nifti(out / "attribution.nii.gz", self.attribution, self.affine)


def describe(result: CTExplanation, out: Path | None = None) -> str:
    """What ``bioattn explain ct`` prints once ``result`` is saved in ``out`` (default: ``result.saved_to``): the
    input, its most probable class, where the rollout (and the attribution map) went and, when measured, the
    faithfulness table."""
    from bioattn.explain.outputs import faithfulness_table

    out = out if out is not None else result.saved_to
    names, p = list(result.summary["probabilities"]), result.probabilities
    best = max(range(len(p)), key=p.__getitem__)
    lines = [f"{result.description}: p({names[best]}) = {p[best]:.3f}; rollout -> {where(out, 'rollout.nii.gz')}"
             + (f", {result.method} -> {where(out, 'attribution.nii.gz')}" if result.method != "rollout" else "")]
    if "faithfulness" in result.summary:
        lines.append(faithfulness_table(result.summary["faithfulness"]))
    return "\n".join(lines)


def _read_input(inputs: Any, split: str, index: int):
    """``(MetaTensor (C, X, Y, Z), description, label or None)`` of a path or an in-memory ``(C, X, Y, Z)`` volume."""
    from monai.data import MetaTensor

    from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz, read_ct_volume

    if not isinstance(inputs, (str, os.PathLike)):
        volume = inputs if isinstance(inputs, MetaTensor) else MetaTensor(
            torch.as_tensor(np.asarray(inputs), dtype=torch.float32), affine=torch.eye(4, dtype=torch.float64))
        return volume, "in-memory volume", None
    if not Path(inputs).name.lower().endswith(".npz"):
        return read_ct_volume(inputs), str(inputs), None
    splits = load_medmnist3d_npz(inputs)
    if split not in splits:
        raise UserInputError(f"{inputs}: no split {split!r} (has {', '.join(splits)})")
    dataset = VolumeDataset(splits[split])
    if not 0 <= index < len(dataset):
        raise UserInputError(f"{inputs} [{split}]: --index {index} outside 0..{len(dataset) - 1}")
    image, label = dataset[index]
    return MetaTensor(image, affine=torch.eye(4, dtype=torch.float64)), f"{inputs} [{split}][{index}]", int(label)


def _split_faithfulness(model: torch.nn.Module, dataset: Any, indices: list[int], pipeline: Any, *, classes_of: Any,
                        head_fusion: str, start_layer: int, steps: int) -> dict:
    """Every CT method's faithfulness over the ``indices`` volumes of ``dataset`` (a ``VolumeDataset`` of one split of
    a ``.npz``): method → summary, with ``seconds_per_example`` and ``indices``."""
    from monai.data import MetaTensor

    from bioattn.explain.attribution import CT_METHODS
    from bioattn.explain.ct_attribution import volume_attribution, volume_score
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.progress import progress_bar

    device = next(model.parameters()).device
    identity = torch.eye(4, dtype=torch.float64)
    volumes = torch.stack([pipeline(MetaTensor(dataset[i][0], affine=identity)).as_tensor().float()
                           for i in indices]).to(device)
    classes = classes_of(model, volumes)
    scores = [volume_score(model, volume, int(c)) for volume, c in zip(volumes, classes)]
    bar = progress_bar(total=len(CT_METHODS) * len(indices), desc=f"faithfulness over {len(indices)} volumes",
                       unit="map")

    def attribute(name: str) -> list[torch.Tensor]:
        maps = []
        for k in range(len(volumes)):
            maps.append(volume_attribution(model, volumes[k : k + 1], name, classes=classes[k : k + 1],
                                           head_fusion=head_fusion, start_layer=start_layer, seed=k)[0].flatten().cpu())
            bar.update(1)
        return maps

    try:
        results = compare_methods(attribute, scores, CT_METHODS, steps=steps)
    finally:
        bar.close()
    for summary in results.values():
        summary["seconds_per_example"] = round(summary["seconds"] / len(indices), 4)
    results = {name: {**summary, "indices": indices} for name, summary in results.items()}
    return results


def peak_inside(image: torch.Tensor, values: torch.Tensor) -> tuple[int, ...]:
    """Voxel of the largest ``values (X, Y, Z)`` among the voxels of ``image (X, Y, Z)`` above its background (its
    minimum); the largest overall when the image is constant. A map that peaks in the background (GradCAM on a
    mask does) is then drawn through the object rather than through an empty corner."""
    values = torch.as_tensor(values).float()
    inside = torch.as_tensor(image) > torch.as_tensor(image).min()
    if inside.any():
        values = values.masked_fill(~inside, float("-inf"))
    return tuple(int(i) for i in np.unravel_index(int(torch.argmax(values)), tuple(values.shape)))


def parse_indices(spec: str | Sequence[int], count: int, source: str) -> list[int]:
    """Volume indices of a split of ``count`` volumes: ``"all"``, ``"A-B"`` (inclusive), ``"A,B,C"`` (or a mix,
    ``"0-9,20"``), or a sequence of ints; each must lie in ``0..count-1``. ``source`` names the input in errors."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return list(range(count))
        indices: list[int] = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            first, _, last = part.partition("-")
            try:
                low, high = int(first), int(last or first)
            except ValueError:
                raise UserInputError(f"{source}: --indices {spec!r}: expected all, A-B or A,B,C") from None
            if high < low:
                raise UserInputError(f"{source}: --indices {spec!r}: range {part} runs backwards")
            indices.extend(range(low, high + 1))
    else:
        indices = [int(i) for i in spec]
    if not indices:
        raise UserInputError(f"{source}: --indices {spec!r} names no volume")
    outside = [i for i in indices if not 0 <= i < count]
    if outside:
        raise UserInputError(f"{source}: --indices {outside[0]} outside 0..{count - 1}")
    return list(dict.fromkeys(indices))


def explain_ct(
    model: Any,
    inputs: str | os.PathLike | torch.Tensor | np.ndarray,
    *,
    method: str = "auto",
    head_fusion: str = "mean",
    start_layer: int = 0,
    split: str = "val",
    index: int = 0,
    preprocessing: Mapping[str, Any] | None = None,
    faithfulness: bool = True,
    faithfulness_steps: int = 20,
    faithfulness_indices: str | Sequence[int] | None = None,
    device: str = "auto",
    out: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> CTExplanation:
    """Explain a CT model's prediction for one volume, on the input's voxel grid.

    Args:
        model: a :class:`~bioattn.models.HybridCT3D` (or an ensemble), a run directory of ``bioattn train ct`` or a
            shipped model's name (a run's ``preprocessing.json`` is then applied to NIfTI/DICOM input).
        inputs: a NIfTI file, a DICOM file or series folder, a MedMNIST-style ``.npz`` (``split``, ``index`` pick the
            volume), or an in-memory channel-first volume ``(C, X, Y, Z)`` (a MONAI ``MetaTensor`` keeps its affine).
        preprocessing: overrides of the saved steps (:data:`PREPROCESSING_STEPS`, e.g. ``{"window": (-160, 240)}``);
            ``.npz`` volumes get only these.
        method, head_fusion, start_layer, faithfulness, faithfulness_steps: as :func:`explain_promoter`.
        faithfulness_indices: ``.npz`` input only: measure the faithfulness table over these volumes of ``split``
            (:func:`parse_indices`: ``"all"``, ``"0-19"``, ``[3, 5]``; mean ± sd over volumes) instead of the
            explained volume alone; the maps are still those of ``index``.
        out: a folder to write the result into, as ``bioattn explain ct`` does (checked before any work: a
            non-empty folder is refused unless ``overwrite``); ``None``: nothing is written (``.save`` later).

    Returns:
        a :class:`CTExplanation` (saved under ``out`` when given: ``.saved_to``); ``.save(directory)`` writes what
        ``bioattn explain ct`` writes.
    """
    check_out_dir(out, overwrite=overwrite)
    from bioattn.data.ct import check_volume, invert_to_input_grid, world_geometry
    from bioattn.explain.attribution import CT_METHODS
    from bioattn.explain.ct import explain_volumes
    from bioattn.explain.ct_attribution import predicted_volume_classes, volume_attribution, volume_score
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.outputs import layer_similarities, write_faithfulness, write_layer_figures
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary
    from bioattn.models.hybrid_ct import HybridCT3D
    from bioattn.models.ensemble import ensemble_members
    from bioattn.models.registry import resolve_model_dir
    from bioattn.tasks.ct.predict import SavedPreprocessing, resolve_preprocessing
    from bioattn.tasks.ct.preprocessing import distribution_warnings, volume_statistics

    overrides = dict(preprocessing or {})
    unknown = sorted(set(overrides) - set(PREPROCESSING_STEPS))
    if unknown:
        raise UserInputError(f"preprocessing: unknown step(s) {', '.join(unknown)} (known: {', '.join(PREPROCESSING_STEPS)})")
    saved = SavedPreprocessing.load(resolve_model_dir(model)) if isinstance(model, (str, os.PathLike)) else None
    model, label_text = load_explained_model(model, HybridCT3D, device)
    if not 0 <= start_layer < model.config["num_layers"]:
        raise UserInputError(f"--start-layer must be in [0, {model.config['num_layers'] - 1}], got {start_layer}")
    image, described, label = _read_input(inputs, split, index)
    check_volume(image, described, in_channels=model.in_channels)
    split_volumes = None
    if faithfulness_indices is not None and not faithfulness:
        raise UserInputError("--indices picks the volumes the faithfulness table is measured on; it cannot go with "
                             "--no-faithfulness")
    if faithfulness and faithfulness_indices is not None:  # checked before any map is computed
        if label is None:
            raise UserInputError(f"{described}: --indices needs MedMNIST .npz input (it picks volumes of --split)")
        from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz

        dataset = VolumeDataset(load_medmnist3d_npz(inputs)[split])
        split_volumes = (dataset, parse_indices(faithfulness_indices, len(dataset), f"{inputs} [{split}]"))
    # .npz volumes are MedMNIST volumes as stored: only the overrides given apply to them
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items() if v is not None}
    pipeline = resolve_preprocessing(saved if label is None else None, **given).pipeline(divisible_by=model.stride)
    model_input = pipeline(image)
    model.check_attention_size(tuple(model_input.shape[1:]), described)
    warnings = distribution_warnings(dict(saved.profile) if saved else {}, volume_statistics(model_input),
                                     world_geometry(image) if label is None else None)
    if warnings:
        print(f"warning: {described}: {'; '.join(warnings)}; the explanation may mean little", file=sys.stderr)

    volumes = model_input.as_tensor()[None].float()
    explanation = explain_volumes(ensemble_members(model)[0], volumes, head_fusion=head_fusion, start_layer=start_layer)
    if len(ensemble_members(model)) > 1:
        explanation.probabilities = model(volumes.to(next(model.parameters()).device)).float().softmax(-1).cpu()
        explanation.voxel_map = volume_attribution(model, volumes, "rollout", head_fusion=head_fusion,
                                                   start_layer=start_layer).cpu()

    def timed_gradient_pass() -> float:
        start = time.perf_counter()
        volume_attribution(model, volumes, "gradient_x_input")
        return time.perf_counter() - start

    classes = predicted_volume_classes(model, volumes.to(next(model.parameters()).device))

    def attribute(name: str) -> torch.Tensor:
        return volume_attribution(model, volumes, name, classes=classes, head_fusion=head_fusion,
                                  start_layer=start_layer).cpu()

    score = volume_score(model, volumes[0].to(next(model.parameters()).device), int(classes[0]))
    measured: dict = {}  # method="auto"'s measurements, reused by the faithfulness table (same volume, steps, seed)

    def measure(methods) -> dict:
        measured.update(compare_methods(lambda name: [attribute(name)[0].flatten()], [score], methods,
                                        steps=faithfulness_steps))
        return measured

    method = resolve_method(method, FAITHFULNESS_ORDER, timed_gradient_pass, measure,
                            faithfulness_steps=faithfulness_steps, sample="this volume")
    # Undo every spatial preprocessing step (padding, crop, resampling, orientation): back onto the input grid.
    voxel_map = invert_to_input_grid(pipeline, model_input, explanation.voxel_map)[0].as_tensor()
    affine = np.asarray(image.affine)
    probabilities = explanation.probabilities[0].tolist()
    predicted = int(np.argmax(probabilities))
    names = model.class_names
    attribution_map = None
    if method != "rollout":
        attribution_map = invert_to_input_grid(pipeline, model_input, attribute(method))[0].as_tensor()
    sharpness = head_sharpness(explanation.attentions)
    results = None
    if split_volumes is not None:
        results = _split_faithfulness(model, *split_volumes, pipeline, classes_of=predicted_volume_classes,
                                      head_fusion=head_fusion, start_layer=start_layer, steps=faithfulness_steps)
    elif faithfulness:
        results = compare_methods(lambda name: [attribute(name)[0].flatten()], [score], CT_METHODS, steps=faithfulness_steps,
                                  known=measured)
    layer_maps = [w[0] for w in explanation.attentions]
    shown = image[0].as_tensor()

    def draw(out: Path) -> None:
        from bioattn.explain.faithfulness_figures import plot_head_sharpness
        from bioattn.explain.figures import plot_orthogonal_slices

        plot_orthogonal_slices(shown, voxel_map, out / "rollout_slices.png",
                               title=f"[CLS] rollout, p({names[predicted]}) = {probabilities[predicted]:.3f}"
                                     + (f", label {names[label]}" if label is not None else ""))
        if attribution_map is not None:
            plot_orthogonal_slices(shown, attribution_map, out / "attribution_slices.png",
                                   center=peak_inside(shown, attribution_map),
                                   title=f"{method}, p({names[predicted]}) = {probabilities[predicted]:.3f}")
        plot_head_sharpness(sharpness, out / "head_sharpness.png", title="CT attention: per-head sharpness")
        if results is not None:
            write_faithfulness(results, out, unit="voxels", title=f"{described}: faithfulness (voxels → background)")
        write_layer_figures(layer_maps, out, what="CT attention (token 0 = [CLS], then the CNN grid in raster order)")

    grid = explanation.grid_map[0]
    peak = np.unravel_index(int(torch.argmax(voxel_map)), tuple(voxel_map.shape))
    summary = {
        "run": label_text, "input": described, "input_shape": list(image.shape[1:]),
        "model_input_shape": list(model_input.shape[1:]), "token_grid": list(grid.shape),
        "probabilities": dict(zip(names, probabilities)), "predicted": names[predicted],
        "label": names[label] if label is not None else None,
        "head_fusion": head_fusion, "start_layer": start_layer, "warnings": warnings,
        "cls_self_share": float(1 - grid.sum()), "peak_voxel": [int(i) for i in peak],
        "head_similarity": layer_similarities(layer_maps), "method": method,
        "head_sharpness": sharpness_summary(sharpness),
        **({"faithfulness": results} if results is not None else {}),
    }
    return saved_under(CTExplanation(summary=summary, tables={}, figures=[draw], rollout=voxel_map,
                                     attribution=attribution_map, affine=affine, image=image[0],
                                     probabilities=probabilities, label=label, method=method, description=described),
                       out, overwrite)
