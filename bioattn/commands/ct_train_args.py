"""The flags of ``bioattn train ct`` and the :class:`~bioattn.tasks.ct.CTOptions` they make (the preprocessing flags
it shares with ``predict`` and ``explain ct``: :mod:`bioattn.commands.ct_args`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bioattn.commands.ct_args import add_fit_argument, add_intensity_window_argument, add_tta_argument

if TYPE_CHECKING:
    from bioattn.tasks.ct.train import CTOptions


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn train ct``."""
    from bioattn.commands.common import (
        add_data_root_argument, add_ensemble_arguments, add_size_arguments, add_training_and_device_arguments,
    )
    from bioattn.models.hybrid_ct import POOLS, STEMS
    from bioattn.tasks.ct.options import DEFAULT_DATASET, DEFAULT_STEM_DEPTH, PROTOCOLS, TUNED_DEFAULTS

    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset", default=None,
                        help=f"MedMNIST 3D dataset name, found under --data-root (default: {DEFAULT_DATASET})")
    source.add_argument("--manifest", type=Path, default=None, metavar="LABELS.csv",
                        help="your own volumes: CSV with columns image,label[,split] (default: none)")
    add_data_root_argument(parser, what="data folder for --dataset")
    parser.add_argument("--positive-class", default=None, metavar="NAME",
                        help="--manifest with two labels: the positive class, the one AUROC, the trust report and "
                             "p_<class> thresholds are about (default: the label that is not normal/negative/control/"
                             "healthy/benign/background/absent/no/false/0, else the second in sorted order; named in "
                             "the summary and saved with the model)")
    parser.add_argument("--size", type=int, nargs="+", default=None, metavar="N",
                        help="--dataset: the volume edge, 64 or 28 (default: 64); --manifest: the model input X Y Z, "
                             "or one value for a cube; each of X, Y and Z must be a multiple of the CNN stride (16 "
                             "when the largest exceeds 32 voxels, else 8; e.g. 48 48 32, not 48 48 24), checked "
                             "before any volume is read (default: 64 64 64)")
    parser.add_argument("--out", type=Path, required=True, help="run directory to create")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny models, 2 epochs of 3 steps of 8")
    parser.add_argument("--baseline", choices=("resnet", "none"), default="resnet",
                        help="MONAI baseline trained in the same run with the same budget (default: %(default)s)")
    parser.add_argument("--protocol", choices=tuple(PROTOCOLS), default="tuned",
                        help="training protocol: 'tuned' (AdamW, cosine, label smoothing, flip test-time averaging; "
                             "15 epochs) or 'medmnist' (the MedMNIST v2 official one: Adam, step decay, 100 epochs) "
                             "(default: %(default)s)")
    add_ensemble_arguments(parser, cv_pool="train + val (both models scored)", cv_default="off")
    parser.add_argument("--no-augment", action="store_true", help="turn off flips, rotations and intensity jitter")
    parser.add_argument("--label-smoothing", type=float, default=None,
                        help="cross-entropy label smoothing (default: the protocol's, 0 medmnist, 0.1 tuned)")
    parser.add_argument("--intensity-jitter", type=float, default=None,
                        help="random intensity scale/shift j (default: the protocol's, 0.1 medmnist, 0 tuned)")
    add_tta_argument(parser, default_help="the protocol's, none medmnist, flips tuned")
    parser.add_argument("--mixup", type=float, default=None, metavar="ALPHA",
                        help="mixup: train on convex pairs of volumes (and of their labels), the weight drawn from "
                             "Beta(ALPHA, ALPHA) per batch; 0: off (default: the protocol's, 0 for both)")
    own = parser.add_argument_group("--manifest preprocessing (MONAI; saved with the model)")
    own.add_argument("--orientation", default=None, metavar="CODES", help="reorient to these axis codes (default: RAS)")
    own.add_argument("--spacing", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                     help="resample to this voxel size in mm (default: keep each file's)")
    add_intensity_window_argument(own, default_help="-160 240 when the volumes are CT in Hounsfield units, with air and "
                                                         "soft tissue; other volumes unchanged")
    add_fit_argument(own, default="resize", default_help="%(default)s")
    model = parser.add_argument_group("attention model")
    model.add_argument("--stem-channels", type=int, nargs="+", default=None,
                       help="channels of each CNN stage (default: 8 16 32 with --stem resnet and 8 16 64 with --stem "
                            "residual when the CNN sees up to 32 voxels after --unshuffle, 16 32 64 96 above)")
    model.add_argument("--stem-strides", type=int, nargs="+", default=None,
                       help="stride of each CNN stage (default: 2 2 2 when the CNN sees up to 32 voxels after "
                            "--unshuffle, 2 2 2 2 above)")
    model.add_argument("--stem-depth", type=int, default=DEFAULT_STEM_DEPTH, metavar="N",
                       help="convolutions per CNN stage: one residual unit of N, or N/2 basic blocks with --stem resnet "
                            "(default: %(default)s, as deep as a ResNet-18 stage)")
    model.add_argument("--unshuffle", type=int, default=None, metavar="U",
                       help="fold each U³ block of voxels into channels before the CNN (lossless; the stem then "
                            "works at 1/U of the size; default: 2 above 32 voxels, so 64³ costs about what 28³ does, "
                            "else 1)")
    model.add_argument("--stem", choices=STEMS, default=None, dest="stem_type",
                       help="the CNN before attention: MONAI residual units (residual) or a MONAI ResNet's trunk, "
                            "7³ convolution, max pooling and basic blocks (resnet) (default: resnet for --manifest, "
                            "residual for --dataset)")
    model.add_argument("--pool", choices=POOLS, default=None,
                       help="what the classifier reads: the [CLS] token (cls) or, beside it, each channel's maximum over "
                            "the grid tokens (cls+max) or the mean of the CNN's tokens before attention (cls+mean); or a "
                            "ResNet's readout of the CNN (average pooling, a linear layer) plus the [CLS] head behind a "
                            "learnable gate that starts at 0 (trunk+gate: the model starts as a ResNet) "
                            "(default: cls+mean for --manifest, cls for --dataset)")
    model.add_argument("--distance-channel", action=argparse.BooleanOptionalAction, default=None,
                       help="also feed the CNN (and the ResNet baseline) how deep each voxel lies inside the mask "
                            "(its distance to the background), so it sees thickness directly (default: on when the "
                            "training volumes are binary masks, e.g. AdrenalMNIST3D, else off)")
    add_size_arguments(model, embed_dim=96, heads=4, layers=3, width_help="model width (token size), divisible by 6",
                       layers_help="Transformer layers", dropout=0.0,
                       dropout_help="dropout of the transformer layers and the head")
    add_training_and_device_arguments(
        parser, TUNED_DEFAULTS,
        epochs_help="maximum epochs (default: the protocol's, " + ", ".join(
            f"{protocol.train_config.max_epochs} {name}" for name, protocol in PROTOCOLS.items()) + ")")
    parser.set_defaults(epochs=None)  # the protocol's


