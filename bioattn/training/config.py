"""Training options: :class:`TrainConfig` and reading a YAML file of option values."""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from bioattn.errors import UserInputError
from bioattn.distributed import resolve_device

OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("warmup_cosine", "multistep", "constant")
PRECISIONS = ("fp32", "bf16", "fp16")
MONITOR_MODES = ("max", "min", "auto")
#: Metric names (after any split prefix such as ``dev_`` / ``val_``) that are scores: larger is better.
SCORE_METRICS = ("mcc", "accuracy", "f1", "auroc", "auprc", "precision", "recall", "P@L", "P@L/2", "P@L/5")


def monitor_maximizes(monitor: str, mode: str = "auto") -> bool:
    """Whether a larger ``monitor`` is better: losses are minimised, :data:`SCORE_METRICS` maximised."""
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
    """Everything the :class:`~bioattn.training.Trainer` needs besides the model and the data."""

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
        for name, choices in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES), ("precision", PRECISIONS),
                              ("monitor_mode", MONITOR_MODES)):
            if getattr(self, name) not in choices:
                raise UserInputError(f"{name} must be one of {', '.join(choices)}; got {getattr(self, name)!r}")
        resolve_device(self.device)
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
        monitor_maximizes(self.monitor, self.monitor_mode)

    @property
    def maximize(self) -> bool:
        """Whether a larger ``monitor`` value is better."""
        return monitor_maximizes(self.monitor, self.monitor_mode)

    def small_set_batch(self, samples: int, per_step: int = 1) -> int | None:
        """The smaller batch giving ``min_batches_per_epoch`` steps over ``samples``, or ``None``."""
        wanted = self.min_batches_per_epoch
        if wanted and samples < wanted * self.batch_size and samples // wanted >= per_step:
            return samples // wanted // per_step * per_step
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable view (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Convert YAML/CLI values to the field's type."""
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


def config_from_values(values: Mapping[str, Any], defaults: TrainConfig, **unset: Any) -> TrainConfig:
    """``defaults`` with the fields in ``values`` replaced; ``unset``: values for the fields left ``None``."""
    found = {**dataclasses.asdict(defaults), **{k: v for k, v in values.items() if k in _FIELDS}}
    for name, value in unset.items():
        if name not in found:
            raise TypeError(f"TrainConfig has no field {name!r}")
        if found[name] is None:
            found[name] = value
    return TrainConfig(**found)


_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
