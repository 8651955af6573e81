"""The flags several commands share: ``--model NAME_OR_DIR`` (a shipped model or a run directory), ``--device``,
the model size, ``--data-root``, the training, ensemble and explain flags."""
from __future__ import annotations

import argparse
from typing import Sequence

from bioattn.models.registry import available_models
from bioattn.distributed import DEVICES


def add_model_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, trained_by: str,
                        required: bool = True) -> argparse._MutuallyExclusiveGroup:
    """Add ``--model NAME_OR_DIR`` (a shipped model's name or a run directory; required when ``required``).

    ``trained_by`` names the command whose run directories fit, e.g. ``"bioattn train promoter"``. Returns the
    mutually exclusive group, so a command can add further alternatives to it.
    """
    group = parser.add_mutually_exclusive_group(required=required)
    shipped = ", ".join(available_models()) or "none"
    group.add_argument("--model", default=None, metavar="NAME_OR_DIR",
                               help=f"a model shipped with bioattn by name ({shipped}; see 'bioattn models') or a run "
                                    f"directory of '{trained_by}' (config.json + model.safetensors) (default: none)")
    return group


def model_source(args: argparse.Namespace) -> str | None:
    """What ``--model`` named, as the library takes it (a shipped name or a run directory)."""
    return args.model


def add_device_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add ``--device auto|cpu|cuda`` (the one definition every training, prediction and explanation command uses)."""
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where the model runs: auto (the GPU when PyTorch sees one), cpu or cuda (default: %(default)s)")


def add_model_and_device_arguments(parser: argparse.ArgumentParser, *,
                                   trained_by: str) -> argparse._MutuallyExclusiveGroup:
    """``--model`` (:func:`add_model_arguments`, required) then ``--device`` (:func:`add_device_argument`): how every
    command that runs a trained model begins. Returns ``--model``'s group."""
    group = add_model_arguments(parser, trained_by=trained_by)
    add_device_argument(parser)
    return group


def add_training_and_device_arguments(parser: argparse.ArgumentParser, defaults, *, epochs_help: str | None = None,
                                      lr_help: str | None = None) -> None:
    """The training flags (:func:`bioattn.commands.training_args.add_training_args`, defaults from the
    :class:`~bioattn.training.TrainConfig` ``defaults``, ``epochs_help`` / ``lr_help`` as there) then ``--device``:
    how a training command's flags end. (Training code is imported here, not by this module, so predict and explain
    commands never reach it.)"""
    from bioattn.commands.training_args import add_training_args

    add_training_args(parser, defaults, epochs_help=epochs_help, lr_help=lr_help)
    add_device_argument(parser)


def add_size_arguments(group: argparse.ArgumentParser | argparse._ArgumentGroup, *, embed_dim: int | None, heads: int,
                       layers: int, width_help: str = "model width (token size)", heads_help: str = "attention heads",
                       layers_help: str = "transformer layers",
                       dropout: float | None = None, dropout_help: str | None = None) -> None:
    """The size of a transformer: ``--embed-dim`` (unless ``embed_dim`` is None), ``--heads``, ``--layers`` and, when ``dropout_help`` is given, ``--dropout``; each help
    text ends with its default."""
    if embed_dim is not None:
        group.add_argument("--embed-dim", type=int, default=embed_dim, help=f"{width_help} (default: %(default)s)")
    group.add_argument("--heads", type=int, default=heads, help=f"{heads_help} (default: %(default)s)")
    group.add_argument("--layers", type=int, default=layers, help=f"{layers_help} (default: %(default)s)")
    if dropout_help is not None:
        group.add_argument("--dropout", type=float, default=dropout, help=f"{dropout_help} (default: %(default)s)")


def add_data_root_argument(group: argparse.ArgumentParser | argparse._ArgumentGroup, *, what: str) -> None:
    """``--data-root DIR``, the data folder ``what`` (e.g. ``"data root for --all"``) is read from."""
    group.add_argument("--data-root", default=None, help=f"{what} (default: $BIOATTN_DATA_ROOT or ../shared/data)")


