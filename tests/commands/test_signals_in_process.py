"""The CLI's signal handling belongs to the program only: a command called in-process (a test, a notebook) stays
interruptible, while the console script still unwinds cleanly with status 130/143."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bioattn.commands.models as models_command
from bioattn.cli import main, run_user_main
from bioattn.errors import UserInputError
from tests.helpers import REPO_ROOT
from tests.helpers.processes import interrupt_when_ready


def test_ctrl_c_in_an_in_process_command_reaches_the_caller(monkeypatch) -> None:
    seen = {}

    def interrupted(args):
        seen["sigterm"] = signal.getsignal(signal.SIGTERM)
        raise KeyboardInterrupt

    monkeypatch.setattr(models_command, "run", interrupted)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):  # not swallowed into "return 130": pytest / the notebook can stop
        main(["models"])
    assert seen["sigterm"] is before  # no handler of bioattn's while the command ran in-process


def test_in_process_commands_still_report_bad_input_in_one_line(monkeypatch, capsys) -> None:
    def bad(args):
        raise UserInputError("x.csv: row 3: no sequence")

    monkeypatch.setattr(models_command, "run", bad)
    assert main(["models"]) == 2
    assert capsys.readouterr().err == "error: x.csv: row 3: no sequence\n"
    with pytest.raises(KeyboardInterrupt):
        run_user_main(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), program=False)


# the console script's path (main() without arguments) with a command that blocks inside an atomic write
_PROGRAM = textwrap.dedent("""
    import sys, time
    import bioattn.commands.models as command
    from bioattn import cli
    from bioattn.io import atomic_write

    def run(args):
        with atomic_write(sys.argv[2] + "/out.txt") as handle:
            handle.write("half")
            handle.flush()
            print("ready", flush=True)
            time.sleep(120)
        return 0

    command.run = run
    sys.argv = ["bioattn", "models"]
    sys.exit(cli.main())
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_the_program_still_exits_cleanly_on_signals(tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    script = _PROGRAM.replace("sys.argv[2]", repr(str(tmp_path)))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    stderr = interrupt_when_ready(proc, signum)
    assert proc.returncode == 128 + signum, stderr
    assert list(tmp_path.iterdir()) == []  # the temporary file of the interrupted write is gone
