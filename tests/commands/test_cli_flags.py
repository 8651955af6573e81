"""The flags of every ``bioattn`` subcommand stay what users know: each command's options (spelling, arity,
choices, metavar, default, required, argument group, mutually exclusive group) match the committed snapshot
``cli_flags.json``. A deliberate change to the command line regenerates it:
``python -m tests.commands.test_cli_flags``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bioattn.cli import build_parser

SNAPSHOT = Path(__file__).with_name("cli_flags.json")


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    found = {}
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers and words:
        found[" ".join(words)] = parser
    for action in subparsers:
        for name, child in action.choices.items():
            found.update(_commands(child, (*words, name)))
    return found


def _flag(action: argparse.Action, group: str | None, exclusive: list | None) -> dict:
    return {"nargs": action.nargs, "takes_value": action.nargs != 0, "choices": None if action.choices is None else
            [str(c) for c in action.choices], "metavar": action.metavar if not isinstance(action.metavar, tuple)
            else list(action.metavar), "default": repr(action.default), "required": action.required,
            "group": group, "exclusive": exclusive}


def flags(parser: argparse.ArgumentParser) -> dict[str, dict]:
    """``{option string: what it takes}`` of one command's parser (``--help`` left out)."""
    groups = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    exclusive = {id(a): [min(o for o in g._group_actions[0].option_strings), g.required]
                 for g in parser._mutually_exclusive_groups for a in g._group_actions}
    return {option: _flag(action, groups.get(id(action)), exclusive.get(id(action)))
            for action in parser._actions if not isinstance(action, argparse._HelpAction)
            for option in action.option_strings}


def snapshot() -> dict[str, dict[str, dict]]:
    return {name: flags(parser) for name, parser in sorted(_commands(build_parser()).items())}


def test_every_command_keeps_its_flags() -> None:
    expected = json.loads(SNAPSHOT.read_text())
    found = snapshot()
    assert sorted(found) == sorted(expected)
    for name in expected:
        assert found[name] == expected[name], name


def test_the_snapshot_sees_a_changed_flag() -> None:
    """A parser with one flag's choices changed differs from its snapshot (a comparison that missed it would pass
    on a changed command line)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--strand", choices=["forward", "both"], default="forward")
    before = flags(parser)
    parser._actions[-1].choices = ["forward"]
    assert flags(parser) != before


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
