"""Command-line flags written once, on the options dataclasses that take them (pure data: no argparse here).

A field whose metadata holds :func:`flag` is one flag of ``bioattn VERB TASK``: the flag's spelling, help,
argument group and mutually exclusive group sit beside the field's type and default, and the generic builder
:mod:`bioattn.commands.task_command` turns the dataclass into the command's parser (the field's name is the
parsed value's name; its default is the flag's; a ``bool`` field defaulting to ``False`` is a switch; an ``int``,
``float`` or ``Path`` field, optional or a tuple of them, parses its values as that type). A command is such a
dataclass whose docstring is the command's ``--help`` description and whose ``run()`` does the work.

A ``type`` callable reports a bad value by raising :class:`ValueError` with the message users read.
"""
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
    """How one field is spelled on the command line. ``names``: its option strings; ``group``: the title of its
    argument group in ``--help`` (``None``: the command's options); ``exclusive``: the name of a mutually
    exclusive group (within ``group``) it belongs to, which ``required`` then makes required; ``action``: one of
    :data:`ACTIONS` (``None``: takes a value); ``help``, ``metavar``, ``choices``, ``nargs``, ``const``, ``type`` as
    argparse takes them; ``hidden``: left out of ``--help``; ``absent``: what a repeatable (``append``) flag parses
    to when it is not given (the field then takes its own default)."""

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
    """A dataclass field that is the flag ``names`` (``how``: the :class:`Flag` fields); without ``default`` the
    field has none (a required flag)."""
    return dataclasses.field(default=default, metadata={FLAG: Flag(names, **how)})


@dataclass(frozen=True)
class TrainingFlags:
    """The training flags (``--config FILE.yaml --max-minutes --epochs --batch-size --lr --seed ... --resume
    --overwrite``, the group ``training``) as one field: its value is the mapping of the
    :class:`~bioattn.training.TrainConfig` fields they set (the task makes its config from it with
    :func:`~bioattn.training.config.config_from_values`); the command's ``resume`` and ``overwrite`` fields take
    those two flags. ``defaults``: the TrainConfig the flags' defaults come from; ``epochs_help`` / ``lr_help``
    replace those flags' help; ``unset``: flags (by name, e.g. ``"epochs"``) that default to ``None``, the task's
    default depending on other flags."""

    defaults: Any
    epochs_help: str | None = None
    lr_help: str | None = None
    unset: tuple[str, ...] = ()


def training_flags(defaults: Any, **how: Any) -> Any:
    """A dataclass field that is the training flags (:class:`TrainingFlags`; ``how``: its other fields)."""
    return dataclasses.field(default_factory=dict, metadata={TRAINING: TrainingFlags(defaults, **how)})


def flags_of(options: Any) -> dict[str, Flag]:
    """``{field name: Flag}`` of the dataclass (or instance) ``options``, in field order."""
    return {f.name: f.metadata[FLAG] for f in dataclasses.fields(options) if FLAG in f.metadata}


def values(options: Any, *names: str) -> dict[str, Any]:
    """The fields of the dataclass instance ``options`` as keywords (``names``: only these)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if not names or f.name in names}
