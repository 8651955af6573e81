"""Every output of the predict / explain / train commands is checked for writability before any computing:
an unwritable place is one ``error:`` line naming it, exit 2, and nothing else happens.

Tests run as root, where chmod does not block writes: the unwritable place is a path under a regular file."""
from __future__ import annotations

from pathlib import Path

import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.io import prepare_output


def test_prepare_output_refuses_a_place_under_a_file_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    for folder in (False, True):
        with pytest.raises(UserInputError, match="afile/out.*not writable"):
            prepare_output(tmp_path / "afile" / "out", folder=folder)
        with pytest.raises(UserInputError, match="not writable"):
            prepare_output(tmp_path / "afile" / "deeper" / "out.csv", folder=folder)
    with pytest.raises(UserInputError, match="not a directory"):
        prepare_output(tmp_path / "afile", folder=True)
    (tmp_path / "adir").mkdir()
    with pytest.raises(UserInputError, match="is a directory"):
        prepare_output(tmp_path / "adir")
    assert prepare_output(tmp_path / "new" / "deeper", folder=True) == tmp_path / "new" / "deeper"
    assert prepare_output(tmp_path / "new" / "out.csv") == tmp_path / "new" / "out.csv"
    assert prepare_output("-") == "-"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]  # no probe or folder left behind


@pytest.mark.parametrize("command", [
    ["explain", "promoter", "--model", "MISSING/run", "--input", "MISSING/seqs.csv", "--out", "OUT"],
    ["explain", "msa", "--model", "MISSING/run", "--input", "MISSING/family.a3m", "--out", "OUT"],
    ["explain", "msa", "--weights", "MISSING/esm.pt", "--input", "MISSING/family.a3m", "--out", "OUT"],
    ["predict", "promoter", "--model", "MISSING/run", "--input", "MISSING/seqs.csv", "--output", "OUT/p.csv"],
    ["predict", "promoter", "--model", "MISSING/run", "--input", "MISSING/genome.fa", "--window", "70",
     "--output", "OUT/scan.bedGraph"],
    ["predict", "msa", "--input", "MISSING/family.a3m", "--out", "OUT"],
    ["predict", "msa", "--model", "MISSING/run", "--input", "MISSING/family.a3m", "--out", "OUT"],
    ["train", "msa", "--input", "MISSING/family.a3m", "--out", "OUT"],
    ["train", "promoter", "--train", "MISSING/train.csv", "--dev", "MISSING/dev.csv", "--out", "OUT"],
])
def test_an_unwritable_output_is_refused_before_anything_is_read(tmp_path: Path, capsys, command) -> None:
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "out"
    argv = [part.replace("MISSING", str(tmp_path / "missing")).replace("OUT", str(out)) for part in command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {out}") and "not writable" in err[0], err
    assert (tmp_path / "afile").read_text() == "x"
