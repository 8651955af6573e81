"""[CLS] attention rollout and the --method attribution of a trained CT model as 3D maps on the input grid (NIfTI + PNGs).

``--input`` is a NIfTI file, a DICOM file/series folder, or a MedMNIST-style ``.npz`` (pick the volume with
``--split`` and ``--index``). Writes, under ``--out``: ``rollout.nii.gz`` (the rollout on the input's voxel
grid, with the input's affine; identity affine for ``.npz`` volumes, which carry none), ``attribution.nii.gz``
(the ``--method`` map on the same grid, when it is not rollout), ``input.nii.gz`` for ``.npz`` input (to overlay
in a viewer), ``rollout_slices.png`` / ``attribution_slices.png`` (orthogonal slices through the most
influential voxel), ``heads_layer{l}.png`` / ``head_diversity_layer{l}.png``, ``head_sharpness.png``,
``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, voxels
set to the volume's background value, the minimum). The probability is the one ``predict ct`` prints (the run's
flip averaging; ``--tta`` overrides it). The cheap maps come first (rollout, gradient x input); ``--method auto``
shows the more faithful of them on this volume; faithfulness is measured on those maps at as many curve points as
fit about 40 s (the plan and its cost are printed; Integrated Gradients and occlusion only on request:
``--faithfulness-methods all``). Every stage shows its progress and time left.

NIfTI/DICOM input is prepared as the run's ``preprocessing.json`` says (each preprocessing flag replaces its
step), and an input unlike the training volumes gets a ``warning:`` line (also in ``summary.json``).

Rollout treats attention as the only path between tokens: a hypothesis generator, not causal attribution.
"""
from __future__ import annotations

import argparse

from bioattn.commands.common import (
    add_explain_arguments, add_method_arguments, add_model_and_device_arguments, method_options, model_source,
)
from bioattn.commands.ct_args import add_preprocessing_arguments, add_tta_argument, preprocessing_overrides
from bioattn.tasks.ct.methods import CT_METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_and_device_arguments(parser, trained_by="bioattn train ct")
    add_explain_arguments(parser, input_help="NIfTI (.nii/.nii.gz), DICOM file or series folder, or MedMNIST .npz")
    npz = parser.add_argument_group("MedMNIST .npz input")
    npz.add_argument("--split", default="val", help="split to read from the .npz (default: val)")
    npz.add_argument("--index", type=int, default=0, help="volume index within the split (default: 0)")
    npz.add_argument("--indices", default=None, metavar="SPEC",
                     help="measure the faithfulness table over these volumes of --split (all, A-B or A,B,C; mean ± sd "
                          "over volumes, seconds per volume in summary.json) instead of the --index volume alone; the "
                          "maps stay those of --index (default: the --index volume only)")
    add_preprocessing_arguments(parser)
    add_tta_argument(parser, default_help="as the run evaluated, so the probability is the one predict ct prints")
    add_method_arguments(parser, unit="voxels", methods=CT_METHODS,
                         auto_help="computes the cheap maps, the rollout and gradient_x_input, and shows the more "
                                   "faithful on this volume; the others are computed only when named",
                         steps_default=None,
                         steps_help="as many, up to 20, as fit about 40 s at the measured time of one forward pass; "
                                    "not measured when even 4 do not fit")
    parser.add_argument("--faithfulness-methods", default="default", metavar="default|all|M1,M2",
                        help="which methods the faithfulness table measures (against random): default (the maps "
                             "computed), all (integrated_gradients and occlusion too: minutes to hours on a whole CT "
                             "on a CPU), or names (default: %(default)s); the choice and its cost are printed")


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.ct.explain import describe, explain_ct

    result = explain_ct(model_source(args), args.input, head_fusion=args.head_fusion, start_layer=args.start_layer,
                        split=args.split, index=args.index, faithfulness_indices=args.indices, preprocessing=preprocessing_overrides(args),
                        device=args.device, out=args.out, overwrite=args.overwrite,
                        faithfulness_methods=args.faithfulness_methods,
                        flip_tta=None if args.tta is None else args.tta == "flips", **method_options(args))
    print(describe(result))
    return 0
