"""The training flags of every training command and ``--config FILE.yaml``."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

from bioattn.attention import BACKENDS
from bioattn.errors import UserInputError
from bioattn.training.config import PRECISIONS, TrainConfig, config_from_values, load_yaml_config


_FLAG_FIELDS = {"max_minutes": "max_minutes", "epochs": "max_epochs", "batch_size": "batch_size", "lr": "lr",
                "seed": "seed", "precision": "precision", "grad_accum": "grad_accum",
                "attention_backend": "attention_backend", "ema_decay": "ema_decay", "deterministic": "deterministic",
                "min_steps": "min_steps"}
_FIELD_FLAGS = {v: k for k, v in _FLAG_FIELDS.items()}


def add_training_args(parser: argparse.ArgumentParser, defaults: TrainConfig, *, epochs_help: str | None = None,
                      lr_help: str | None = None) -> None:
    """Add the training flags (defaults from ``defaults``) and ``--config FILE.yaml``, read before parsing."""
    group = parser.add_argument_group("training")
    group.add_argument("--config", type=Path, default=None, metavar="FILE.yaml",
                       help="YAML file of option values (keys = option names); command-line flags override it")
    group.add_argument("--max-minutes", type=float, default=defaults.max_minutes,
                       help="wall-clock budget for training in this invocation (default: "
                            + ("none, no limit)" if defaults.max_minutes is None else "%(default)s)"))
    group.add_argument("--epochs", type=int, default=defaults.max_epochs,
                       help=epochs_help or "maximum epochs (default: %(default)s)")
    group.add_argument("--batch-size", type=int, default=defaults.batch_size,
                       help="global samples per optimizer step, split over processes and --grad-accum (default: %(default)s)")
    group.add_argument("--lr", type=float, default=defaults.lr,
                       help=lr_help or "peak learning rate (default: %(default)s)")
    group.add_argument("--seed", type=int, default=defaults.seed, help="random seed (default: %(default)s)")
    group.add_argument("--precision", choices=PRECISIONS, default=defaults.precision,
                       help="fp32, bf16 autocast (CPU or GPU) or fp16 autocast + grad scaler (GPU) (default: %(default)s)")
    group.add_argument("--attention-backend", choices=BACKENDS, default=defaults.attention_backend,
                       help="attention kernel while training and evaluating; auto: torch's choice, except math "
                            "for --precision bf16 on a CPU (default: %(default)s)")
    group.add_argument("--grad-accum", type=int, default=defaults.grad_accum,
                       help="micro-batches per optimizer step (default: %(default)s)")
    group.add_argument("--ema-decay", type=_optional_float, default=defaults.ema_decay, metavar="D",
                       help="evaluate, select and save an exponential moving average of the weights with this decay "
                            "per step (e.g. 0.999); none: the weights themselves (default: "
                            + ("none)" if defaults.ema_decay is None else "%(default)s)"))
    group.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=defaults.deterministic,
                       help="on a GPU: deterministic kernels and the math attention kernel, so a run and its resumed "
                            "or repeated twin match bit for bit, as on a CPU; slower (default: %(default)s)")
    group.add_argument("--min-steps", type=int, default=defaults.min_steps, metavar="N",
                       help="when --epochs give fewer than N optimizer steps (a small training set), train more epochs "
                            "until there are N; 0 = never (default: %(default)s)")
    mode = group.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue the run in the output directory from its checkpoint")
    mode.add_argument("--overwrite", action="store_true", help="delete the output directory's contents and start over")
    _read_config_file_before_parsing(parser)


def _optional_float(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None


def _read_config_file_before_parsing(parser: argparse.ArgumentParser) -> None:
    original = parser.parse_known_args

    def parse_known_args(args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None):
        argv = list(sys.argv[1:] if args is None else args)
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config", type=Path, default=None)
        config_path = pre.parse_known_args(argv)[0].config
        if config_path is not None:
            namespace = namespace if namespace is not None else argparse.Namespace()
            for dest, value in _config_file_defaults(config_path, parser).items():
                if not hasattr(namespace, dest):
                    setattr(namespace, dest, value)
        return original(argv, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _config_file_defaults(path: Path, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """YAML values keyed by parser destination; string values pass through the flag's ``type``."""
    actions = {a.dest: a for a in parser._actions if a.dest not in (argparse.SUPPRESS, "help", "config")}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    resolved: dict[str, Any] = {}
    for key, value in load_yaml_config(path).items():
        dest = _FIELD_FLAGS.get(key, key) if key not in actions else key
        if dest not in actions and dest not in fields:
            raise UserInputError(f"{path}: unknown option {key!r}; known: {', '.join(sorted(set(actions) | fields))}")
        action = actions.get(dest)
        if action is not None and isinstance(value, str) and callable(action.type):
            try:
                value = action.type(value)
            except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
                raise UserInputError(f"{path}: option {key!r}: invalid value {value!r} ({exc})") from exc
        if action is not None and action.choices is not None and value not in action.choices:
            raise UserInputError(f"{path}: option {key!r} must be one of {list(action.choices)}; got {value!r}")
        resolved[dest] = value
    resolved["config"] = path
    return resolved


def training_values(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`TrainConfig` fields the parsed ``args`` set (flags and ``--config`` file)."""
    return {name: getattr(args, _FIELD_FLAGS.get(name, name)) for name in (f.name for f in dataclasses.fields(TrainConfig))
            if hasattr(args, _FIELD_FLAGS.get(name, name))}


def config_from_args(args: argparse.Namespace, defaults: TrainConfig, **unset: Any) -> TrainConfig:
    """The run's :class:`TrainConfig`: ``defaults``, then the YAML file, then the flags."""
    return config_from_values(training_values(args), defaults, **unset)
