"""The generic builder turns an options dataclass into a parser as its field metadata says: spellings, groups,
mutually exclusive groups, switches, repeatable flags, parsed types and bad values named in one argparse error."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from bioattn.commands import task_command
from bioattn.options import flag


def _even(text: str) -> int:
    if int(text) % 2:
        raise ValueError(f"expected an even number, got {text!r}")
    return int(text)


@dataclass(frozen=True, kw_only=True)
class Toy:
    """Toy command.

        toy --train a.tsv --out DIR

    Writes DIR.
    """

    train: tuple[Path, ...] = flag("--train", default=(), action="append", group="data", exclusive="source",
                                   required=True, help="a file")
    dataset: str | None = flag("--dataset", default=None, choices=["one"], group="data", exclusive="source",
                               help="a bundled one")
    rows: int | None = flag("--max-rows", default=None, group="data", help="rows (default: all)")
    seeds: tuple[int, ...] | None = flag("--seeds", default=None, nargs="+", help="seeds")
    even: int = flag("--even", default=2, type=_even, help="an even number (default: %(default)s)")
    quick: bool = flag("--quick", default=False, help="smoke run")
    keep: bool = flag("--keep", default=True, action="boolean", help="keep (default: %(default)s)")
    out: Path = flag("--out", required=True, help="where")

    def run(self) -> int:
        return 7 if self.quick else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", description=task_command.description(Toy))
    task_command.add_arguments(parser, Toy)
    return parser


def test_fields_become_flags_in_their_groups() -> None:
    parser = _parser()
    text = parser.format_help()
    assert "(--train TRAIN | --dataset {one})" in text and "--out OUT" in text
    assert "\ndata:\n" in text and "an even number (default: 2)" in text and "--keep, --no-keep" in text
    assert parser.description.startswith("Toy command.\n\n    toy --train")  # the docstring, dedented


def test_parsed_values_make_the_dataclass(tmp_path) -> None:
    args = _parser().parse_args(["--train", "a", "--train", "b", "--max-rows", "5", "--seeds", "1", "2",
                                 "--no-keep", "--quick", "--out", str(tmp_path)])
    toy = task_command.options_from_args(Toy, args)
    assert toy == Toy(train=(Path("a"), Path("b")), rows=5, seeds=(1, 2), keep=False, quick=True, out=tmp_path)
    assert task_command.run(Toy, args) == 7
    defaults = task_command.options_from_args(Toy, _parser().parse_args(["--dataset", "one", "--out", "x"]))
    assert (defaults.train, defaults.seeds, defaults.even, defaults.keep) == ((), None, 2, True)


@pytest.mark.parametrize("argv, message", [
    (["--out", "x"], "one of the arguments --train --dataset is required"),
    (["--dataset", "one", "--train", "a", "--out", "x"], "not allowed with argument"),
    (["--dataset", "one", "--even", "3", "--out", "x"], "argument --even: expected an even number, got '3'"),
    (["--dataset", "one", "--max-rows", "many", "--out", "x"], "argument --max-rows: invalid int value: 'many'"),
])
def test_bad_input_is_one_argparse_error(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        _parser().parse_args(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


@dataclass(frozen=True, kw_only=True)
class Marked:
    """Marked command."""

    marks: tuple[str, ...] = flag("--mark", default=(), action="append", absent=[], help="a mark; repeat")
    cap: int | None = flag("--cap", default=None, hidden=True, help="for tests")


def test_a_hidden_flag_parses_and_a_repeatable_flag_keeps_its_absent_value() -> None:
    parser = argparse.ArgumentParser(prog="marked")
    task_command.add_arguments(parser, Marked)
    assert "--cap" not in parser.format_help() and "--mark" in parser.format_help()
    assert parser.parse_args([]).marks == []  # what argparse holds when the flag is not given
    assert task_command.options_from_args(Marked, parser.parse_args([])) == Marked()
    assert task_command.options_from_args(Marked, parser.parse_args(["--mark", "a", "--mark", "b", "--cap", "3"])) \
        == Marked(marks=("a", "b"), cap=3)
