"""``bioattn predict activity`` refuses the bases its help refuses (IUPAC codes included), writes TSV on standard
output as it does to a .tsv file, and names the rows whose prediction lies far outside the training values."""
from __future__ import annotations

from pathlib import Path

import torch

from bioattn.cli import main
from bioattn.models.activity import ActivityRegressor


def saved_model(folder: Path, far: bool = False) -> Path:
    torch.manual_seed(0)
    model = ActivityRegressor(input_length=20, channels=8, embed_dim=8, num_heads=2, num_layers=1,
                              target_names=["activity"], target_mean=[1.0], target_sd=[2.0])
    if far:  # a head that answers 40 training standard deviations above the mean
        with torch.no_grad():
            model.head[-1].weight.zero_()
            model.head[-1].bias.fill_(40.0)
    model.save_pretrained(folder)
    return folder


def test_an_iupac_base_is_one_error_line_naming_the_record(tmp_path: Path, capsys) -> None:
    model = saved_model(tmp_path / "model")
    source = tmp_path / "in.tsv"
    source.write_text("id\tsequence\nok\tACGTN\nbad\tACGRT\n")
    out = tmp_path / "out.tsv"
    assert main(["predict", "activity", "--model", str(model), "--input", str(source), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "record 'bad'" in err and "invalid base 'R' at position 4" in err
    assert not out.exists()


def test_standard_output_is_tab_separated_like_a_tsv_file(tmp_path: Path, capsys) -> None:
    model = saved_model(tmp_path / "model")
    source = tmp_path / "in.fa"
    source.write_text(">a\nACGTACGT\n>b\nTTTTGGGG\n")
    assert main(["predict", "activity", "--model", str(model), "--input", str(source), "--output", "-"]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "out.tsv"
    assert main(["predict", "activity", "--model", str(model), "--input", str(source), "--output", str(out)]) == 0
    assert printed == out.read_text() and printed.splitlines()[0] == "id\tactivity"


def test_predictions_far_outside_the_training_values_are_named(tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.fa"
    source.write_text(">near\nACGTACGT\n>far\nTTTTGGGG\n")
    assert main(["predict", "activity", "--model", str(saved_model(tmp_path / "ok")), "--input", str(source),
                 "--output", str(tmp_path / "ok.tsv")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["predict", "activity", "--model", str(saved_model(tmp_path / "far", far=True)), "--input",
                 str(source), "--output", str(tmp_path / "far.tsv")]) == 0
    err = capsys.readouterr().err
    assert "warning: 2 of 2 predictions lie beyond 5 standard deviations of the training values ('near', 'far')" in err
