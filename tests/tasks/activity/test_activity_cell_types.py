"""Several labelled sets, one model: ``--train NAME=FILE`` gives one output per set, a row's other outputs are
missing (NaN) and masked out of the loss, of the ridges and of every score, and an element two sets share never
trains a fold that scores it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main
from bioattn.data.dna import reverse_complement
from bioattn.errors import UserInputError
from bioattn.tasks.activity.data import element_groups, file_folds, parse_set, read_activity_file, read_activity_sets
from bioattn.tasks.activity.scores import fit_linear, regression_metrics


def _set(path: Path, rows: list[tuple[str, float]]) -> Path:
    path.write_text("seq\tmean_value\n" + "".join(f"{s}\t{v}\n" for s, v in rows))
    return path


def test_named_sets_are_one_output_each_with_the_others_missing(tmp_path: Path) -> None:
    a = _set(tmp_path / "a.tsv", [("ACGTAC", 1.0), ("GGGTTT", 2.0)])
    b = _set(tmp_path / "b.tsv", [("CCCAAA", 3.0)])
    a2 = _set(tmp_path / "a2.tsv", [("TTTGGG", 4.0)])
    split = read_activity_sets([f"hepg2={a}", f"wtc11={b}", f"hepg2={a2}"])
    assert split.target_names == ["hepg2", "wtc11"]
    np.testing.assert_array_equal(split.values, [[1, np.nan], [2, np.nan], [np.nan, 3], [4, np.nan]])
    assert split.records[2] == "wtc11:1"
    assert split.file_index.tolist() == [0, 0, 0, 1]  # the n-th file of each set is fold n
    assert parse_set(str(a)) == (None, a)


def test_named_and_plain_files_do_not_mix_and_a_set_has_one_value_column(tmp_path: Path) -> None:
    a = _set(tmp_path / "a.tsv", [("ACGTAC", 1.0)])
    with pytest.raises(UserInputError, match="name every --train set"):
        read_activity_sets([f"hepg2={a}", str(a)])
    wide = tmp_path / "wide.tsv"
    wide.write_text("seq\tx\ty\nACGT\t1\t2\n")
    with pytest.raises(UserInputError, match=r"wide.tsv: 2 value columns \(x, y\) in the set 'k562'"):
        read_activity_sets([f"k562={wide}"])
    assert read_activity_sets([f"k562={wide}"], targets=["y"]).values.tolist() == [[2.0]]


def test_a_wide_table_may_leave_a_cell_type_unmeasured_but_not_all(tmp_path: Path) -> None:
    path = tmp_path / "wide.tsv"
    path.write_text("seq\thepg2\tk562\nACGT\t1\t\nCCGT\tNA\t2\n")
    values = read_activity_file(path).values
    assert np.isnan(values[0, 1]) and np.isnan(values[1, 0]) and values[1, 1] == 2
    path.write_text("seq\thepg2\tk562\nACGT\t1\t3\nCCGT\t\t\n")
    with pytest.raises(UserInputError, match=r"record '2' \(data row 2\): no measured value"):
        read_activity_file(path)
    path.write_text("seq\tvalue\nACGT\t1\nCCGT\t\n")  # one value column: a missing value is an error, as before
    with pytest.raises(UserInputError, match="missing value"):
        read_activity_file(path)


def test_scores_and_ridges_use_only_the_rows_that_measured_each_output() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = np.column_stack([x @ [1, 0, 0, 2] + rng.normal(0, 0.1, 60), x @ [0, 3, 1, 0] + rng.normal(0, 0.1, 60)])
    y[:25, 0] = np.nan
    y[40:, 1] = np.nan
    both = fit_linear(x, y)
    first, second = fit_linear(x[25:], y[25:, :1]), fit_linear(x[:40], y[:40, 1:])
    # the same ridge as each output's own fit on its measured rows (inside their range: clipping is by all rows)
    np.testing.assert_allclose(both.predict(x[25:])[:, 0], first.predict(x[25:])[:, 0], atol=1e-8)
    np.testing.assert_allclose(both.predict(x[:40])[:, 1], second.predict(x[:40])[:, 0], atol=1e-8)
    predicted = both.predict(x)
    metrics = regression_metrics(y, predicted, ["a", "b"])
    assert metrics["pearson:a"] == pytest.approx(regression_metrics(y[25:, :1], predicted[25:, :1], ["a"])["pearson"])
    assert metrics["pearson:b"] == pytest.approx(regression_metrics(y[:40, 1:], predicted[:40, 1:], ["b"])["pearson"])
    assert np.isfinite(list(metrics.values())).all()


def test_an_element_in_two_sets_never_trains_the_fold_that_scores_it() -> None:
    shared = "ACGTACGGTT"
    sequences = [shared, "CCCCAAAAGG", "GGGGTTTTAA", reverse_complement(shared), "TTTTCCCCAA"]
    folds = file_folds(np.array([0, 0, 1, 1, 1]), element_groups(sequences))
    assert [t.tolist() for t, _ in folds] == [[2, 4], [1]]  # row 3 (the shared element) trains neither
    assert [h.tolist() for _, h in folds] == [[0, 1], [2, 3, 4]]


@pytest.mark.slow
def test_train_activity_on_two_named_sets_learns_each_output_and_scores_it_on_its_own_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)

    def table(name: str, n: int, weight: float) -> Path:
        rows = []
        for _ in range(n):
            s = "".join(rng.choice(list("ACGT"), 40))
            rows.append((s, weight * s.count("G") + rng.normal(0, 0.3)))
        return _set(tmp_path / f"{name}.tsv", rows)

    run = tmp_path / "run"
    assert main(["train", "activity", "--train", f"hepg2={table('h', 60, 1.0)}", "--train",
                 f"k562={table('k', 40, -1.0)}", "--quick", "--blend", "kmers", "--cv", "2", "--device", "cpu",
                 "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["target_names"] == ["hepg2", "k562"]
    scores = metrics["baselines"]["k-mer (k=1..6) ridge regression (this run)"]
    # opposite G weights per output: one ridge per output on its own rows learns both signs
    assert scores["pearson:hepg2"]["mean"] > 0.5 and scores["pearson:k562"]["mean"] > 0.5
    deep = metrics["baselines"]["deep model alone, before the blend (this run)"]
    assert np.isfinite(deep["pearson"]["mean"]) and np.isfinite(metrics["model"]["pearson"]["mean"])
    oof = (run / "out_of_fold.csv").read_text().splitlines()[1:]
    assert len(oof) == 100  # each row once, for the output its set measured
    assert {line.split(",")[2] for line in oof if line.startswith("k562:")} == {"k562"}
    assert "| model | pearson hepg2 | pearson k562 |" in (run / "summary.md").read_text()
