"""What commands that run a model share: ``--run RUN_DIR`` or ``--model NAME`` (a shipped model), ``--device``."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bioattn.models.registry import available_models, resolve_model_dir
from bioattn.training.distributed import DEVICES, resolve_device


def add_model_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, trained_by: str,
                        required: bool = True) -> argparse._MutuallyExclusiveGroup:
    """Add ``--run`` and ``--model`` as mutually exclusive options (one of them required when ``required``).

    ``trained_by`` names the command whose run directories fit, e.g. ``"bioattn train promoter"``. Returns
    the group, so a command can add further alternatives to it.
    """
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--run", type=Path, default=None, metavar="RUN_DIR",
                       help=f"run directory of '{trained_by}' (config.json + model.safetensors) (default: none)")
    shipped = ", ".join(available_models()) or "none"
    group.add_argument("--model", default=None, metavar="NAME",
                       help=f"a model shipped with bioattn, by name ({shipped}; see 'bioattn models') (default: none)")
    return group


def model_dir(args: argparse.Namespace) -> Path | None:
    """The folder of ``--run`` or ``--model`` (None when neither was given); an unknown name is a ``UserInputError``."""
    if args.model is not None:
        return resolve_model_dir(args.model)
    return args.run


def model_label(args: argparse.Namespace) -> str:
    """How outputs name the model: the shipped model's name or the run directory."""
    return args.model if args.model is not None else str(args.run)


def add_device_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add ``--device auto|cpu|cuda`` (the one definition every training, prediction and explanation command uses)."""
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where the model runs: auto (the GPU when PyTorch sees one), cpu or cuda (default: %(default)s)")


def device_from_args(args: argparse.Namespace) -> torch.device:
    """The device of ``--device``; ``cuda`` where PyTorch sees no GPU is a ``UserInputError``."""
    return resolve_device(args.device)


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
