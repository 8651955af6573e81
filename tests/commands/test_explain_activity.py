"""``bioattn explain activity`` end to end on the run directories ``bioattn train activity`` writes (one run and a
cross-validation ensemble of tiny models fitted on a planted TATA-box table), the same result from Python, and one
clear ``error:`` line for a model of another task."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main
from tests.helpers.activity_models import TATA, save_cv, save_single, tata_table

FLAGS = ["--max-rows", "8", "--faithfulness-sequences", "4", "--faithfulness-steps", "5", "--device", "cpu"]
#: One run explained by in-silico mutagenesis with a track figure, the ensemble by gradient x input without figures.
RUNS = {"single": ["--method", "ism", "--plot-sequences", "1"], "cv": ["--method", "gradient_x_input", "--plot-sequences", "0"]}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("explain_activity")
    sequences, values, starts = tata_table(32, seed=1)
    table = folder / "elements.tsv"
    table.write_text("id\tsequence\tvalue\n" + "".join(f"e{i}\t{s}\t{v:.3f}\n" for i, (s, v) in enumerate(zip(sequences, values))))
    return {"table": table, "single": save_single(folder / "single", sequences, values),
            "cv": save_cv(folder / "cv", sequences, values), "starts": starts}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


@pytest.mark.slow  # two explanations with every method's faithfulness: a few seconds
def test_explain_activity_on_a_single_run_and_a_cv_ensemble(planted: dict[str, Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for kind in ("single", "cv"):
        out = tmp_path / kind
        assert main(["explain", "activity", "--model", str(planted[kind]), "--input", str(planted["table"]),
                     "--out", str(out), *RUNS[kind], *FLAGS]) == 0
        method = RUNS[kind][1]
        printed = capsys.readouterr().out
        assert f"explained 8 sequences (activity{', the mean of 2 members' if kind == 'cv' else ''}) with {method}" in printed
        assert "TATA box PLANTED.1" in printed and "faithfulness over" in printed
        summary = json.loads((out / "summary.json").read_text())
        assert summary["members"] == (2 if kind == "cv" else 1) and summary["method"] == method
        assert set(summary["faithfulness"]) == {"ism", "integrated_gradients", "gradient_x_input", "random"}
        ism, random = summary["faithfulness"]["ism"], summary["faithfulness"]["random"]
        assert ism["insertion_auc"] - ism["deletion_auc"] > random["insertion_auc"] - random["deletion_auc"]
        predictions = _rows(out / "predictions.tsv")
        assert [r["id"] for r in predictions] == [f"e{i}" for i in range(8)]
        assert ("activity_members_sd" in predictions[0]) == (kind == "cv")
        weights = _rows(out / "known_motif_weights.tsv")
        assert weights and ("members_with_branch" in weights[0]) == (kind == "cv")
        attribution = _rows(out / "attribution.tsv")
        assert len(attribution) == 8 * 40
        if method == "ism":  # the carriers' largest attribution lies on the planted box
            for row in (1, 3, 5, 7):
                values = np.array([float(r["attribution"]) for r in attribution if r["id"] == f"e{row}"])
                assert planted["starts"][row] <= int(np.argmax(values)) < planted["starts"][row] + len(TATA), row
        for name in ("attribution_profile.png", "attribution_profile.tsv", "faithfulness.png"):
            assert (out / name).stat().st_size > 0
        assert len(list((out / "tracks").glob("*.png"))) == (1 if kind == "single" else 0)


@pytest.mark.slow  # over two seconds: the full suite runs it, the fast lane does not
def test_explain_activity_from_python_matches_the_command(planted: dict[str, Path], tmp_path: Path) -> None:
    from bioattn.tasks.explain_dispatch import explain_pipeline

    result = explain_pipeline("activity")(planted["cv"], planted["table"], method="gradient_x_input",
                                          faithfulness=False, max_rows=4, plot_sequences=0, device="cpu")
    assert result.attribution.shape == (4, 40) and result.member_values.shape == (2, 4, 1)
    assert result.motif_weights[0]["members_with_branch"] == 1
    saved = result.save(tmp_path / "lib")
    assert main(["explain", "activity", "--model", str(planted["cv"]), "--input", str(planted["table"]), "--out",
                 str(tmp_path / "cli"), "--method", "gradient_x_input", "--no-faithfulness", "--max-rows", "4",
                 "--plot-sequences", "0", "--device", "cpu"]) == 0
    for name in ("predictions.tsv", "attribution.tsv", "known_motif_weights.tsv"):
        assert (saved / name).read_text() == (tmp_path / "cli" / name).read_text()


def test_a_model_of_another_task_is_one_clear_error(planted: dict[str, Path], tiny_promoter_run: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "activity", "--model", str(tiny_promoter_run), "--input", str(planted["table"]),
                 "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: {tiny_promoter_run}: holds a PromoterClassifier, not an activity model (ActivityRegressor); "
                    "'bioattn explain promoter' explains it")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
