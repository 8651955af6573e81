"""SIGTERM/SIGHUP clean up like Ctrl-C, and every train refuses an existing run directory before reading any
data."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bioattn.cli import main as bioattn_main
from tests.helpers import REPO_ROOT
from tests.helpers.processes import interrupt_when_ready

# writes done.txt completely, then blocks inside a second atomic write of out.txt (which already holds "old")
_WRITER = textwrap.dedent("""
    import sys, time
    from bioattn.cli import run_user_main
    from bioattn.io import atomic_write, write_text

    folder = sys.argv[1]
    def main():
        write_text(folder + "/done.txt", "finished\\n")
        with atomic_write(folder + "/out.txt") as handle:
            handle.write("half")
            handle.flush()
            print("ready", flush=True)
            time.sleep(120)
        return 0
    sys.exit(run_user_main(main))
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_terminating_signals_remove_temporary_files_and_keep_finished_ones(tmp_path: Path, signum: int) -> None:
    (tmp_path / "out.txt").write_text("old\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)

    def writing() -> None:
        assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # the write in progress

    stderr = interrupt_when_ready(proc, signum, writing)
    assert proc.returncode == 128 + signum, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.txt", "out.txt"]  # no .out.txt.xxxx.tmp left
    assert (tmp_path / "out.txt").read_text() == "old\n"  # the previous file is intact
    assert (tmp_path / "done.txt").read_text() == "finished\n"


def _existing_run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.json").write_text("{}\n")
    return out


@pytest.mark.parametrize("command", [
    ["train", "ct", "--manifest", "MISSING/labels.csv"],
    ["train", "promoter", "--train", "MISSING/train.csv", "--dev", "MISSING/dev.csv"],
    ["train", "msa", "--input", "MISSING/family.a3m"],
])
def test_train_into_an_existing_run_directory_fails_before_reading_data(tmp_path: Path, capsys, command) -> None:
    out = _existing_run(tmp_path)
    command = [part.replace("MISSING", str(tmp_path / "missing")) for part in command]
    assert bioattn_main([*command, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: {out}: output directory already exists and is not empty" in err, err
    assert "missing" not in err.split("error:")[1].split("\n")[0].replace(str(out), "")
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json"]  # untouched
