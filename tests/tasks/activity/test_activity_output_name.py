"""``bioattn predict activity --output-name NAME``: of a model of several targets (one per cell type), the column of
that target alone, with exactly its numbers; an unknown name is one ``error:`` line listing the targets, exit
status 2, nothing written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bioattn.cli import main
from tests.helpers.tiny_activity import write_activity_run

OUTPUTS = ("hepg2", "wtc11")


def _files(tmp_path: Path) -> tuple[Path, Path]:
    model = write_activity_run(tmp_path / "model", targets=OUTPUTS)
    rng = np.random.default_rng(2)
    source = tmp_path / "in.fa"
    source.write_text("".join(f">s{k}\n{''.join(rng.choice(list('ACGT'), 40))}\n" for k in range(3)))
    return model, source


def test_output_name_writes_that_targets_column_alone(tmp_path: Path) -> None:
    model, source = _files(tmp_path)
    every, one = tmp_path / "every.tsv", tmp_path / "one.tsv"
    base = ["predict", "activity", "--model", str(model), "--input", str(source), "--device", "cpu"]
    assert main([*base, "--output", str(every)]) == 0
    assert main([*base, "--output", str(one), "--output-name", "WTC11"]) == 0  # matched ignoring case
    every_table, one_table = pd.read_csv(every, sep="\t"), pd.read_csv(one, sep="\t")
    assert list(every_table.columns) == ["id", "hepg2", "wtc11"]
    assert list(one_table.columns) == ["id", "wtc11"]
    assert not np.allclose(every_table["hepg2"], every_table["wtc11"])
    np.testing.assert_array_equal(one_table["wtc11"], every_table["wtc11"])


def test_an_unknown_output_name_is_one_error_line_and_nothing_is_written(tmp_path: Path, capsys) -> None:
    model, source = _files(tmp_path)
    out = tmp_path / "out.tsv"
    assert main(["predict", "activity", "--model", str(model), "--input", str(source), "--output", str(out),
                 "--output-name", "k562", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1
    assert "'k562'" in err and "hepg2, wtc11" in err
    assert not out.exists()
