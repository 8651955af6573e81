"""One CLI vocabulary: every subcommand of ``bioattn`` spells each concept one way, no canonical flag means two
things, and every old spelling still works for this release, warns once on stderr and names its replacement."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from bioattn.cli import build_parser, main as cli_main
from bioattn.commands.vocabulary import CANONICAL, DeprecatedAlias

#: old spelling -> what replaces it (the aliases this release keeps working).
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


def _flags(parser: argparse.ArgumentParser, *, deprecated: bool) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings
            if isinstance(action, DeprecatedAlias) == deprecated and option.startswith("--") and option != "--help"}


def _shape(action: argparse.Action) -> tuple:
    """What a flag takes: its arity and its value type (paths and text count as one)."""
    kind = action.type if action.type not in (None, str, Path) else "text"
    return (action.nargs, getattr(kind, "__name__", kind))


def test_every_subcommand_is_walked() -> None:
    assert {"train promoter", "train ct", "train msa", "predict promoter", "predict ct", "predict msa",
            "explain promoter", "explain ct", "explain msa", "pretrain msa", "data fetch", "models"} <= set(COMMANDS)


def test_each_concept_has_one_canonical_spelling() -> None:
    canonical = {where: _flags(parser, deprecated=False) for where, parser in COMMANDS.items()}
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
        for flag, action in _flags(parser, deprecated=False).items():
            shapes.setdefault(flag, set()).add(_shape(action))
    assert {flag: sorted(map(str, s)) for flag, s in shapes.items() if len(s) > 1} == {}
    ct = {_shape(_flags(COMMANDS[where], deprecated=False)[flag]) for where in CT_COMMANDS for flag in ("--size", "--fit")}
    assert len(ct) == 2  # --size and --fit: the same arity and type in train, predict and explain ct
    tta = {tuple(_flags(COMMANDS[where], deprecated=False)["--tta"].choices) for where in ("train ct", "predict ct", "explain ct")}
    assert tta == {("none", "flips")}


def test_a_flag_with_choices_offers_the_same_kind_of_thing_everywhere() -> None:
    """A flag name used by several subcommands with a fixed set of values shares values between them (one meaning:
    the attribution ``--method`` of explain is not predict msa's contact method, which is ``--contact-method``)."""
    choices: dict[str, dict[str, set]] = {}
    for where, parser in COMMANDS.items():
        for flag, action in _flags(parser, deprecated=False).items():
            if action.choices:
                choices.setdefault(flag, {})[where] = set(map(str, action.choices))
    for flag, by_command in choices.items():
        for one, first in by_command.items():
            for other, second in by_command.items():
                assert first & second, f"{flag} means different things in {one} ({sorted(first)}) and {other} ({sorted(second)})"
    assert {"attention", "potts", "combined", "esm-msa"} <= choices["--contact-method"]["predict msa"]


def test_predict_msa_method_still_works_and_says_what_replaces_it(capsys) -> None:
    args = build_parser().parse_args(["predict", "msa", "--input", "a.a3m", "--out", "o", "--method", "attention"])
    assert args.method == "attention"
    assert "deprecated: --method will be removed in the next release; use --contact-method" in capsys.readouterr().err


def test_predict_commands_take_no_training_flags() -> None:
    for where in ("predict promoter", "predict ct", "predict msa"):
        assert not TRAINING_ONLY & set(_flags(COMMANDS[where], deprecated=False)), where


def _sample(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    one = str(action.choices[0]) if action.choices else "3"
    return [one] * (action.nargs if isinstance(action.nargs, int) else 1)


@pytest.mark.parametrize("where", sorted(COMMANDS))
def test_every_old_spelling_sets_what_its_replacement_sets_and_warns(where: str, capsys) -> None:
    parser = COMMANDS[where]
    canonical_actions = {id(a) for a in parser._actions if not isinstance(a, DeprecatedAlias)}
    for old, alias in _flags(parser, deprecated=True).items():
        assert OLD_SPELLINGS.get(old) == alias.canonical.option_strings[0], f"{where}: {old}"
        assert id(alias.canonical) in canonical_actions and alias.help == argparse.SUPPRESS
        values = parser._get_values(alias, _sample(alias))
        through_alias, directly = argparse.Namespace(), argparse.Namespace()
        alias(parser, through_alias, values, old)
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"deprecated: {old} will be removed") and alias.replacement in err[0]
        if alias.nargs == 0 and alias.canonical.choices:  # a switch that sets one of the canonical flag's values
            assert getattr(through_alias, alias.canonical.dest) in alias.canonical.choices
        else:
            alias.canonical(parser, directly, parser._get_values(alias.canonical, _sample(alias.canonical)))
            assert getattr(through_alias, alias.canonical.dest) == getattr(directly, alias.canonical.dest)


def test_every_old_spelling_is_covered() -> None:
    seen = {old for parser in COMMANDS.values() for old in _flags(parser, deprecated=True)}
    assert seen == set(OLD_SPELLINGS)


def test_old_spellings_still_run_a_command(tmp_path: Path, capsys) -> None:
    """``--run`` and ``--single-strand`` give what ``--model`` and ``--strand forward`` give, with the warnings."""
    from bioattn.models.promoter import PromoterClassifier

    torch.manual_seed(0)
    PromoterClassifier(max_len=32, embed_dim=16, num_heads=2, num_layers=1, dropout=0.0).eval().save_pretrained(tmp_path / "run")
    (tmp_path / "in.fa").write_text(">a\nACGTATAAAAGGCGCG\n>b\nTTGACATATAAAGCGC\n")
    common = ["predict", "promoter", "--input", str(tmp_path / "in.fa")]
    assert cli_main([*common, "--run", str(tmp_path / "run"), "--single-strand", "--output", str(tmp_path / "old.csv")]) == 0
    err = capsys.readouterr().err
    assert "deprecated: --run" in err and "use --model" in err and "use --strand forward" in err
    assert cli_main([*common, "--model", str(tmp_path / "run"), "--strand", "forward", "--output", str(tmp_path / "new.csv")]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert (tmp_path / "old.csv").read_text() == (tmp_path / "new.csv").read_text()


def test_train_ct_model_choices_are_the_models_own() -> None:
    """--stem and --pool offer exactly what HybridCT3D accepts: a layout added to the model is a flag value too."""
    from bioattn.models.hybrid_ct import POOLS, STEMS

    flags = _flags(COMMANDS["train ct"], deprecated=False)
    assert tuple(flags["--stem"].choices) == STEMS and tuple(flags["--pool"].choices) == POOLS
