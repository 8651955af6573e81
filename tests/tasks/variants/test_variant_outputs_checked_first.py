"""'bioattn predict variants' refuses an output it cannot write before it loads the model or scores anything: one
error line, exit status 2, nothing written."""
from __future__ import annotations

from pathlib import Path

import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from tests.tasks.variants.test_variant_scoring import StandIn

SEQ = "ACGTTGCAAGGCTTACGATCGGATCCATGCAAGTCGATCG"
VCF = ("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
       f"c1\t10\t.\t{SEQ[9]}\t{'A' if SEQ[9] != 'A' else 'C'}\t.\t.\t.\n")


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    (tmp_path / "ref.fa").write_text(f">c1\n{SEQ}\n")
    (tmp_path / "calls.vcf").write_text(VCF)
    (tmp_path / "a_file").write_text("not a folder\n")

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded or variants scored before the output was checked")

    import bioattn.tasks.variants.predict as predict
    import bioattn.tasks.variants.run as run

    monkeypatch.setattr(run, "load_scoring_model", never)
    monkeypatch.setattr(predict, "allele_scores", never)
    return {"dir": tmp_path, "ref": tmp_path / "ref.fa", "vcf": tmp_path / "calls.vcf"}


def _cli(inputs: dict[str, Path], *flags: str) -> list[str]:
    return ["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(inputs["ref"]), *flags]


@pytest.mark.parametrize("output", ["a_file/scores.tsv", "a_file/deeper/scores.vcf"])
def test_an_unwritable_output_fails_at_once(inputs, output, capsys) -> None:
    target = inputs["dir"] / output
    assert main(_cli(inputs, "--input", str(inputs["vcf"]), "--output", str(target))) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not writable" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in inputs["dir"].iterdir()) == ["a_file", "calls.vcf", "ref.fa"]


def test_an_output_that_is_a_folder_fails_at_once(inputs, capsys) -> None:
    assert main(_cli(inputs, "--input", str(inputs["vcf"]), "--output", str(inputs["dir"]))) == 2
    assert "is a directory" in capsys.readouterr().err


def test_an_unwritable_saturation_figure_fails_at_once(inputs, capsys) -> None:
    figure = inputs["dir"] / "a_file" / "map.png"
    assert main(_cli(inputs, "--saturation", "--output", str(inputs["dir"] / "map.tsv"), "--figure", str(figure))) == 2
    assert "map.png" in capsys.readouterr().err
    assert not (inputs["dir"] / "map.tsv").exists()


def test_the_python_call_checks_the_output_before_scoring(inputs) -> None:
    from bioattn.tasks.variants.predict import predict_variants

    with pytest.raises(UserInputError, match="not writable"):
        predict_variants(StandIn(), inputs["ref"], inputs["vcf"], inputs["dir"] / "a_file" / "out.tsv")
