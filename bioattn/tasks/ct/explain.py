""":func:`explain_ct`: rollout and attribution maps of a CT model on the input grid (``bioattn explain ct``)."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.errors import UserInputError
from bioattn.explain.result import (Explanation, check_out_dir, load_explained_model, saved_under, where)

#: CT methods from most to least faithful on AdrenalMNIST3D validation volumes.
FAITHFULNESS_ORDER = ("gradient_x_input", "integrated_gradients", "occlusion", "relevance", "rollout", "gradcam")
#: The preprocessing steps an override may replace (:class:`~bioattn.data.ct.VolumePreprocessing` fields).
PREPROCESSING_STEPS = ("window", "spacing", "orientation", "resize", "size")


@dataclasses.dataclass
class CTExplanation(Explanation):
    """``rollout``, ``attribution`` and ``image`` (the first channel) ``(X, Y, Z)`` on the input grid."""
    rollout: torch.Tensor = None
    attribution: torch.Tensor | None = None
    affine: np.ndarray = None
    image: torch.Tensor = None
    probabilities: list[float] = None
    label: int | None = None
    method: str = ""
    description: str = ""
    input_meta: dict | None = None

    def _write_files(self, out: Path) -> None:
        from bioattn.data.ct import write_nifti
        if self.rollout is not None:
            write_nifti(out / "rollout.nii.gz", self.rollout, self.affine, self.input_meta)
        if self.label is not None:
            write_nifti(out / "input.nii.gz", self.image, self.affine, self.input_meta)
        if self.attribution is not None:
            write_nifti(out / "attribution.nii.gz", self.attribution, self.affine, self.input_meta)


def describe(result: CTExplanation, out: Path | None = None) -> str:
    """What ``bioattn explain ct`` prints once ``result`` is saved in ``out`` (default: ``result.saved_to``)."""
    from bioattn.explain.outputs import faithfulness_table
    out = out if out is not None else result.saved_to
    names, p = list(result.summary["probabilities"]), result.probabilities
    best = names.index(result.summary["predicted"])
    flips = " (mean over the 8 flips, as predict ct)" if result.summary.get("flip_tta") else ""
    cut = result.summary.get("threshold", 0.5)
    rule = f", threshold {cut:.4g} on p({names[1]})" if len(names) == 2 and cut != 0.5 else ""
    maps = ([f"rollout -> {where(out, 'rollout.nii.gz')}"] if result.rollout is not None else []) + (
        [f"{result.method} -> {where(out, 'attribution.nii.gz')}"] if result.method != "rollout" else [])
    lines = [f"{result.description}: p({names[best]}) = {p[best]:.3f}{flips}, predicted: {names[best]}{rule}; "
             + ", ".join(maps)]
    if "faithfulness_plan" in result.summary:
        from bioattn.tasks.ct.explain_plan import FaithfulnessPlan
        lines.append(FaithfulnessPlan(**result.summary["faithfulness_plan"]).describe())
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
    """Every CT method's faithfulness over the ``indices`` volumes of ``dataset``: method → summary."""
    from monai.data import MetaTensor
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.progress import progress_bar
    from bioattn.tasks.ct.attribution import volume_attribution, volume_score
    from bioattn.tasks.ct.methods import CT_METHODS
    device, identity = next(model.parameters()).device, torch.eye(4, dtype=torch.float64)
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
    return {name: {**summary, "indices": indices} for name, summary in results.items()}


def peak_inside(image: torch.Tensor, values: torch.Tensor) -> tuple[int, ...]:
    """Voxel of the largest ``values (X, Y, Z)`` where ``image (X, Y, Z)`` is above its minimum."""
    values, inside = torch.as_tensor(values).float(), torch.as_tensor(image) > torch.as_tensor(image).min()
    if inside.any():
        values = values.masked_fill(~inside, float("-inf"))
    return tuple(int(i) for i in np.unravel_index(int(torch.argmax(values)), tuple(values.shape)))