def add_ensemble_arguments(parser: argparse.ArgumentParser, *, cv_pool: str | None, cv_default: str = "off") -> None:
    """Add ``--seeds S ...`` and, unless ``cv_pool`` is None (a task without a split to fold), ``--cv K`` (see
    :mod:`bioattn.tasks.common`); ``cv_pool`` names the splits a cross-validation pools, e.g.
    ``"train + dev (grouped by sequence)"``."""
    group = parser.add_argument_group("ensembles (one of)" if cv_pool is not None else "ensembles")
    group.add_argument("--seeds", type=int, nargs="+", default=None, metavar="S",
                       help="train one model per seed on the same split and save them as one ensemble; reports each "
                            "seed, mean ± sd and the ensemble (default: one model, seed --seed)")
    if cv_pool is not None:
        group.add_argument("--cv", type=int, default=None, metavar="K",
                           help=f"K-fold stratified cross-validation over {cv_pool}: out-of-fold metrics, the K fold "
                                f"models saved as one ensemble (default: {cv_default})")
        group.add_argument("--cv-repeats", type=int, default=1, metavar="R",
                           help="with --cv K: repeat the K-fold split R times with different shuffles (R x K fold "
                                "models; each example's out-of-fold probability is its mean over the repeats; "
                                "mean ± sd over all R x K folds) (default: %(default)s)")


def ensemble_options(args: argparse.Namespace) -> dict[str, tuple[int, ...] | int | None]:
    """``seeds``, ``cv`` (None without ``--cv``) and, where the task folds, ``cv_repeats`` of
    :func:`add_ensemble_arguments`'s flags, as the task options take them."""
    options: dict[str, tuple[int, ...] | int | None] = {"seeds": tuple(args.seeds) if args.seeds is not None else None,
                                                         "cv": getattr(args, "cv", None)}
    if hasattr(args, "cv_repeats"):
        options["cv_repeats"] = args.cv_repeats
    return options


def add_explain_arguments(parser: argparse.ArgumentParser, *, input_help: str, rollout: bool = True) -> None:
    """``--input --out --overwrite`` and, with ``rollout``, ``--head-fusion --start-layer`` of every explain command."""
    from bioattn.attention.rollout import HEAD_FUSIONS

    parser.add_argument("--input", required=True, metavar="FILE", help=input_help)
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder for tables and figures (created)")
    parser.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty --out folder")
    if not rollout:
        return
    parser.add_argument("--head-fusion", choices=HEAD_FUSIONS, default="mean", help="how rollout fuses a layer's heads (default: mean)")
    parser.add_argument("--start-layer", type=int, default=0, help="first layer included in the rollout (default: 0)")


def add_method_arguments(parser: argparse.ArgumentParser, *, unit: str, methods: Sequence[str] | None = None,
                         auto_help: str | None = None, steps_default: int | None = 20,
                         steps_help: str | None = None) -> None:
    """``--method --no-faithfulness --faithfulness-steps``: which attribution the outputs show, and whether every
    method's deletion/insertion faithfulness is measured (``unit``: what one perturbation step removes; ``methods``:
    the model type's methods, default :data:`~bioattn.explain.attribution.METHODS`)."""
    from bioattn.explain.attribution import METHODS

    choices = tuple(methods or METHODS)
    parser.add_argument("--method", choices=("auto", *choices), default="auto",
                        help="attribution shown in the outputs: auto (" + (auto_help or "of the methods fast enough "
                             "for the input, the one most faithful on a sample of it, measured by deletion/insertion and "
                             "named on stderr with its AUCs") + "), " + ", ".join(choices) + " (default: %(default)s)")
    parser.add_argument("--no-faithfulness", dest="skip_faithfulness", action="store_true",
                        help=f"skip measuring every method's deletion/insertion faithfulness ({unit} removed or "
                             "revealed by rank; summary.json key 'faithfulness', faithfulness.png) (default: off, "
                             "i.e. measured)")
    parser.add_argument("--faithfulness-steps", type=int, default=steps_default,
                        help="points of each deletion/insertion curve (default: " + (steps_help or "%(default)s") + ")")


def method_options(args: argparse.Namespace) -> dict:
    """The library keywords of :func:`add_method_arguments`'s flags."""
    return {"method": args.method, "faithfulness": not args.skip_faithfulness,
            "faithfulness_steps": args.faithfulness_steps}
