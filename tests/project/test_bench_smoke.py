"""Every benchmark script in bench/ still runs: its ``--help`` exits 0 and its smoke mode (``--smoke``, tiny sizes,
measures nothing) completes, so a renamed or moved library name fails here instead of the next time someone
benchmarks. Scripts are found by globbing bench/*.py, so a new or reworked benchmark is covered without editing
this file; each runs in this process (``runpy``) so the imports are paid once."""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

BENCH = REPO_ROOT / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))
#: the flag a benchmark's smoke mode answers to, in order of preference
SMOKE_FLAGS = ("--smoke", "--quick")
#: smoke modes that train or score real models (5-80 s each on a busy 2-core machine): in the full suite, not the
#: fast lane
SLOW_SMOKE = {"protocol_identity", "ct_pilots", "ct_epoch", "ct", "variants", "activity_planted", "scan", "train", "esm_msa", "memory"}


def run_script(script: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run ``script`` as ``__main__`` with ``argv``; its exit status (0 when it returns normally)."""
    monkeypatch.setattr(sys, "argv", [str(script), *argv])
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def test_every_benchmark_is_found():
    assert {"train", "memory", "scan", "ct", "attention"} <= {script.stem for script in SCRIPTS}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if s.stem in SLOW_SMOKE else s
                                    for s in SCRIPTS], ids=lambda path: path.stem)
def test_benchmark_help_and_smoke_mode_run(script: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # anything a benchmark writes by default lands here
    monkeypatch.setenv("BIOATTN_NO_PROGRESS", "1")
    assert run_script(script, ["--help"], monkeypatch) == 0
    usage = capsys.readouterr().out
    flag = next((flag for flag in SMOKE_FLAGS if flag in usage), None)
    assert flag is not None, f"{script.name} has no smoke mode ({' or '.join(SMOKE_FLAGS)} in its --help)"
    assert run_script(script, [flag], monkeypatch) == 0
    assert capsys.readouterr().out.strip(), f"{script.name} {flag} printed nothing"
