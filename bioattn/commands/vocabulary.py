"""One word for one thing across every ``bioattn`` subcommand, and the older spellings still accepted beside it.

Each concept has one canonical flag (:data:`CANONICAL`). An old spelling is added with :func:`add_alias`: it is
hidden from ``--help``, sets what the canonical flag sets, and prints one ``deprecated:`` line on stderr naming
what replaces it.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

#: concept -> the canonical flag every subcommand uses for it.
CANONICAL: dict[str, str] = {
    "trained model (a shipped name or a run directory)": "--model",
    "file read": "--input",
    "one output file": "--output",
    "output directory": "--out",
    "model width": "--embed-dim",
    "attention heads": "--heads",
    "longest input the model accepts": "--max-length",
    "strand(s) scored": "--strand",
    "test-time augmentation": "--tta",
    "CT model input size": "--size",
    "how a CT volume reaches --size": "--fit",
    "CT intensity window": "--intensity-window",
    "DNA scan window length": "--window",
    "row limit": "--max-rows",
    "attribution method of an explanation": "--method",
    "how contacts are predicted from an alignment": "--contact-method",
}

_UNSET = object()


class DeprecatedAlias(argparse.Action):
    """An old spelling of ``canonical``: warns on stderr, then does what the canonical flag does (or, with
    ``value``, sets the canonical flag's destination to ``value``, e.g. ``--flip-tta`` → ``--tta flips``)."""

    def __init__(self, option_strings, dest, *, canonical: argparse.Action, replacement: str, value: Any = _UNSET,
                 also: dict[str, Any] | None = None, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.canonical = canonical
        self.replacement = replacement
        self.value = value
        self.also = dict(also or {})

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"deprecated: {option_string} will be removed in the next release; use {self.replacement}",
              file=sys.stderr)
        if self.value is not _UNSET:
            setattr(namespace, self.canonical.dest, self.value)
        else:
            self.canonical(parser, namespace, values, self.canonical.option_strings[0])
        for dest, value in self.also.items():
            setattr(namespace, dest, value)


def add_alias(container: Any, canonical: argparse.Action, *old: str, value: Any = _UNSET,
              replacement: str | None = None, also: dict[str, Any] | None = None) -> argparse.Action:
    """Add ``old`` option strings to ``container`` (a parser, group or mutually exclusive group) as a deprecated
    spelling of ``canonical``; ``value`` makes the alias a switch that sets ``canonical``'s destination to ``value``.
    ``replacement``: what the warning suggests (default: the canonical flag, with ``value`` when given); ``also``:
    further destinations the old spelling sets."""
    flag = canonical.option_strings[0]
    if replacement is None:
        replacement = flag if value is _UNSET else f"{flag} {value}"
    if value is _UNSET:
        shape = {"nargs": canonical.nargs, "type": canonical.type, "choices": canonical.choices,
                 "metavar": canonical.metavar, "const": canonical.const}
    else:
        shape = {"nargs": 0}
    return container.add_argument(*old, dest=canonical.dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                                  action=DeprecatedAlias, canonical=canonical, replacement=replacement, value=value, also=also,
                                  **shape)
