"""MkDocs hook: the CLI reference, generated from bioattn's argparse parsers at build time.

Nothing it writes is committed, so the reference cannot drift from ``bioattn --help``. It adds one page per
subcommand (``reference/cli/<verb>-<target>.md``) and an index, and fills the nav entry titled "CLI reference"
with them. It also serves, without copies, the changelog (``CHANGELOG.md`` at the repository root), one page
per data card (``data_cards/*.md``, nav entry "Data cards") and one per shipped model's card
(``bioattn/pretrained/*/MODEL_CARD.md``, nav entry "Model cards").
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
CLI_DIR = "reference/cli"
NAV_TITLE = "CLI reference"


def _parser() -> argparse.ArgumentParser:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bioattn.cli import build_parser

    return build_parser()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """``[("train promoter", parser), ..., ("models", parser)]`` in the order ``bioattn --help`` lists them."""
    commands = []
    for verb, verb_parser in _subparsers(_parser()).items():
        targets = _subparsers(verb_parser)
        if targets:
            commands += [(f"{verb} {target}", p) for target, p in targets.items()]
        else:
            commands.append((verb, verb_parser))
    return commands


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    """One table row per option, worded exactly as ``--help`` words it (argparse's own formatter)."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| `{_escape(invocation)}` | {_escape(help_text)} |")
    return rows


def _page(name: str, parser: argparse.ArgumentParser) -> str:
    description = (parser.description or "").strip()
    lines = [f"# bioattn {name}", "", "*Generated from the command's argparse parser when the site is built.*", ""]
    if description:
        lines += ["```text", description, "```", ""]
    lines += ["## Options", "", "| flag | what it does |", "|---|---|", *_flag_rows(parser), "",
              "## `--help`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def _slug(name: str) -> str:
    return name.replace(" ", "-")


def _cli_pages() -> dict[str, str]:
    commands = _commands()
    index = ["# CLI reference", "",
             "Every `bioattn` subcommand, generated from its argparse parser at build time "
             "(the same text as `bioattn VERB TARGET --help`).", "",
             "| command | what it does |", "|---|---|"]
    pages = {}
    for name, parser in commands:
        summary = (parser.description or "").strip().splitlines()[0] if parser.description else ""
        index.append(f"| [`bioattn {name}`]({_slug(name)}.md) | {_escape(summary)} |")
        pages[f"{CLI_DIR}/{_slug(name)}.md"] = _page(name, parser)
    pages[f"{CLI_DIR}/index.md"] = "\n".join(index) + "\n"
    return pages


def _changelog() -> str:
    return (ROOT / "CHANGELOG.md").read_text()


def _model_cards() -> dict[str, str]:
    return {f"models/{p.parent.name}.md": p.read_text()
            for p in sorted((ROOT / "bioattn" / "pretrained").glob("*/MODEL_CARD.md"))}


def _data_cards() -> dict[str, str]:
    return {f"data-cards/{p.name}": p.read_text() for p in sorted((ROOT / "data_cards").glob("*.md"))}


_PAGES: dict[str, str] = {}


class _GroupedParameters(logging.Filter):
    """Downgrade one griffe warning to INFO: the project's docstrings document several parameters in one item
    (``a, b, c: as in X``); griffe's Google parser cannot split an item whose names wrap onto a second line.
    Every other docstring warning still fails ``mkdocs build --strict``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Failed to get 'name: description' pair from" in message and message.rstrip("'").endswith(","):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


for _name in ("mkdocs.plugins.griffe", "griffe"):
    logging.getLogger(_name).addFilter(_GroupedParameters())


def on_config(config: Any) -> Any:
    _PAGES.clear()
    _PAGES.update(_cli_pages())
    _PAGES["changelog.md"] = _changelog()
    _PAGES.update(_data_cards())
    _PAGES.update(_model_cards())
    cli_nav = [f"{CLI_DIR}/index.md"] + [p for p in _PAGES if p.startswith(CLI_DIR) and not p.endswith("index.md")]
    cards_nav = sorted(p for p in _PAGES if p.startswith("data-cards/"))
    models_nav = sorted(p for p in _PAGES if p.startswith("models/"))

    def fill(items: list) -> list:
        out = []
        for item in items:
            if isinstance(item, dict):
                (title, value), = item.items()
                if title == NAV_TITLE:
                    value = cli_nav
                elif title == "Data cards":
                    value = cards_nav
                elif title == "Model cards":
                    value = models_nav
                elif isinstance(value, list):
                    value = fill(value)
                item = {title: value}
            out.append(item)
        return out

    config["nav"] = fill(config["nav"])
    return config


def on_files(files: Files, config: Any) -> Files:
    for path, content in _PAGES.items():
        files.append(File.generated(config, path, content=content))
    return files
