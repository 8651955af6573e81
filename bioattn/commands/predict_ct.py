"""Class probabilities of a trained CT model for a .npz, NIfTI or DICOM input (optionally an attention NIfTI).

``bioattn predict ct --run RUN_DIR --input FILE --output OUT.csv [--attention-map [MAP.nii.gz]]``

- ``FILE`` is a MedMNIST-style ``.npz`` (every volume of every split, or ``--split``), a NIfTI file
  (``.nii``/``.nii.gz``), a DICOM file or a folder holding one DICOM series.
- ``OUT.csv`` gets one row per volume: input, split, index, label (npz only), one probability per class.
- ``--attention-map`` (NIfTI or DICOM input) writes the [CLS] attention rollout over all layers,
  upsampled through the CNN stride and mapped back through every spatial preprocessing step, as a NIfTI
  on the input's voxel grid and affine, scaled so the most-attended voxel is 1: open it over the CT in
  any viewer. Rollout is a hypothesis about what the model looked at, not a causal attribution.

Volumes are preprocessed as the options say (orientation, spacing, HU window, resize, crop/pad), then padded
to a multiple of the model's stride. A model trained on MedMNIST masks expects inputs like its training
data; its probabilities on a raw CT have no clinical meaning.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bioattn.errors import UserInputError
from bioattn.attention.rollout import HEAD_FUSIONS
from bioattn.io import atomic_write

if TYPE_CHECKING:
    from monai.transforms import Compose

AUTO = "auto"
PREPROCESSING_FLAGS = ("window", "spacing", "orientation", "resize", "size")


def add_preprocessing_arguments(parser: argparse.ArgumentParser) -> None:
    """The NIfTI/DICOM preprocessing flags shared by ``predict ct`` and ``explain ct`` (:data:`PREPROCESSING_FLAGS`)."""
    group = parser.add_argument_group("NIfTI / DICOM preprocessing (then zero padding to a multiple of the CNN stride)")
    group.add_argument("--window", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                       help="map intensities LOW..HIGH (e.g. HU -160 240 for abdomen) onto 0..1, clipped")
    group.add_argument("--spacing", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample to this voxel size in mm")
    group.add_argument("--orientation", default=None, metavar="CODES", help="reorient, e.g. RAS")
    group.add_argument("--resize", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="resample the whole volume to this size (e.g. the training size)")
    group.add_argument("--size", type=int, nargs=3, default=None, metavar=("X", "Y", "Z"),
                       help="then centre crop / zero pad to this size")


def preprocessing_from_args(args: argparse.Namespace, *, divisible_by: int) -> Compose:
    """The invertible :func:`~bioattn.data.ct.ct_preprocessing` pipeline that the preprocessing flags describe."""
    from bioattn.data.ct import ct_preprocessing

    return ct_preprocessing(orientation=args.orientation, spacing=args.spacing,
                            window=tuple(args.window) if args.window else None, resize=args.resize,
                            spatial_size=args.size, divisible_by=divisible_by)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", type=Path, required=True, help="run directory of recipes/ct_classify.py")
    parser.add_argument("--input", type=Path, required=True, help=".npz, .nii/.nii.gz, DICOM file or DICOM folder")
    parser.add_argument("--output", type=Path, required=True, help="CSV of class probabilities to write")
    parser.add_argument("--attention-map", nargs="?", const=AUTO, default=None, metavar="MAP.nii.gz",
                        help="also write the [CLS] attention rollout as NIfTI on the input grid "
                             "(default path: OUTPUT with suffix .attention.nii.gz)")
    parser.add_argument("--split", choices=("train", "val", "test"), default=None,
                        help=".npz input: predict only this split (default: every split in the file)")
    parser.add_argument("--head-fusion", choices=HEAD_FUSIONS, default="mean",
                        help="how heads are fused in the attention rollout (default: mean)")
    parser.add_argument("--batch-size", type=int, default=32, help=".npz input: volumes per batch (default: 32)")
    parser.add_argument("--flip-tta", action="store_true",
                        help="average the probabilities over the 8 flips of the three axes, as the recipe's "
                             "'tuned' protocol evaluates (8x the compute; the attention map stays unflipped)")
    add_preprocessing_arguments(parser)


def _attention_path(args: argparse.Namespace) -> Path | None:
    if args.attention_map is None:
        return None
    if args.attention_map == AUTO:
        return args.output.with_name(args.output.name.removesuffix(args.output.suffix) + ".attention.nii.gz")
    path = Path(args.attention_map)
    if not path.name.lower().endswith((".nii", ".nii.gz")):
        raise UserInputError(f"{path}: --attention-map must end in .nii or .nii.gz")
    return path


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    with atomic_write(path) as handle:
        handle.write(buffer.getvalue())


def _predict_npz(args: argparse.Namespace, model) -> list[list[object]]:
    from monai.transforms import DivisiblePad

    from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz
    from bioattn.models.hybrid_ct import predict_probabilities

    splits = load_medmnist3d_npz(args.input)
    if args.split is not None:
        if args.split not in splits:
            raise UserInputError(f"{args.input}: has no {args.split} split (has {', '.join(splits)})")
        splits = {args.split: splits[args.split]}
    rows: list[list[object]] = []
    for name, split in splits.items():
        if split.num_channels != model.in_channels:
            raise UserInputError(
                f"{args.input} [{name}_images]: volumes have {split.num_channels} channel(s), "
                f"the model expects {model.in_channels}"
            )
        dataset = VolumeDataset(split, DivisiblePad(k=model.stride))
        probs = predict_probabilities(model, dataset, batch_size=args.batch_size, flip_tta=args.flip_tta)
        rows += [[str(args.input), name, i, int(label), *map(float, p)]
                 for i, (label, p) in enumerate(zip(split.labels, probs))]
    return rows


def _predict_volume(
    args: argparse.Namespace, model, attention_path: Path | None
) -> tuple[list[list[object]], tuple | None]:
    """One NIfTI/DICOM volume → ([row], (map on the input grid (X, Y, Z), affine) or None)."""
    import torch

    from bioattn.data.ct import check_volume, invert_to_input_grid, read_ct_volume
    from bioattn.models.hybrid_ct import predict_probabilities

    volume = read_ct_volume(args.input)
    check_volume(volume, args.input, in_channels=model.in_channels)
    pipeline = preprocessing_from_args(args, divisible_by=model.stride)
    image = pipeline(volume)
    if attention_path is not None:
        model.check_attention_size(tuple(image.shape[1:]), str(args.input))
    batch = image.as_tensor()[None].float()
    with torch.no_grad():
        if attention_path is None:
            probs, overlay = model(batch).softmax(dim=-1), None
        else:
            probs, voxel_map = model.attention_map(batch, head_fusion=args.head_fusion)
            restored = invert_to_input_grid(pipeline, image, voxel_map)[0].as_tensor()  # (X, Y, Z), input grid
            overlay = (restored / restored.max().clamp_min(torch.finfo(restored.dtype).tiny), volume.affine)
    if args.flip_tta:
        probs = predict_probabilities(model, [(batch[0], 0)], batch_size=1, flip_tta=True)
    return [[str(args.input), "", 0, "", *map(float, probs[0])]], overlay


def run(args: argparse.Namespace) -> int:
    from bioattn.data.ct import write_nifti
    from bioattn.models.hybrid_ct import HybridCT3D

    if args.batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {args.batch_size}")
    attention_path = _attention_path(args)
    is_npz = args.input.suffix.lower() == ".npz"
    if is_npz and attention_path is not None:
        raise UserInputError(f"{args.input}: --attention-map needs a NIfTI or DICOM input (a .npz has no affine)")
    if not is_npz and args.split is not None:
        raise UserInputError(f"{args.input}: --split applies to .npz inputs only")
    volume_options = [f"--{name}" for name in PREPROCESSING_FLAGS if getattr(args, name) is not None]
    if is_npz and volume_options:
        raise UserInputError(f"{args.input}: {', '.join(volume_options)} apply to NIfTI/DICOM inputs, not to a .npz")
    model = HybridCT3D.from_pretrained(args.run)
    if is_npz:
        rows, overlay = _predict_npz(args, model), None
    else:
        rows, overlay = _predict_volume(args, model, attention_path)
    header = ["input", "split", "index", "label", *(f"p_{name}" for name in model.class_names)]
    _write_csv(args.output, header, rows)
    if overlay is not None and attention_path is not None:
        write_nifti(attention_path, *overlay)
    for row in rows[:10]:
        where = f"{row[0]}" + (f" [{row[1]} {row[2]}]" if row[1] else "")
        print(where + ": " + ", ".join(f"{name} {p:.4f}" for name, p in zip(model.class_names, row[4:])))
    if len(rows) > 10:
        print(f"... {len(rows) - 10} more rows")
    print(f"wrote {args.output}" + (f" and {attention_path}" if overlay is not None else ""), file=sys.stderr)
    return 0