def parse_indices(spec: str | Sequence[int], count: int, source: str) -> list[int]:
    """Indices in ``0..count-1`` from ``"all"``, ``"A-B"`` (inclusive), ``"A,B,C"``, a mix, or a sequence of ints."""
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
    if outside := [i for i in indices if not 0 <= i < count]:
        raise UserInputError(f"{source}: --indices {outside[0]} outside 0..{count - 1}")
    return list(dict.fromkeys(indices))


def explain_ct(
    model: Any, inputs: str | os.PathLike | torch.Tensor | np.ndarray, *, method: str = "auto",
    head_fusion: str = "mean", start_layer: int = 0, split: str = "val", index: int = 0,
    preprocessing: Mapping[str, Any] | None = None, faithfulness: bool = True, faithfulness_steps: int | None = None,
    faithfulness_indices: str | Sequence[int] | None = None, faithfulness_methods: str | Sequence[str] = "default",
    flip_tta: bool | None = None, device: str = "auto", out: str | os.PathLike | None = None, overwrite: bool = False,
) -> CTExplanation:
    """Explain a CT model's (a run directory's, a shipped model's) prediction for one volume on its voxel grid.

    ``inputs``: a NIfTI file, DICOM file or series folder, ``.npz`` (``split``, ``index``) or ``(C, X, Y, Z)`` volume;
    ``preprocessing``: overrides of :data:`PREPROCESSING_STEPS`; ``method``: ``"auto"`` or one of
    :data:`~bioattn.tasks.ct.methods.CT_METHODS`; ``faithfulness_*``: see
    :func:`~bioattn.tasks.ct.explain_plan.plan_faithfulness`; ``out``: a folder to save the result into.
    """
    check_out_dir(out, overwrite=overwrite)
    from bioattn.data.ct import VolumePreprocessing, check_volume, invert_to_input_grid, world_geometry
    from bioattn.explain.faithfulness import compare_methods, most_faithful
    from bioattn.explain.outputs import layer_similarities, write_faithfulness, write_layer_figures
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary
    from bioattn.models.ct_classifier import CTClassifier, predicted_index
    from bioattn.models.hybrid_ct import HybridCT3D
    from bioattn.models.ensemble import ensemble_members
    from bioattn.models.registry import resolve_model_dir
    from bioattn.progress import progress_bar
    from bioattn.tasks.ct.attribution import predicted_volume_classes, volume_attribution, volume_score
    from bioattn.tasks.ct.explain_plan import AUTO_CANDIDATES, MAX_STEPS, counting, flip_probabilities, plan_faithfulness
    from bioattn.tasks.ct.methods import CT_METHODS
    from bioattn.tasks.ct.predict import SavedPreprocessing, resolve_flip_tta, resolve_preprocessing
    from bioattn.tasks.ct.preprocessing import distribution_warnings, volume_statistics
    from bioattn.tasks.ct.rollout import explain_volumes
    overrides = dict(preprocessing or {})
    if unknown := sorted(set(overrides) - set(PREPROCESSING_STEPS)):
        raise UserInputError(f"preprocessing: unknown step(s) {', '.join(unknown)} (known: {', '.join(PREPROCESSING_STEPS)})")
    saved = SavedPreprocessing.load(resolve_model_dir(model)) if isinstance(model, (str, os.PathLike)) else None
    model, label_text = load_explained_model(model, CTClassifier, device)
    if method != "auto" and method not in CT_METHODS:
        raise UserInputError(f"method must be auto or one of {', '.join(CT_METHODS)}, got {method!r}")
    first = ensemble_members(model)[0]
    if saved is None and getattr(first, "input_preprocessing", None) not in (None, VolumePreprocessing()):
        saved = SavedPreprocessing(source="manifest", preprocessing=first.input_preprocessing,
                                   flip_tta=bool(getattr(first, "flip_tta", False)),
                                   threshold=float(getattr(first, "threshold", 0.5)))
    attention = all(isinstance(m, HybridCT3D) for m in ensemble_members(model))
    if not attention and method in ("rollout", "relevance"):
        raise UserInputError(f"--method {method} needs the attention model; {type(first).__name__} has no attention "
                             "(gradient_x_input, integrated_gradients, gradcam or occlusion work)")
    if attention and not 0 <= start_layer < model.config["num_layers"]:
        raise UserInputError(f"--start-layer must be in [0, {model.config['num_layers'] - 1}], got {start_layer}")
    image, described, label = _read_input(inputs, split, index)
    check_volume(image, described, in_channels=model.in_channels)
    split_volumes = None
    if faithfulness_indices is not None and not faithfulness:
        raise UserInputError("--indices picks the volumes the faithfulness table is measured on; it cannot go with "
                             "--no-faithfulness")
    if faithfulness and faithfulness_indices is not None:
        if label is None:
            raise UserInputError(f"{described}: --indices needs MedMNIST .npz input (it picks volumes of --split)")
        from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz
        dataset = VolumeDataset(load_medmnist3d_npz(inputs)[split])
        split_volumes = (dataset, parse_indices(faithfulness_indices, len(dataset), f"{inputs} [{split}]"))
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items() if v is not None}
    pipeline = resolve_preprocessing(saved if label is None else None, **given).pipeline(divisible_by=model.stride)
    model_input = pipeline(image)
    model.check_attention_size(tuple(model_input.shape[1:]), described)
    warnings = distribution_warnings(dict(saved.profile) if saved else {}, volume_statistics(model_input),
                                     world_geometry(image) if label is None else None)
    if warnings:
        print(f"warning: {described}: {'; '.join(warnings)}; the explanation may mean little", file=sys.stderr)
    device, members = next(model.parameters()).device, ensemble_members(model)
    volumes = model_input.as_tensor()[None].float().to(device)
    flip = flip_tta if flip_tta is not None else resolve_flip_tta(saved, None) if saved is not None else bool(
        getattr(members[0], "flip_tta", False))
    probabilities_t, seconds_per_pass = flip_probabilities(model, volumes, flip)
    threshold = saved.threshold if saved is not None else float(getattr(first, "threshold", 0.5))
    classes = torch.tensor([predicted_index(probabilities_t[0].tolist(), threshold)], device=device)
    requested = method
    computed = [m for m in dict.fromkeys(AUTO_CANDIDATES if method == "auto" else ("rollout", method))
                if attention or m not in ("rollout", "relevance")]
    bar = progress_bar(total=len(computed), desc="explain ct: maps", unit="map")
    maps: dict[str, torch.Tensor] = {}

    def attribute(name: str) -> torch.Tensor:
        if name not in maps:
            maps[name] = volume_attribution(model, volumes, name, classes=classes, head_fusion=head_fusion,
                                            start_layer=start_layer).cpu()
        return maps[name]

    try:
        explanation = explain_volumes(members[0], volumes, head_fusion=head_fusion, start_layer=start_layer,
                                      predict=False) if attention else None
        if explanation is not None and len(members) > 1:
            explanation.voxel_map = volume_attribution(model, volumes, "rollout", head_fusion=head_fusion,
                                                       start_layer=start_layer).cpu()
        if explanation is not None:
            maps["rollout"] = explanation.voxel_map
            bar.update(1)
        for name in computed:
            if name not in maps:
                attribute(name)
                bar.update(1)
    finally:
        bar.close()

    score, results = volume_score(model, volumes[0], int(classes[0])), None
    plan = plan_faithfulness(faithfulness_methods, computed, steps=faithfulness_steps,
                             seconds_per_pass=seconds_per_pass) if faithfulness and split_volumes is None else None
    if plan is not None:
        print(f"explain: {plan.describe()}", file=sys.stderr)
    if plan is not None and plan.measured:
        passes = progress_bar(total=plan.passes(), desc="explain ct: faithfulness", unit="pass")
        try:
            results = compare_methods(lambda name: [attribute(name)[0].flatten()], [counting(score, passes)],
                                      plan.methods, steps=plan.steps)
        finally:
            passes.close()
    if method == "auto":
        measured = [m for m in computed if results is not None and m in results]
        method = most_faithful({m: results[m] for m in measured}) if measured else computed[0]
        print(f"explain: method {method} ("
              + (f"the more faithful on this volume of {', '.join(computed)}" if measured else
                 "the most faithful cheap method on AdrenalMNIST3D; faithfulness not measured here")
              + "; --method to choose; integrated_gradients and occlusion only on request)", file=sys.stderr)
    voxel_map = invert_to_input_grid(pipeline, model_input, maps["rollout"])[0].as_tensor() if attention else None
    affine, probabilities = np.asarray(image.affine), probabilities_t[0].tolist()
    predicted, names, attribution_map = int(classes[0]), model.class_names, None
    if method != "rollout":
        attribution_map = invert_to_input_grid(pipeline, model_input, attribute(method))[0].as_tensor()
    sharpness = head_sharpness(explanation.attentions) if attention else None
    if split_volumes is not None:
        results = _split_faithfulness(model, *split_volumes, pipeline, classes_of=predicted_volume_classes,
                                      head_fusion=head_fusion, start_layer=start_layer,
                                      steps=faithfulness_steps or MAX_STEPS)
    layer_maps, shown = [w[0] for w in explanation.attentions] if attention else [], image[0].as_tensor()

    def draw(out: Path) -> None:
        from bioattn.explain.faithfulness_figures import plot_head_sharpness
        from bioattn.explain.figures import plot_orthogonal_slices
        if voxel_map is not None:
            plot_orthogonal_slices(shown, voxel_map, out / "rollout_slices.png",
                                   title=f"[CLS] rollout, p({names[predicted]}) = {probabilities[predicted]:.3f}"
                                         + (f", label {names[label]}" if label is not None else ""))
        if attribution_map is not None:
            plot_orthogonal_slices(shown, attribution_map, out / "attribution_slices.png",
                                   center=peak_inside(shown, attribution_map),
                                   title=f"{method}, p({names[predicted]}) = {probabilities[predicted]:.3f}")
        if sharpness is not None:
            plot_head_sharpness(sharpness, out / "head_sharpness.png", title="CT attention: per-head sharpness")
        if results is not None:
            write_faithfulness(results, out, unit="voxels", title=f"{described}: faithfulness (voxels → background)")
        if layer_maps:
            write_layer_figures(layer_maps, out, what="CT attention (token 0 = [CLS], then the CNN grid in raster order)")

    grid = explanation.grid_map[0] if explanation is not None else None
    shown_map = voxel_map if voxel_map is not None else attribution_map
    peak = np.unravel_index(int(torch.argmax(shown_map)), tuple(shown_map.shape))
    summary = {
        "run": label_text, "input": described, "input_shape": list(image.shape[1:]),
        "model_input_shape": list(model_input.shape[1:]), "token_grid": list(grid.shape) if grid is not None else None,
        "probabilities": dict(zip(names, probabilities)), "predicted": names[predicted],
        "label": names[label] if label is not None else None,
        "head_fusion": head_fusion, "start_layer": start_layer, "warnings": warnings,
        "cls_self_share": float(1 - grid.sum()) if grid is not None else None, "peak_voxel": [int(i) for i in peak],
        "head_similarity": layer_similarities(layer_maps) if layer_maps else None, "method": method,
        "head_sharpness": sharpness_summary(sharpness) if sharpness is not None else None, "flip_tta": flip, "requested_method": requested,
        "maps_computed": [m for m in maps if m in computed or m == "rollout"],
        "seconds_per_forward_pass": round(seconds_per_pass, 4), "threshold": threshold,
        **({"faithfulness_plan": plan.to_dict()} if plan is not None else {}),
        **({"faithfulness": results} if results is not None else {}),
    }
    return saved_under(CTExplanation(summary=summary, tables={}, figures=[draw], rollout=voxel_map,
                                     attribution=attribution_map, affine=affine, image=image[0],
                                     probabilities=probabilities, label=label, method=method, description=described,
                                     input_meta=dict(getattr(image, "meta", {}))),
                       out, overwrite)
