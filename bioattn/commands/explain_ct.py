"""[CLS] attention rollout of a trained CT model as a 3D map on the input grid (NIfTI + slice PNGs).

``--input`` is a NIfTI file, a DICOM file/series folder, or a MedMNIST-style ``.npz`` (pick the volume with
``--split`` and ``--index``). Writes, under ``--out``: ``rollout.nii.gz`` (the rollout on the input's voxel
grid, with the input's affine; identity affine for ``.npz`` volumes, which carry none), ``attribution.nii.gz``
(the ``--method`` map on the same grid, when it is not rollout), ``input.nii.gz`` for ``.npz`` input (to overlay
in a viewer), ``rollout_slices.png`` / ``attribution_slices.png`` (orthogonal slices through the most
influential voxel), ``heads_layer{l}.png`` / ``head_diversity_layer{l}.png``, ``head_sharpness.png``,
``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, voxels
set to the volume's background value, the minimum).

NIfTI/DICOM input is prepared as the run's ``preprocessing.json`` says (each preprocessing flag replaces its
step), and an input unlike the training volumes gets a ``warning:`` line (also in ``summary.json``).

Rollout treats attention as the only path between tokens: a hypothesis generator, not causal attribution.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bioattn.commands.common import add_device_argument, add_model_arguments, device_from_args, model_dir, model_label
from bioattn.commands.predict_ct import add_preprocessing_arguments, preprocessing_from_args
from bioattn.errors import UserInputError
from bioattn.explain.attribution import CT_METHODS
from bioattn.explain.outputs import (
    add_common_arguments, add_method_arguments, faithfulness_table, prepare_out_dir, resolve_method, write_faithfulness,
    write_layer_figures,
)
from bioattn.io import write_json

#: Methods from most to least faithful on AdrenalMNIST3D validation volumes (README, "Explaining predictions").
FAITHFULNESS_ORDER = ("gradient_x_input", "integrated_gradients", "relevance", "rollout")

if TYPE_CHECKING:
    from monai.data import MetaTensor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, trained_by="bioattn train ct")
    add_device_argument(parser)
    add_common_arguments(parser, input_help="NIfTI (.nii/.nii.gz), DICOM file or series folder, or MedMNIST .npz")
    npz = parser.add_argument_group("MedMNIST .npz input")
    npz.add_argument("--split", default="val", help="split to read from the .npz (default: val)")
    npz.add_argument("--index", type=int, default=0, help="volume index within the split (default: 0)")
    add_preprocessing_arguments(parser)
    add_method_arguments(parser, unit="voxels", methods=CT_METHODS)


def _read_input(args: argparse.Namespace) -> tuple[MetaTensor, str, int | None]:
    """The input as a channel-first ``MetaTensor (C, X, Y, Z)`` with its affine, a description, and its label
    (``.npz`` only; MedMNIST volumes carry no affine, so theirs is the identity)."""
    import torch
    from monai.data import MetaTensor

    from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz, read_ct_volume

    if not Path(args.input).name.lower().endswith(".npz"):
        return read_ct_volume(args.input), str(args.input), None
    splits = load_medmnist3d_npz(args.input)
    if args.split not in splits:
        raise UserInputError(f"{args.input}: no split {args.split!r} (has {', '.join(splits)})")
    dataset = VolumeDataset(splits[args.split])
    if not 0 <= args.index < len(dataset):
        raise UserInputError(f"{args.input} [{args.split}]: --index {args.index} outside 0..{len(dataset) - 1}")
    image, label = dataset[args.index]
    return MetaTensor(image, affine=torch.eye(4, dtype=torch.float64)), f"{args.input} [{args.split}][{args.index}]", int(label)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from bioattn.data.ct import check_volume, invert_to_input_grid, world_geometry, write_nifti
    from bioattn.explain.attribution import CT_METHODS
    from bioattn.explain.ct import explain_volumes
    from bioattn.explain.ct_attribution import predicted_volume_classes, volume_attribution, volume_score
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.faithfulness_figures import plot_head_sharpness
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary
    from bioattn.models.ensemble import ensemble_members
    from bioattn.explain.figures import plot_orthogonal_slices
    from bioattn.tasks.ct_predict import load_run
    from bioattn.tasks.ct_preprocessing import distribution_warnings, volume_statistics

    model, saved = load_run(model_dir(args), map_location=device_from_args(args))
    if not 0 <= args.start_layer < model.config["num_layers"]:
        raise UserInputError(f"--start-layer must be in [0, {model.config['num_layers'] - 1}], got {args.start_layer}")
    image, described, label = _read_input(args)
    check_volume(image, described, in_channels=model.in_channels)
    # .npz volumes are MedMNIST volumes as stored: only the flags given apply to them
    pipeline = preprocessing_from_args(args, saved if label is None else None).pipeline(divisible_by=model.stride)
    model_input = pipeline(image)
    model.check_attention_size(tuple(model_input.shape[1:]), described)
    warnings = distribution_warnings(dict(saved.profile) if saved else {}, volume_statistics(model_input),
                                     world_geometry(image) if label is None else None)
    if warnings:
        print(f"warning: {described}: {'; '.join(warnings)}; the explanation may mean little", file=sys.stderr)
    out = prepare_out_dir(args.out, overwrite=args.overwrite)

    volumes = model_input.as_tensor()[None].float()
    explanation = explain_volumes(ensemble_members(model)[0], volumes, head_fusion=args.head_fusion,
                                  start_layer=args.start_layer)
    if len(ensemble_members(model)) > 1:
        explanation.probabilities = model(volumes.to(next(model.parameters()).device)).float().softmax(-1).cpu()
        explanation.voxel_map = volume_attribution(model, volumes, "rollout", head_fusion=args.head_fusion,
                                                   start_layer=args.start_layer).cpu()

    def timed_gradient_pass() -> float:
        start = time.perf_counter()
        volume_attribution(model, volumes, "gradient_x_input")
        return time.perf_counter() - start

    method = resolve_method(args, FAITHFULNESS_ORDER, timed_gradient_pass)
    classes = predicted_volume_classes(model, volumes.to(next(model.parameters()).device))

    def attribute(name: str) -> torch.Tensor:
        return volume_attribution(model, volumes, name, classes=classes, head_fusion=args.head_fusion,
                                  start_layer=args.start_layer).cpu()
    # Undo every spatial preprocessing step (padding, crop, resampling, orientation): back onto the input grid.
    voxel_map = invert_to_input_grid(pipeline, model_input, explanation.voxel_map)[0].as_tensor()
    affine = np.asarray(image.affine)
    write_nifti(out / "rollout.nii.gz", voxel_map, affine)
    if label is not None:
        write_nifti(out / "input.nii.gz", image[0], affine)
    probabilities = explanation.probabilities[0].tolist()
    predicted = int(np.argmax(probabilities))
    names = model.class_names
    plot_orthogonal_slices(image[0].as_tensor(), voxel_map, out / "rollout_slices.png",
                           title=f"[CLS] rollout, p({names[predicted]}) = {probabilities[predicted]:.3f}"
                                 + (f", label {names[label]}" if label is not None else ""))
    if method != "rollout":
        attribution_map = invert_to_input_grid(pipeline, model_input, attribute(method))[0].as_tensor()
        write_nifti(out / "attribution.nii.gz", attribution_map, affine)
        plot_orthogonal_slices(image[0].as_tensor(), attribution_map, out / "attribution_slices.png",
                               title=f"{method}, p({names[predicted]}) = {probabilities[predicted]:.3f}")
    sharpness = head_sharpness(explanation.attentions)
    plot_head_sharpness(sharpness, out / "head_sharpness.png", title="CT attention: per-head sharpness")
    faithfulness = None
    if not args.skip_faithfulness:
        score = volume_score(model, volumes[0].to(next(model.parameters()).device), int(classes[0]))
        faithfulness = write_faithfulness(
            compare_methods(lambda name: [attribute(name)[0].flatten()], [score], CT_METHODS, steps=args.faithfulness_steps),
            out, unit="voxels", title=f"{described}: faithfulness (voxels → background)")
    similarities = write_layer_figures([w[0] for w in explanation.attentions], out,
                                       what="CT attention (token 0 = [CLS], then the CNN grid in raster order)")
    grid = explanation.grid_map[0]
    peak = np.unravel_index(int(torch.argmax(voxel_map)), tuple(voxel_map.shape))
    write_json(out / "summary.json", {
        "run": model_label(args), "input": described, "input_shape": list(image.shape[1:]),
        "model_input_shape": list(model_input.shape[1:]), "token_grid": list(grid.shape),
        "probabilities": dict(zip(names, probabilities)), "predicted": names[predicted],
        "label": names[label] if label is not None else None,
        "head_fusion": args.head_fusion, "start_layer": args.start_layer, "warnings": warnings,
        "cls_self_share": float(1 - grid.sum()), "peak_voxel": [int(i) for i in peak],
        "head_similarity": similarities, "method": method, "head_sharpness": sharpness_summary(sharpness),
        **({"faithfulness": faithfulness} if faithfulness is not None else {}),
    })
    print(f"{described}: p({names[predicted]}) = {probabilities[predicted]:.3f}; rollout -> {out / 'rollout.nii.gz'}"
          + (f", {method} -> {out / 'attribution.nii.gz'}" if method != "rollout" else ""))
    if faithfulness is not None:
        print(faithfulness_table(faithfulness))
    return 0
