"""recipes/promoter.py end to end on a small slice of the real data, and its leak-free E. coli loading."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bioattn.data import resolve_data_root
from bioattn.data.dna import encode, reverse_complement
from bioattn.errors import UserInputError
from bioattn.models import PromoterClassifier

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "promoter.py"


def load_recipe():
    spec = importlib.util.spec_from_file_location("promoter_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recipe():
    return load_recipe()


@pytest.fixture(scope="module")
def data_root() -> Path:
    try:
        return resolve_data_root(None)
    except UserInputError:
        pytest.skip("data root not found (set BIOATTN_DATA_ROOT)")


def test_gc_baseline_learns_a_gc_rule(recipe):
    rng = np.random.default_rng(0)
    rich = ["".join(rng.choice(list("GC"), size=20)) + "AT" for _ in range(40)]
    poor = ["".join(rng.choice(list("AT"), size=20)) + "GC" for _ in range(40)]
    split = recipe.Split(rich + poor, [], np.array([1] * 40 + [0] * 40))
    scores = recipe.gc_threshold_baseline(split, {"dev": split})
    assert scores["dev"]["mcc"] == 1.0 and scores["dev"]["auroc"] == 1.0


def test_quick_run_end_to_end_then_predict(recipe, data_root, tmp_path, capsys):
    if not (data_root / "promoters" / "gue" / "prom_core_tata").is_dir():
        pytest.skip("GUE promoter data not found under the data root")
    out = tmp_path / "run"
    code = recipe.main(["--data-root", str(data_root), "--task", "prom_core_tata", "--out", str(out), "--quick",
                        "--max-rows", "300", "--epochs", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("PromoterClassifier (this run)", "GC-content threshold (this run)",
                 "k-mer (k=1..6) logistic regression (this run)", "DNABERT (3-mer)"):
        assert name in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "prom_core_tata" and metrics["sizes"] == {"train": 300, "dev": 300}
    for method in metrics["scores"].values():
        assert {"mcc", "accuracy", "auroc", "f1"} <= set(method["dev"])
    assert metrics["published_mcc_x100"]["DNABERT (3-mer)"] == 78.15
    assert (out / "training_curve.png").stat().st_size > 1000
    model = PromoterClassifier.from_pretrained(out)
    assert model.max_len == 70
    # the saved model reproduces the dev score written in metrics.json
    dev = recipe.load_gue(data_root / "promoters" / "gue" / "prom_core_tata", 300, 0)["dev"]
    again = recipe.binary_metrics(dev.labels, model.predict_tokens(dev.tokens))
    assert again["mcc"] == pytest.approx(metrics["scores"]["PromoterClassifier (this run)"]["dev"]["mcc"], abs=1e-9)


@pytest.mark.parametrize("strand_flags, strand_averaged", [([], True), (["--no-rc-augment", "--no-rc-average"], False)])
def test_strand_options_reach_the_saved_model(recipe, data_root, tmp_path, strand_flags, strand_averaged):
    if not (data_root / "promoters" / "gue" / "prom_core_tata").is_dir():
        pytest.skip("GUE promoter data not found under the data root")
    out = tmp_path / "run"
    assert recipe.main(["--data-root", str(data_root), "--task", "prom_core_tata", "--out", str(out), "--quick",
                        "--max-rows", "200", "--epochs", "1", *strand_flags]) == 0
    model = PromoterClassifier.from_pretrained(out)
    assert model.rc_average is strand_averaged
    dev = recipe.load_gue(data_root / "promoters" / "gue" / "prom_core_tata", 200, 0)["dev"]
    reverse = [encode(reverse_complement(sequence)) for sequence in dev.sequences]
    forward_p, reverse_p = model.predict_tokens(dev.tokens), model.predict_tokens(reverse)
    if strand_averaged:
        np.testing.assert_array_equal(forward_p, reverse_p)
    else:  # a strand-aware model scores the two strands differently
        assert np.abs(forward_p - reverse_p).max() > 1e-3


def test_existing_run_dir_is_refused_without_resume(recipe, data_root, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "something").write_text("x")
    with pytest.raises(UserInputError, match="--resume"):
        recipe.main(["--data-root", str(data_root), "--task", "prom_core_tata", "--out", str(out), "--quick"])


def test_ecoli_loading_removes_case_and_header_leaks(recipe, data_root):
    folder = data_root / "promoters" / "ecoli_sigma70"
    if not folder.is_dir():
        pytest.skip("E. coli promoter data not found under the data root")
    data = recipe.load_ecoli(folder, None, 0)
    assert len(data) == 5719 and int(data.labels.sum()) == 2859  # one duplicated promoter kept once
    assert all(s == s.upper() for s in data.sequences)
    assert {len(s) for s in data.sequences} == {81}
