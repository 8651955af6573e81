"""One CLI vocabulary: every subcommand of ``bioattn`` spells each concept one way, no canonical flag means two
things, and the old spellings (removed in 0.5.0) are argparse's usual unrecognized-argument error."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from bioattn.cli import build_parser
from bioattn.commands.vocabulary import CANONICAL

#: old spelling (accepted until 0.5.0) -> what replaced it.
OLD_SPELLINGS = {
    "--run": "--model", "--msa": "--input", "--to": "--out", "--d-model": "--embed-dim",
    "--rc-average": "--strand", "--no-rc-average": "--strand", "--single-strand": "--strand",
    "--flip-tta": "--tta", "--no-flip-tta": "--tta", "--max-seqs": "--max-rows", "--max-sequences": "--max-rows",
    "--resize": "--size", "--window": "--intensity-window", "--method": "--contact-method",
}
#: old spellings that stay canonical elsewhere with their one meaning: --window the DNA scan length (CT's is
#: --intensity-window), --method the attribution method of explain (predict msa's contact method is --contact-method).
STILL_CANONICAL = {"--window", "--method"}
CT_COMMANDS = ("train ct", "predict ct", "explain ct")
TRAINING_ONLY = {"--epochs", "--lr", "--config", "--resume", "--grad-accum", "--ema-decay",
                 "--deterministic", "--attention-backend", "--seeds", "--cv"}


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, by its words (``"predict ct"``)."""
    found = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers and words:
            found[" ".join(words)] = parser
        for action in subparsers:
            for name, child in action.choices.items():
                walk(child, [*words, name])

    walk(build_parser(), [])
    return found


COMMANDS = _commands()


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"}


def _shape(action: argparse.Action) -> tuple:
    """What a flag takes: its arity and its value type (paths and text count as one)."""
    kind = action.type if action.type not in (None, str, Path) else "text"
    return (action.nargs, getattr(kind, "__name__", kind))


def test_every_subcommand_is_walked() -> None:
    assert {"train promoter", "train ct", "train msa", "predict promoter", "predict ct", "predict msa",
            "explain promoter", "explain ct", "explain msa", "pretrain msa", "data fetch", "models"} <= set(COMMANDS)


def test_each_concept_has_one_canonical_spelling() -> None:
    canonical = {where: _flags(parser) for where, parser in COMMANDS.items()}
    used = {flag: sorted(where for where, flags in canonical.items() if flag in flags) for flag in CANONICAL.values()}
    for old in set(OLD_SPELLINGS) - STILL_CANONICAL:
        assert not [where for where, flags in canonical.items() if old in flags], f"{old} is still a canonical flag"
    assert not [where for where in CT_COMMANDS if "--window" in canonical[where]], "CT's intensity window is --intensity-window"
    assert sorted(where for where, flags in canonical.items() if "--method" in flags) == [
        "explain activity", "explain ct", "explain msa", "explain promoter"]
    assert used["--contact-method"] == ["predict msa"]
    # The concepts are spelt the canonical way where they occur.
    for where in ("predict promoter", "predict ct", "predict msa", "explain promoter", "explain ct", "explain msa"):
        assert where in used["--model"]
    for where in ("train promoter", "train ct", "train msa", "pretrain msa"):
        assert where in used["--embed-dim"]
    assert set(used["--tta"]) == {"train ct", "predict ct", "explain ct"}
    assert {"train ct", "predict ct", "explain ct"} <= set(used["--size"]) and {"train ct", "predict ct", "explain ct"} <= set(used["--fit"])
    assert {"train promoter", "predict promoter", "explain promoter"} <= set(used["--strand"])
    assert {"explain promoter", "explain msa", "train msa", "predict msa", "pretrain msa"} <= set(used["--max-rows"])
    assert "data fetch" in used["--out"]


def test_no_canonical_flag_means_two_things() -> None:
    shapes: dict[str, set] = {}
    for where, parser in COMMANDS.items():
        for flag, action in _flags(parser).items():
            shapes.setdefault(flag, set()).add(_shape(action))
    assert {flag: sorted(map(str, s)) for flag, s in shapes.items() if len(s) > 1} == {}
    ct = {_shape(_flags(COMMANDS[where])[flag]) for where in CT_COMMANDS for flag in ("--size", "--fit")}
    assert len(ct) == 2  # --size and --fit: the same arity and type in train, predict and explain ct
    tta = {tuple(_flags(COMMANDS[where])["--tta"].choices) for where in ("train ct", "predict ct", "explain ct")}
    assert tta == {("none", "flips")}


def test_a_flag_with_choices_offers_the_same_kind_of_thing_everywhere() -> None:
    """A flag name used by several subcommands with a fixed set of values shares values between them (one meaning:
    the attribution ``--method`` of explain is not predict msa's contact method, which is ``--contact-method``)."""
    choices: dict[str, dict[str, set]] = {}
    for where, parser in COMMANDS.items():
        for flag, action in _flags(parser).items():
            if action.choices:
                choices.setdefault(flag, {})[where] = set(map(str, action.choices))
    for flag, by_command in choices.items():
        for one, first in by_command.items():
            for other, second in by_command.items():
                assert first & second, f"{flag} means different things in {one} ({sorted(first)}) and {other} ({sorted(second)})"
    assert {"attention", "potts", "combined", "esm-msa"} <= choices["--contact-method"]["predict msa"]


def test_predict_commands_take_no_training_flags() -> None:
    for where in ("predict promoter", "predict ct", "predict msa"):
        assert not TRAINING_ONLY & set(_flags(COMMANDS[where])), where


#: old spelling -> the commands that took it until 0.5.0.
OLD_SPELLING_COMMANDS = {
    "--run": ("predict promoter", "predict ct", "predict msa", "predict activity", "predict variants",
              "explain promoter", "explain ct", "explain msa", "explain activity"),
    "--msa": ("train msa", "predict msa"), "--to": ("data fetch",), "--d-model": ("train promoter", "train ct"),
    "--rc-average": ("train promoter",), "--no-rc-average": ("train promoter",), "--single-strand": ("predict promoter",),
    "--flip-tta": CT_COMMANDS, "--no-flip-tta": CT_COMMANDS, "--resize": ("predict ct", "explain ct"),
    "--max-seqs": ("explain promoter", "train msa", "predict msa", "pretrain msa"),
    "--max-sequences": ("explain promoter", "train msa", "predict msa", "pretrain msa"),
    "--window": CT_COMMANDS, "--method": ("predict msa",),
}


@pytest.mark.parametrize("old", sorted(OLD_SPELLING_COMMANDS))
def test_an_old_spelling_is_an_unrecognized_argument(old: str) -> None:
    assert set(OLD_SPELLING_COMMANDS) == set(OLD_SPELLINGS)
    for where in OLD_SPELLING_COMMANDS[old]:
        parser = COMMANDS[where]
        assert old not in parser._option_string_actions, f"{where}: {old}"
        found = parser._parse_optional(old)  # (action, ...); a list of them on newer Pythons
        action = found[0][0] if isinstance(found, list) else found[0]
        assert action is None, f"{where}: {old} abbreviates {action.option_strings}"  # a prefix of no other flag


def test_train_ct_model_choices_are_the_models_own() -> None:
    """--stem and --pool offer exactly what HybridCT3D accepts: a layout added to the model is a flag value too."""
    from bioattn.models.hybrid_ct import POOLS, STEMS

    flags = _flags(COMMANDS["train ct"])
    assert tuple(flags["--stem"].choices) == STEMS and tuple(flags["--pool"].choices) == POOLS
