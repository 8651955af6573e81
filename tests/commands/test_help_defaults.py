"""``--help`` states each default as the user would type or read it: no ``(default: None)`` anywhere, and a default
that depends on another flag (``train ct --epochs``: the protocol's) names the values it takes."""
from __future__ import annotations

import argparse

from bioattn.cli import build_parser


def _helps() -> dict[str, str]:
    """Each subcommand's ``--help`` text, by its words (``"train ct"``)."""
    found = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers and words:
            found[" ".join(words)] = parser.format_help()
        for action in subparsers:
            for name, child in action.choices.items():
                walk(child, [*words, name])

    walk(build_parser(), [])
    return found


def test_no_help_says_default_none() -> None:
    helps = _helps()
    assert {"train promoter", "train ct", "train msa", "pretrain msa"} <= set(helps)
    flat = {where: " ".join(text.split()) for where, text in helps.items()}
    assert {where for where, text in flat.items() if "(default: None)" in text} == set()
    assert "wall-clock budget for training in this invocation (default: none, no limit)" in flat["train promoter"]
    assert "none: the weights themselves (default: none)" in flat["train msa"]


def test_train_ct_epochs_help_names_each_protocols_default() -> None:
    from bioattn.tasks.ct.train import PROTOCOLS

    text = " ".join(_helps()["train ct"].split())
    assert (f"maximum epochs (default: the protocol's, {PROTOCOLS['medmnist'].train_config.max_epochs} medmnist, "
            f"{PROTOCOLS['tuned'].train_config.max_epochs} tuned)") in text
