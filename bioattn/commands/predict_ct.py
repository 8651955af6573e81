"""Class probabilities of a trained CT model for a manifest of scans, one NIfTI/DICOM volume or a MedMNIST .npz.

``bioattn predict ct --run RUN_DIR --input INPUT --output OUT.csv [--attention-map [MAP.nii.gz]]``
(``--model NAME`` instead of ``--run``: a model shipped with bioattn, see ``bioattn models``)

- ``INPUT`` is a manifest (``.csv`` with an ``image`` column, optional ``label`` and ``split``, as for
  ``bioattn train ct --manifest``: many scans in one call), a NIfTI file (``.nii``/``.nii.gz``), a DICOM file or a
  folder holding one DICOM series, or a MedMNIST-style ``.npz`` (every volume of every split, or ``--split``).
- ``OUT.csv`` gets one row per volume, in input order: for a manifest ``image,label,split``, otherwise
  ``input,split,index,label`` (index and label for ``.npz`` only); then one ``p_<class>`` per class,
  ``predicted_label`` and ``warning``.
- NIfTI/DICOM volumes are prepared as the run's ``preprocessing.json`` says (orientation, spacing, window,
  resize/crop, as in training); each preprocessing flag replaces its saved step. Predictions are averaged over the
  8 flips when the run evaluated that way (``--protocol tuned``); ``--flip-tta`` / ``--no-flip-tta`` decide instead.
- Every input is compared with the training volumes (intensity range and mean, binary masks or not, model input
  shape, voxel size and field of view): an input far from them gets a ``warning:`` line on stderr naming it and
  the problem, and the same text in the ``warning`` column. Its probabilities may mean little: e.g. a model
  trained on MedMNIST binary masks has nothing to say about a CT in Hounsfield units.
- ``--attention-map`` (one NIfTI or DICOM input) writes the [CLS] attention rollout over all layers, upsampled
  through the CNN stride and mapped back through every spatial preprocessing step, as a NIfTI on the input's voxel
  grid and affine, scaled so the most-attended voxel is 1. Rollout is a hypothesis about what the model looked at,
  not a causal attribution.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.attention.rollout import HEAD_FUSIONS
from bioattn.commands.common import add_device_argument, add_model_arguments, device_from_args, model_dir
from bioattn.errors import UserInputError
from bioattn.io import STDOUT

AUTO = "auto"
PREPROCESSING_FLAGS = ("window", "spacing", "orientation", "resize", "size")


def add_preprocessing_arguments(parser: argparse.ArgumentParser) -> None:
    """The NIfTI/DICOM preprocessing flags shared by ``predict ct`` and ``explain ct`` (:data:`PREPROCESSING_FLAGS`)."""
    group = parser.add_argument_group(
        "NIfTI / DICOM preprocessing (default: the run's preprocessing.json; each flag replaces its step; then zero "
        "padding to a multiple of the CNN stride)")
    group.add_argument("--window", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                       help="map intensities LOW..HIGH (e.g. HU -160 240 for abdomen) onto 0..1, clipped "
                            "(default: the run's)")
    group.add_argument("--spacing", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample to this voxel size in mm (default: the run's)")
    group.add_argument("--orientation", default=None, metavar="CODES", help="reorient, e.g. RAS (default: the run's)")
    group.add_argument("--resize", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample the whole volume to this size (default: the run's)")
    group.add_argument("--size", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="then centre crop / zero pad to this size (default: the run's)")


def preprocessing_from_args(args: argparse.Namespace, saved):
    """The run's saved :class:`~bioattn.data.ct.VolumePreprocessing` with the flags that were given applied."""
    from bioattn.tasks.ct_predict import resolve_preprocessing

    given = {name: getattr(args, name) for name in PREPROCESSING_FLAGS if getattr(args, name) is not None}
    return resolve_preprocessing(saved, **{name: tuple(v) if isinstance(v, list) else v for name, v in given.items()})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, trained_by="bioattn train ct")
    add_device_argument(parser)
    parser.add_argument("--input", type=Path, required=True,
                        help="manifest .csv, .nii/.nii.gz, DICOM file or folder, or MedMNIST .npz")
    parser.add_argument("--output", type=Path, required=True,
                        help="CSV of class probabilities to write ('-': standard output; the summary then goes to stderr)")
    parser.add_argument("--attention-map", nargs="?", const=AUTO, default=None, metavar="MAP.nii.gz",
                        help="also write the [CLS] attention rollout as NIfTI on the input grid "
                             "(default path: OUTPUT with suffix .attention.nii.gz)")
    parser.add_argument("--split", choices=("train", "val", "test"), default=None,
                        help=".npz or manifest with a split column: predict only this split (default: every row)")
    parser.add_argument("--head-fusion", choices=HEAD_FUSIONS, default="mean",
                        help="how heads are fused in the attention rollout (default: mean)")
    parser.add_argument("--batch-size", type=int, default=32, help="volumes per batch (default: 32)")
    parser.add_argument("--workers", type=int, default=0,
                        help="manifest: DataLoader worker processes reading and preprocessing the scans (0: in the "
                             "main process) (default: %(default)s)")
    parser.add_argument("--flip-tta", action=argparse.BooleanOptionalAction, default=None,
                        help="average the probabilities over the 8 flips of the three axes (8x the compute; the "
                             "attention map stays unflipped) (default: as the run evaluated: on after --protocol "
                             "tuned, else off)")
    add_preprocessing_arguments(parser)


