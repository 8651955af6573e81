"""``--output -``: nothing reaches standard output before the input is validated."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.io import table_writer
from bioattn.models.promoter import PromoterClassifier


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("promoter") / "run"
    PromoterClassifier(max_len=20, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=0).eval().save_pretrained(folder)
    return folder


def test_predict_to_stdout_writes_nothing_when_a_later_record_is_bad(run: Path, tmp_path: Path, capsys) -> None:
    fasta = tmp_path / "in.fa"
    fasta.write_text(">ok1\nACGTACGTAC\n>ok2\nTTTTACGT\n>long\n" + "A" * 25 + "\n")
    assert cli_main(["predict", "promoter", "--model", str(run), "--input", str(fasta), "--output", "-",
                     "--batch-size", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not even the header
    assert "error:" in captured.err and "long" in captured.err


def test_predict_to_stdout_writes_the_whole_table_when_the_input_is_valid(run: Path, tmp_path: Path, capsys) -> None:
    fasta = tmp_path / "in.fa"
    fasta.write_text(">ok1\nACGTACGTAC\n>ok2\nTTTTACGT\n")
    assert cli_main(["predict", "promoter", "--model", str(run), "--input", str(fasta), "--output", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,promoter_probability,predicted_label"
    assert [line.split(",")[0] for line in lines[1:]] == ["ok1", "ok2"]


def test_table_writer_to_stdout_is_all_or_nothing(capsys) -> None:
    with pytest.raises(UserInputError):
        with table_writer("-", ["a", "b"]) as write_row:
            write_row([1, 2.5])
            raise UserInputError("record 2: bad")
    assert capsys.readouterr().out == ""
    with table_writer("-", ["a", "b"]) as write_row:
        write_row([1, 2.5])
    assert capsys.readouterr().out == "a,b\n1,2.5\n"
