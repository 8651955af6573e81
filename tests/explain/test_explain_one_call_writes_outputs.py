"""``explain_promoter`` / ``explain_msa`` with ``out=``: one library call does what ``bioattn explain`` does (the
command is that call and a print), and a folder that would be refused is refused before any model is loaded."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bioattn.tasks.msa.explain as msa_report
import bioattn.tasks.promoter.explain as promoter_report
from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.tasks.msa.explain import explain_msa
from bioattn.tasks.promoter.explain import explain_promoter
from tests.helpers.files import write_fasta

FAST = {"method": "rollout", "faithfulness": False, "plot_sequences": 1}


@pytest.fixture
def fasta(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_fasta(tmp_path / "in.fa", {f"s{i}": "".join(rng.choice(list("ACGT"), 40)) for i in range(6)})


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_one_call_writes_what_the_command_writes(tmp_path, fasta, tiny_promoter_run) -> None:
    result = explain_promoter(str(tiny_promoter_run), fasta, out=tmp_path / "python", device="cpu", **FAST)
    assert result.saved_to == tmp_path / "python"
    assert cli_main(["explain", "promoter", "--model", str(tiny_promoter_run), "--input", str(fasta), "--out",
                     str(tmp_path / "command"), "--method", "rollout", "--no-faithfulness", "--plot-sequences", "1",
                     "--device", "cpu"]) == 0
    assert _files(tmp_path / "python") == _files(tmp_path / "command")
    assert "predictions.tsv" in _files(tmp_path / "python")
    for name in ("predictions.tsv", "influence.tsv"):
        assert (tmp_path / "python" / name).read_text() == (tmp_path / "command" / name).read_text()
    assert str(tmp_path / "python") in promoter_report.describe(result)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_without_out_nothing_is_written_until_save(tmp_path, fasta, tiny_promoter_run, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = explain_promoter(str(tiny_promoter_run), fasta, device="cpu", **FAST)
    assert result.saved_to is None and _files(tmp_path) == ["in.fa"]
    assert "not saved yet" in promoter_report.describe(result)  # describing it before saving says so
    assert result.save(tmp_path / "later") == tmp_path / "later" and result.saved_to == tmp_path / "later"
    assert "not saved yet" not in promoter_report.describe(result) and "later" in promoter_report.describe(result)


def test_an_unsaved_motif_report_is_described_without_paths(fasta, tiny_promoter_run) -> None:
    result = explain_promoter(str(tiny_promoter_run), fasta, device="cpu", motifs=True, motif_db="none",
                              tss_index=20, **FAST)
    printed = promoter_report.describe(result)
    assert "motifs: " in printed and "no database" in printed and "not saved yet" in printed, printed


@pytest.mark.parametrize("module, explain, inputs", [
    (promoter_report, explain_promoter, "fasta"),
    (msa_report, explain_msa, "family"),
])
def test_a_refused_folder_stops_before_the_model_is_loaded(tmp_path, fasta, family, tiny_promoter_run, monkeypatch,
                                                          module, explain, inputs) -> None:
    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the output folder was checked")

    monkeypatch.setattr(module, "load_explained_model", never)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    source = fasta if inputs == "fasta" else family["msa"]
    with pytest.raises(UserInputError, match="already exists and is not empty"):
        explain(str(tiny_promoter_run), source, out=taken, device="cpu")
    assert _files(taken) == ["keep.txt"]


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_msa_one_call_without_a_structure_is_saved_too(tmp_path, family, msa_quick_run) -> None:
    """The path without a structure returns early: it must write the folder as well."""
    result = explain_msa(str(msa_quick_run), family["msa"], out=tmp_path / "out", device="cpu", faithfulness=False)
    assert result.saved_to == tmp_path / "out" and (tmp_path / "out" / "summary.json").is_file()
    assert not (tmp_path / "out" / "head_contacts.tsv").exists()
    assert f"-> {tmp_path / 'out'}" in msa_report.describe(result)
    unsaved = explain_msa(str(msa_quick_run), family["msa"], device="cpu", faithfulness=False)
    assert "-> not saved yet" in msa_report.describe(unsaved)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_the_faithfulness_table_shows_progress(fasta, tiny_promoter_run, capsys, monkeypatch) -> None:
    """Every method on every sequence is long work (ISM, Integrated Gradients): it reports progress like the rest."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    explain_promoter(str(tiny_promoter_run), fasta, device="cpu", method="rollout", plot_sequences=0,
                     faithfulness_sequences=4, faithfulness_steps=4)
    err = capsys.readouterr().err
    assert "faithfulness over 4 sequences" in err, err[-1000:]
