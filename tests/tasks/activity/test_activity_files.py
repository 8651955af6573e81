"""Reading activity files: CSV/TSV with value columns, FASTA with the value in the header, the errors a user can
fix (file + record + problem), constant-flank detection and stripping, and splits that keep both orientations of
an element together."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main
from bioattn.data.dna import reverse_complement
from bioattn.errors import UserInputError
from bioattn.tasks.activity.data import (
    detect_flanks,
    element_groups,
    group_folds,
    read_activity_file,
    strip_all,
)

FIVE, THREE = "AGGACCGGATCAACT", "CATTGCGTGAACCGA"


def test_tsv_reads_every_numeric_column_as_a_target(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text("id\tseq\thepg2\tk562\tnote\nr1\tacgtAC\t1.5\t-2\tx\nr2\tGGGTTN\t0.25\t3e-1\ty\n")
    split = read_activity_file(path)
    assert split.target_names == ["hepg2", "k562"] and split.records == ["r1", "r2"]
    assert split.sequences == ["ACGTAC", "GGGTTN"]
    np.testing.assert_allclose(split.values, [[1.5, -2.0], [0.25, 0.3]])


def test_csv_target_flag_picks_columns(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("sequence,a,b\nACGT,1,2\nCCGT,3,4\n")
    assert read_activity_file(path, targets=["b"]).values.tolist() == [[2.0], [4.0]]


@pytest.mark.parametrize("header", ["value=1.3", "1.3"])
def test_fasta_value_in_the_header(tmp_path: Path, header: str) -> None:
    path = tmp_path / "a.fa"
    path.write_text(f">s1 {header}\nACGT\nAC\n>s2 {header.replace('1.3', '-0.5')}\nGGTT\n")
    split = read_activity_file(path)
    assert split.target_names == ["value"] and split.sequences == ["ACGTAC", "GGTT"]
    assert split.values[:, 0].tolist() == [1.3, -0.5]


def test_fasta_several_named_targets(tmp_path: Path) -> None:
    path = tmp_path / "a.fasta"
    path.write_text(">s1 hepg2=1 k562=2\nACGT\n>s2 hepg2=3 k562=4\nGGTT\n")
    split = read_activity_file(path)
    assert split.target_names == ["hepg2", "k562"] and split.values.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("name, text, message", [
    ("a.csv", "sequence,value\nACGT,1\nACGT,high\n", r"a\.csv: record '2' \(data row 2\): column 'value': value 'high' is not a number"),
    ("a.csv", "sequence,value\nACGT,1\nACGT,\n", r"record '2' \(data row 2\): column 'value': missing value"),
    ("a.csv", "sequence,value\nACGU,1\n", r"a\.csv: record '1' \(data row 1\): invalid base 'U' at position 4"),
    ("a.csv", "sequence,value\nACGR,1\n", r"invalid base 'R' at position 4; expected A, C, G, T or N"),
    ("a.csv", "dna,value\nACGT,1\n", r"a\.csv: no sequence column \(sequence or seq\)"),
    ("a.csv", "sequence,name\nACGT,x\n", r"a\.csv: no numeric value column"),
    ("a.fa", ">s1 value=1\nACGT\n>s2 note\nACGT\n", r"a\.fa: record 's2' \(#2\): no value in the header"),
    ("a.fa", ">s1 value=x1\nACGT\n", r"no value in the header"),
    ("a.fa", ">s1 value=1\nAC-T\n", r"a\.fa: record 's1' \(#1\): invalid base '-'"),
])
def test_bad_input_is_one_clear_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserInputError, match=message):
        read_activity_file(path)


def test_missing_target_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("sequence,value\nACGT,1\n")
    with pytest.raises(UserInputError, match="target column 'k562' not in the header: sequence,value"):
        read_activity_file(path, targets=["k562"])


def test_train_command_prints_one_error_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    path = tmp_path / "a.csv"
    path.write_text("sequence,value\nACGT,1\nACGT,oops\n")
    out = tmp_path / "run"
    assert main(["train", "activity", "--train", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "value 'oops' is not a number" in err[-1]
    assert not out.exists()


def test_flanks_shared_by_every_sequence_are_detected_and_stripped() -> None:
    rng = np.random.default_rng(0)
    elements = ["".join(rng.choice(list("ACGT"), 20)) for _ in range(30)]
    assert detect_flanks([FIVE + e + THREE for e in elements]) == (FIVE, THREE)
    assert detect_flanks(elements) == ("", "")  # random sequences share no 6-nt prefix
    assert detect_flanks(["ACGTACGTAA"]) == ("", "")  # one sequence: nothing to compare
    from bioattn.tasks.activity.data import ActivitySplit

    split = ActivitySplit(["a", "b"], [FIVE + elements[0] + THREE, elements[1]], np.zeros((2, 1)), ["v"])
    assert strip_all(split, (FIVE, THREE)).sequences == elements[:2]  # with or without the flanks


def test_both_orientations_of_an_element_share_a_fold() -> None:
    rng = np.random.default_rng(1)
    elements = ["".join(rng.choice(list("ACGT"), 12)) for _ in range(20)]
    sequences = elements + [reverse_complement(e) for e in elements]
    groups = element_groups(sequences)
    assert len(set(groups)) == 20 and all(groups[i] == groups[i + 20] for i in range(20))
    for train, held_out in group_folds(groups, 4, seed=0):
        assert not set(groups[train]) & set(groups[held_out])
        assert len(held_out) == 10
