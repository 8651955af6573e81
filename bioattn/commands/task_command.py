"""The one command of every ``bioattn VERB TASK``, built from its command dataclass."""
from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import inspect
import types
import typing
from pathlib import Path
from typing import Any, Callable

from bioattn.options import FLAG, TRAINING, Flag, TrainingFlags

#: Annotation → the type a flag's values are parsed as (others: text).
_PARSED = (int, float, Path)


def command_class(target: str) -> type:
    """The class ``"module:Class"`` names."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def description(command: type) -> str:
    """The command's ``--help`` description: its class docstring, dedented."""
    return inspect.cleandoc(command.__doc__ or "")


def add_arguments(parser: argparse.ArgumentParser, command: type) -> None:
    """Add one flag per :func:`~bioattn.options.flag` field of ``command``, in field order, in its groups."""
    hints = typing.get_type_hints(command)
    groups: dict[str | None, Any] = {None: parser}
    exclusive: dict[tuple[str | None, str], argparse._MutuallyExclusiveGroup] = {}
    for field in dataclasses.fields(command):
        training: TrainingFlags | None = field.metadata.get(TRAINING)
        if training is not None:
            from bioattn.commands.training_args import add_training_args  # torch: only for a training command
            add_training_args(parser, training.defaults, epochs_help=training.epochs_help, lr_help=training.lr_help)
            parser.set_defaults(**dict.fromkeys(training.unset))
        spec: Flag | None = field.metadata.get(FLAG)
        if spec is None:
            continue
        if spec.group not in groups:
            groups[spec.group] = parser.add_argument_group(spec.group)
        container = groups[spec.group]
        if spec.exclusive is not None:
            key = (spec.group, spec.exclusive)
            if key not in exclusive:
                exclusive[key] = container.add_mutually_exclusive_group(required=spec.required)
            container = exclusive[key]
        container.add_argument(*spec.names, **_argument(field, spec, hints[field.name]))


def _argument(field: dataclasses.Field, spec: Flag, annotation: Any) -> dict[str, Any]:
    default = None if field.default is dataclasses.MISSING else field.default
    action = spec.action or ("store_true" if annotation is bool and default is False else None)
    kwargs: dict[str, Any] = {"dest": field.name, "help": argparse.SUPPRESS if spec.hidden else spec.help}
    if action == "boolean":
        kwargs["action"] = argparse.BooleanOptionalAction
    elif action is not None:
        kwargs["action"] = action
    kwargs["default"] = spec.absent if action == "append" else default  # argparse appends to a copy of its own
    if spec.required and spec.exclusive is None:
        kwargs["required"] = True
    if action in ("store_true", "store_false"):
        return kwargs
    parse = spec.type or _parsed_type(annotation)
    for name, value in (("metavar", spec.metavar), ("choices", spec.choices), ("nargs", spec.nargs),
                        ("const", spec.const), ("type", None if parse is None else _reported(parse))):
        if value is not None:
            kwargs[name] = value
    return kwargs


def _parsed_type(annotation: Any) -> type | None:
    """``int``, ``float`` or ``Path`` for a field of that type (optional, or a tuple of them), else ``None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _parsed_type(kinds[0]) if len(kinds) == 1 else None
    if typing.get_origin(annotation) is tuple:
        kinds = {a for a in typing.get_args(annotation) if a is not Ellipsis}
        return _parsed_type(kinds.pop()) if len(kinds) == 1 else None
    return annotation if annotation in _PARSED else None


def _reported(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, whose :class:`ValueError` message argparse reports as it is."""
    if parse in _PARSED:
        return parse

    @functools.wraps(parse)
    def parse_reported(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse_reported


def options_from_args(command: type, args: argparse.Namespace) -> Any:
    """The ``command`` dataclass of the parsed ``args``."""
    found: dict[str, Any] = {}
    trains = any(TRAINING in field.metadata for field in dataclasses.fields(command))
    for field in dataclasses.fields(command):
        spec: Flag | None = field.metadata.get(FLAG)
        if TRAINING in field.metadata:
            from bioattn.commands.training_args import training_values
            found[field.name] = training_values(args)
        elif trains and spec is None and field.name in ("resume", "overwrite"):
            found[field.name] = getattr(args, field.name)
        if spec is None:
            continue
        value = getattr(args, field.name)
        if spec.action == "append" and value == spec.absent:
            value = field.default if field.default is not dataclasses.MISSING else None
        if isinstance(value, list) and (spec.nargs is not None or spec.action == "append"):
            value = tuple(value)
        found[field.name] = value
    return command(**found)


def run(command: type, args: argparse.Namespace) -> int:
    """Run ``command`` on the parsed ``args``: its exit status."""
    return int(options_from_args(command, args).run() or 0)
