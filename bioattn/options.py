"""Command-line flags written once, on the options dataclasses that take them (no argparse here)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

#: The metadata key of a field's :class:`Flag`.
FLAG = "bioattn.flag"

#: The metadata key of a field that is every training flag at once (:class:`TrainingFlags`).
TRAINING = "bioattn.training_flags"

#: The flag actions besides taking a value: switches, a repeatable flag, and ``--x`` / ``--no-x``.
ACTIONS = ("store_true", "store_false", "append", "boolean")


@dataclass(frozen=True)
class Flag:
    """How one field is spelled on the command line (argparse's keywords, plus groups)."""

    names: tuple[str, ...]
    help: str | None = None
    group: str | None = None
    exclusive: str | None = None
    required: bool = False
    metavar: str | tuple[str, ...] | None = None
    choices: Sequence[Any] | None = None
    nargs: int | str | None = None
    const: Any = None
    type: Callable[[str], Any] | None = None
    action: str | None = None
    hidden: bool = False
    absent: Any = None

    def __post_init__(self) -> None:
        if self.action is not None and self.action not in ACTIONS:
            raise ValueError(f"unknown flag action {self.action!r}; known: {', '.join(ACTIONS)}")


def flag(*names: str, default: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A dataclass field that is the flag ``names`` (``how``: the :class:`Flag` fields)."""
    return dataclasses.field(default=default, metadata={FLAG: Flag(names, **how)})


@dataclass(frozen=True)
class TrainingFlags:
    """The training flags as one field: the :class:`~bioattn.training.TrainConfig` fields they set."""

    defaults: Any
    epochs_help: str | None = None
    lr_help: str | None = None
    unset: tuple[str, ...] = ()


def training_flags(defaults: Any, **how: Any) -> Any:
    """A dataclass field that is the training flags (:class:`TrainingFlags`)."""
    return dataclasses.field(default_factory=dict, metadata={TRAINING: TrainingFlags(defaults, **how)})


def flags_of(options: Any) -> dict[str, Flag]:
    """``{field name: Flag}`` of the dataclass (or instance) ``options``, in field order."""
    return {f.name: f.metadata[FLAG] for f in dataclasses.fields(options) if FLAG in f.metadata}


def values(options: Any, *names: str) -> dict[str, Any]:
    """The fields of the dataclass instance ``options`` as keywords (``names``: only these)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if not names or f.name in names}