def train_options_from_args(args: argparse.Namespace) -> "CTOptions":
    """The command line as :class:`~bioattn.tasks.ct.CTOptions`; the training configuration comes from the protocol,
    then the YAML file (``--config``), then the flags; ``args`` is not changed."""
    from bioattn.commands.common import ensemble_options
    from bioattn.commands.training_args import config_from_args
    from bioattn.tasks.ct.train import PROTOCOLS, CTOptions, protocol_train_config

    defaults = PROTOCOLS[args.protocol].train_config
    config = protocol_train_config(args.protocol, config_from_args(args, defaults, max_epochs=defaults.max_epochs),
                                   quick=args.quick, keep_milestones=hasattr(args, "milestones"))
    optional_tuple = lambda values: tuple(values) if values is not None else None  # noqa: E731
    return CTOptions(
        out=args.out, dataset=args.dataset, data_root=args.data_root, manifest=args.manifest,
        size=optional_tuple(args.size), orientation=args.orientation, spacing=optional_tuple(args.spacing),
        window=optional_tuple(args.intensity_window), fit=args.fit, protocol=args.protocol, baseline=args.baseline,
        augment=not args.no_augment, label_smoothing=args.label_smoothing, intensity_jitter=args.intensity_jitter,
        tta=args.tta, mixup=args.mixup, quick=args.quick, stem_channels=optional_tuple(args.stem_channels),
        stem_strides=optional_tuple(args.stem_strides), stem_depth=args.stem_depth, unshuffle=args.unshuffle,
        distance_channel=args.distance_channel, embed_dim=args.embed_dim, heads=args.heads, layers=args.layers,
        dropout=args.dropout, train_config=config, positive_class=args.positive_class, pool=args.pool,
        stem_type=args.stem_type,
        **ensemble_options(args), resume=args.resume, overwrite=args.overwrite,
    )