def _attention_path(args: argparse.Namespace) -> Path | None:
    if args.attention_map is None:
        return None
    if args.attention_map == AUTO:
        if str(args.output) == STDOUT:
            raise UserInputError("--output -: give --attention-map a file name (MAP.nii.gz)")
        return args.output.with_name(args.output.name.removesuffix(args.output.suffix) + ".attention.nii.gz")
    path = Path(args.attention_map)
    if not path.name.lower().endswith((".nii", ".nii.gz")):
        raise UserInputError(f"{path}: --attention-map must end in .nii or .nii.gz")
    return path


def run(args: argparse.Namespace) -> int:
    from bioattn.data.ct import write_nifti
    from bioattn.data.ct_manifest import is_manifest
    from bioattn.report import format_table
    from bioattn.tasks import ct_predict
    from bioattn.training.distributed import is_main_process

    if args.batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {args.batch_size}")
    attention_path = _attention_path(args)
    is_npz, many = args.input.suffix.lower() == ".npz", is_manifest(args.input)
    if (is_npz or many) and attention_path is not None:
        raise UserInputError(f"{args.input}: --attention-map needs one NIfTI or DICOM input")
    if not (is_npz or many) and args.split is not None:
        raise UserInputError(f"{args.input}: --split applies to .npz and manifest inputs only")
    volume_options = [f"--{name}" for name in PREPROCESSING_FLAGS if getattr(args, name) is not None]
    if is_npz and volume_options:
        raise UserInputError(f"{args.input}: {', '.join(volume_options)} apply to NIfTI/DICOM inputs, not to a .npz")
    model, saved = ct_predict.load_run(model_dir(args), map_location=device_from_args(args))
    flip_tta = ct_predict.resolve_flip_tta(saved, args.flip_tta)
    overlay = None
    if is_npz:
        predictions = ct_predict.predict_npz(model, args.input, saved, split=args.split, batch_size=args.batch_size,
                                             flip_tta=flip_tta)
    elif many:
        predictions = ct_predict.predict_manifest(model, args.input, preprocessing_from_args(args, saved), saved,
                                                  split=args.split, batch_size=args.batch_size, flip_tta=flip_tta,
                                                  workers=args.workers)
        if not is_main_process():  # under torchrun the first process writes every row
            return 0
    else:
        prediction, overlay = ct_predict.predict_volume(
            model, args.input, preprocessing_from_args(args, saved), saved, flip_tta=flip_tta,
            attention_map=attention_path is not None, head_fusion=args.head_fusion)
        predictions = [prediction]
    names = model.class_names
    ct_predict.write_predictions(args.output, predictions, names, manifest=many)
    if overlay is not None and attention_path is not None:
        write_nifti(attention_path, *overlay)
    summary = sys.stderr if str(args.output) == STDOUT else sys.stdout  # stdout may hold the CSV
    for p in predictions[:10]:
        print(f"{p.describe()}: " + ", ".join(f"{name} {value:.4f}" for name, value in zip(names, p.probabilities)),
              file=summary)
    if len(predictions) > 10:
        print(f"... {len(predictions) - 10} more rows", file=summary)
    ct_predict.report_warnings(predictions)
    scores = ct_predict.summarize_predictions(predictions, names)
    if scores:
        print(format_table(["split", "volumes", "AUROC", "accuracy", "MCC"],
                           [[split, m["volumes"], m.get("auroc"), m["accuracy"], m["mcc"]]
                            for split, m in scores.items()],
                           title=f"labelled inputs (flip averaging {'on' if flip_tta else 'off'})"), file=sys.stderr)
    print(f"wrote {args.output}" + (f" and {attention_path}" if overlay is not None else ""), file=sys.stderr)
    return 0
