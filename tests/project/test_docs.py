"""The documentation site builds, its generated CLI reference covers every flag, and the guides' examples run.

Convention for examples a test runs: a fenced ``python`` or ``bash`` block right after a line ``<!-- runnable -->``
(invisible on the site and on GitHub). The runnable blocks of one page run in order in one fresh folder, so a
page can write tiny synthetic files first and train / predict / explain on them next; Python blocks run with this
interpreter, shell blocks with ``bash -euo pipefail`` and a ``bioattn`` command of this checkout on ``PATH``.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

DOCS = REPO_ROOT / "docs"
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(python|bash)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
# pages that must keep runnable examples (a page that lost them would pass the example test vacuously)
MUST_RUN = ["getting-started.md", "guides/dna.md", "guides/ct.md", "guides/msa.md", "guides/attention.md",
            "guides/explanations.md", "guides/activity-and-variants.md"]


def _pages_with_examples() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts) + [REPO_ROOT / "README.md"]
    return [p for p in pages if RUNNABLE.search(p.read_text())]


def _env(tmp_path: Path) -> dict[str, str]:
    """This checkout first on the path, one thread, and a ``bioattn`` command that runs this checkout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "bioattn"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bioattn.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


# ------------------------------------------------------------------------------------------ fast checks
def test_every_owned_guide_has_runnable_examples() -> None:
    for name in MUST_RUN:
        assert RUNNABLE.search((DOCS / name).read_text()), f"docs/{name} has no <!-- runnable --> block"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_readme_is_a_short_guide_that_keeps_the_two_commands() -> None:
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    for marker in ("# set up and run the main job", "# run the test suite"):
        (index,) = [i for i, line in enumerate(lines) if line.startswith(marker)]
        assert lines[index - 1] == "```bash" and lines[index + 1].startswith("python3 -m venv .venv")


def test_adrenal_card_shows_the_official_test_number_and_labels_validation() -> None:
    import json

    folder = REPO_ROOT / "bioattn" / "pretrained" / "adrenalmnist3d-28"
    card = json.loads((folder / "card.json").read_text())
    assert card["test"]["metric"] == "test_auroc" and card["test"]["value"] == pytest.approx(0.827)
    text = (folder / "MODEL_CARD.md").read_text()
    assert "test AUROC 0.827" in text and "validation AUROC 0.8696" in text
    readme = (REPO_ROOT / "README.md").read_text()
    assert "0.827" in readme and "0.870" in readme and "validation" in readme


# ------------------------------------------------------------------------------------------ slow checks
@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO_ROOT / "mkdocs.yml"),
                             "--site-dir", str(tmp_path / "site")], cwd=REPO_ROOT, env=_env(tmp_path), capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    site = tmp_path / "site"
    # pages are page.html (use_directory_urls: false): the site opened from disk links to pages, not folders
    assert "MultiHeadAttention" in (site / "reference" / "api" / "attention.html").read_text()
    assert "0.3.0" in (site / "changelog.html").read_text()
    for page in site.rglob("*.html"):
        links = re.findall(r'href="([^"#:]+/)"', page.read_text())
        assert not links, f"{page.relative_to(site)} links to folders: {links[:3]}"
    # every data card has a title of its own in the navigation (the template's read just "Data card:")
    titles = re.findall(r'<a href="[^"]*data-cards/[^"]+\.html"[^>]*>\s*(?:<span[^>]*>)?\s*([^<]+?)\s*<',
                        (site / "index.html").read_text())
    assert len(titles) == len(list((REPO_ROOT / "data_cards").glob("*.md"))) and all(
        not t.rstrip().endswith(":") for t in titles), titles
    # the CLI reference: one page per subcommand, generated from the parsers, listing every visible flag
    from bioattn.cli import build_parser

    subcommands = []
    for verb, verb_parser in _subparsers(build_parser()).items():
        targets = _subparsers(verb_parser)
        subcommands += [(f"{verb}-{t}", p) for t, p in targets.items()] if targets else [(verb, verb_parser)]
    assert len(subcommands) >= 12  # train|predict|explain × 3, pretrain msa, data fetch, models
    index = (site / "reference" / "cli" / "index.html").read_text()
    for slug, parser in subcommands:
        assert f'href="{slug}.html"' in index, slug
        page = html.unescape(re.sub(r"<[^>]+>", "", (site / "reference" / "cli" / f"{slug}.html").read_text()))
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:  # hidden on purpose
                continue
            for flag in action.option_strings:  # a row of the options table starts with the flag's invocation
                assert re.search(rf"^([^\n]*, )?{re.escape(flag)}[ ,\n]", page, re.MULTILINE), f"{slug}: no {flag}"
    # generated at build time only: nothing of it is in the source tree
    assert not (DOCS / "reference" / "cli").exists() and not (DOCS / "changelog.md").exists()


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_runnable_examples(page: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = _env(tmp_path)
    for number, (language, code) in enumerate(RUNNABLE.findall(page.read_text()), start=1):
        command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
        result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        assert result.returncode == 0, (f"{page.relative_to(REPO_ROOT)}: runnable block {number} ({language}) failed\n"
                                        f"{code}\n--- stderr ---\n{result.stderr[-4000:]}")
