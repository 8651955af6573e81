"""Training options: :class:`TrainConfig`, its command-line flags and ``--config FILE.yaml``.

Precedence: explicit command-line flags > the YAML file given with ``--config`` > the recipe's defaults.
The YAML file may set any recipe option (by its flag name, ``max-minutes`` or ``max_minutes``) and
any :class:`TrainConfig` field, including those without a flag (``schedule``, ``warmup_steps``...).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from bioattn.attention import BACKENDS
from bioattn.errors import UserInputError
from bioattn.training.distributed import resolve_device

OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("warmup_cosine", "multistep", "constant")
PRECISIONS = ("fp32", "bf16", "fp16")
MONITOR_MODES = ("max", "min", "auto")
#: Metric names (after any split prefix such as ``dev_`` / ``val_``) that are scores: larger is better.
SCORE_METRICS = ("mcc", "accuracy", "f1", "auroc", "auprc", "precision", "recall", "P@L", "P@L/2", "P@L/5")


def monitor_maximizes(monitor: str, mode: str = "auto") -> bool:
    """Whether a larger value of the metric ``monitor`` is better: a loss (a name containing ``loss``) is minimised
    and a score (:data:`SCORE_METRICS`, with or without a split prefix) maximised, whatever ``mode`` says; any other
    metric follows ``mode`` (``"max"`` or ``"min"``), and with ``mode="auto"`` is a :class:`UserInputError`."""
    if "loss" in monitor.lower():
        return False
    base = monitor.split("_", 1)[1] if "_" in monitor and monitor.split("_", 1)[1] in SCORE_METRICS else monitor
    if base in SCORE_METRICS:
        return True
    if mode == "auto":
        raise UserInputError(f"monitor {monitor!r} is neither a loss (minimised) nor a known score "
                             f"({', '.join(SCORE_METRICS)}; maximised): set monitor_mode to max or min")
    return mode == "max"


@dataclass
class TrainConfig:
    """Everything the :class:`~bioattn.training.Trainer` needs besides the model and the data.

    ``batch_size`` is the global number of samples per optimizer step: it is split over
    ``world_size`` ranks and ``grad_accum`` micro-batches, so the optimisation does not depend on
    how many processes run it (a batch larger than the training set is reduced to it, with a message).
    ``monitor``: the evaluation metric that selects the kept weights; a loss is minimised and a score maximised
    whatever ``monitor_mode`` says (see :func:`monitor_maximizes`); ties are broken by the evaluation loss, then by
    the later evaluation. ``warmup_steps`` is capped at :data:`~bioattn.training.schedules.WARMUP_FRACTION` of the
    run's optimizer steps. ``min_steps``: a run with fewer optimizer steps than this over ``max_epochs`` trains
    more epochs until it has them (small data sets; 0: never). ``min_batches_per_epoch``: a training set smaller than
    this many batches gets a smaller batch, so an epoch has that many optimizer steps (0: never). ``device``: ``auto`` (the GPU when there is one), ``cpu`` or ``cuda``.
    ``attention_backend``: the attention kernel of every bioattn block during training and evaluation (see
    :func:`bioattn.attention.set_backend`); ``auto``: the process-wide choice, except ``math`` for
    ``precision="bf16"`` on a CPU (torch's fused CPU attention backward is slow in bf16). ``ema_decay``: evaluate,
    select and keep an exponential moving average of the weights instead of the weights themselves (see
    :func:`~bioattn.training.averaging.weight_average`); ``None``: none. ``deterministic``: on a GPU, deterministic
    kernels and the math attention kernel, so two runs of one seed match bit for bit as they do on a CPU (slower;
    see :mod:`bioattn.training.determinism`).
    """

    max_epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    schedule: str = "warmup_cosine"
    warmup_steps: int = 0
    milestones: tuple[int, ...] = ()
    gamma: float = 0.1
    grad_clip: float | None = 1.0
    grad_accum: int = 1
    precision: str = "fp32"
    max_minutes: float | None = None
    patience: int | None = None
    monitor: str = "loss"
    monitor_mode: str = "auto"
    eval_every_steps: int | None = None
    max_steps_per_epoch: int | None = None
    seed: int = 0
    num_workers: int = 0
    checkpoint_every_steps: int | None = None
    find_unused_parameters: bool = False
    drop_last: bool = False
    device: str = "auto"
    attention_backend: str = "auto"
    ema_decay: float | None = None
    deterministic: bool = False
    min_steps: int = 0
    min_batches_per_epoch: int = 0

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            setattr(self, f.name, _coerce(f.name, getattr(self, f.name), hints[f.name]))
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("schedule", self.schedule, SCHEDULES)
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("monitor_mode", self.monitor_mode, MONITOR_MODES)
        _check_choice("attention_backend", self.attention_backend, BACKENDS)
        resolve_device(self.device)  # an unknown name, or cuda without a GPU, fails here, before any file is written
        for name in ("max_epochs", "batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise UserInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("patience", "eval_every_steps", "max_steps_per_epoch", "checkpoint_every_steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserInputError(f"{name} must be >= 1 or unset, got {value}")
        if self.lr <= 0:
            raise UserInputError(f"lr must be > 0, got {self.lr}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise UserInputError(f"max_minutes must be > 0 or unset, got {self.max_minutes}")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise UserInputError(f"grad_clip must be > 0 or unset, got {self.grad_clip}")
        if self.ema_decay is not None and not 0 < self.ema_decay < 1:
            raise UserInputError(f"ema_decay must be between 0 and 1 (exclusive) or unset, got {self.ema_decay}")
        if min(self.warmup_steps, self.num_workers, self.min_steps, self.min_batches_per_epoch) < 0:
            raise UserInputError("warmup_steps, num_workers, min_steps and min_batches_per_epoch must be >= 0")
        monitor_maximizes(self.monitor, self.monitor_mode)  # an unknown metric without a direction fails here

    @property
    def maximize(self) -> bool:
        """Whether a larger ``monitor`` value is better."""
        return monitor_maximizes(self.monitor, self.monitor_mode)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable view (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise UserInputError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Convert YAML/CLI values to the field's type (YAML reads ``1e-3`` as a string, lists as lists)."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if value is None:
        if optional:
            return None
        raise UserInputError(f"{name} may not be empty")
    base = next((a for a in args if a is not type(None)), hint) if isinstance(hint, types.UnionType) else hint
    origin = typing.get_origin(base)
    try:
        if origin is tuple:
            items = value if isinstance(value, (list, tuple)) else [value]
            return tuple(int(v) for v in items)
        if base is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
                    raise ValueError(value)
                return value.lower() in ("true", "yes", "1")
            return bool(value)
        if base is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if base is float:
            return float(value)
        if base is str:
            return str(value)
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"{name}: cannot read {value!r} as {getattr(base, '__name__', base)}") from exc
    return value


# flag -> TrainConfig field for the flags add_training_args defines (only these, so recipes can add others).
_FLAG_FIELDS = {
    "max_minutes": "max_minutes",
    "epochs": "max_epochs",
    "batch_size": "batch_size",
    "lr": "lr",
    "seed": "seed",
    "precision": "precision",
    "grad_accum": "grad_accum",
    "attention_backend": "attention_backend",
    "ema_decay": "ema_decay",
    "deterministic": "deterministic",
    "min_steps": "min_steps",
}
_FIELD_FLAGS = {v: k for k, v in _FLAG_FIELDS.items()}


def add_training_args(parser: argparse.ArgumentParser, defaults: TrainConfig) -> None:
    """Add ``--config --max-minutes --epochs --batch-size --lr --seed --precision --attention-backend --grad-accum
    --ema-decay --deterministic --min-steps --resume --overwrite``.

    Flag defaults come from ``defaults``. ``--config FILE.yaml`` is read before the flags are parsed,
    so flags given on the command line always win over the file, wherever they appear.
    """
    group = parser.add_argument_group("training")
    group.add_argument("--config", type=Path, default=None, metavar="FILE.yaml",
                       help="YAML file of option values (keys = option names); command-line flags override it")
    group.add_argument("--max-minutes", type=float, default=defaults.max_minutes,
                       help="wall-clock budget for training in this invocation (default: %(default)s)")
    group.add_argument("--epochs", type=int, default=defaults.max_epochs, help="maximum epochs (default: %(default)s)")
    group.add_argument("--batch-size", type=int, default=defaults.batch_size,
                       help="global samples per optimizer step, split over processes and --grad-accum (default: %(default)s)")
    group.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate (default: %(default)s)")
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
                            "per step (e.g. 0.999); none: the weights themselves (default: %(default)s)")
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
    """A flag value that is a number or ``none``."""
    if text.lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None


def _read_config_file_before_parsing(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` load ``--config FILE.yaml`` into its defaults before parsing the other flags."""
    original = parser.parse_known_args

    def parse_known_args(args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None):
        argv = list(sys.argv[1:] if args is None else args)
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config", type=Path, default=None)
        config_path = pre.parse_known_args(argv)[0].config
        if config_path is not None:
            # Values already on the namespace act as defaults: flags given on the command line replace them.
            namespace = namespace if namespace is not None else argparse.Namespace()
            for dest, value in _config_file_defaults(config_path, parser).items():
                if not hasattr(namespace, dest):
                    setattr(namespace, dest, value)
        return original(argv, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def load_yaml_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping of option values; keys may use dashes or underscores."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read config file ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path}: not valid YAML ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a mapping of option: value, got {type(data).__name__}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


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


def config_from_args(args: argparse.Namespace, defaults: TrainConfig) -> TrainConfig:
    """Build the run's :class:`TrainConfig`: ``defaults``, then the YAML file, then command-line flags.

    (The YAML file and the flags are already merged into ``args`` by the parser from
    :func:`add_training_args`; fields without a flag are taken from ``args`` when the file set them.)
    """
    values = dataclasses.asdict(defaults)
    for name in values:
        dest = _FIELD_FLAGS.get(name, name)
        if hasattr(args, dest):
            values[name] = getattr(args, dest)
    return TrainConfig(**values)
