"""``bioattn train promoter`` (and its ``recipes/promoter.py`` wrapper) on a small slice of the real data, and the
leak-free E. coli loading."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import encode, reverse_complement
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.train import MODEL_NAME, score
from bioattn.tasks.promoter.baselines import gc_threshold_baseline
from bioattn.tasks.promoter.data import Split, load_ecoli, load_gue
from bioattn.tasks.driver import check_metrics
from tests.helpers import REPO_ROOT

RECIPE = REPO_ROOT / "recipes" / "promoter.py"


def quick_run(task_dir: Path, out: Path, rows: int, *flags: str) -> int:
    return bioattn_main(["train", "promoter", "--data-root", str(task_dir.parents[2]), "--task", task_dir.name,
                         "--out", str(out), "--quick", "--max-rows", str(rows), "--epochs", "1", *flags])


def test_gc_baseline_learns_a_gc_rule():
    rng = np.random.default_rng(0)
    rich = ["".join(rng.choice(list("GC"), size=20)) + "AT" for _ in range(40)]
    poor = ["".join(rng.choice(list("AT"), size=20)) + "GC" for _ in range(40)]
    split = Split(rich + poor, [], np.array([1] * 40 + [0] * 40), [""] * 80)
    scores = gc_threshold_baseline(split, {"dev": split})
    assert scores["dev"]["mcc"] == 1.0 and scores["dev"]["auroc"] == 1.0


@pytest.mark.slow
def test_recipe_script_wraps_the_command():
    done = subprocess.run([sys.executable, str(RECIPE), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for flag in ("--task", "--train", "--dev", "--max-length", "--no-rc-augment", "--strand", "--resume", "--config"):
        assert flag in done.stdout


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_quick_run_end_to_end_then_predict(require_data, tmp_path, capsys):
    task_dir = require_data("promoters", "gue", "prom_core_tata")
    out = tmp_path / "run"
    assert quick_run(task_dir, out, 300) == 0
    printed = capsys.readouterr().out
    for name in (MODEL_NAME, "GC-content threshold (this run)", "k-mer (k=1..6) logistic regression (this run)",
                 "DNABERT (3-mer)"):
        assert name in printed
    metrics = json.loads((out / "metrics.json").read_text())
    check_metrics(metrics)
    assert metrics["task"] == "promoter" and metrics["dataset"] == "prom_core_tata"
    assert metrics["splits"] == {"train": 300, "dev": 300} and metrics["headline"]["split"] == "dev"
    assert metrics["class_names"] == ["0", "1"] and set(metrics["metrics"]) >= {"dev_mcc", "dev_auroc", "dev_accuracy"}
    for method in metrics["scores"].values():
        assert {"mcc", "accuracy", "auroc", "f1"} <= set(method["dev"])
    assert metrics["published_mcc_x100"]["DNABERT (3-mer)"] == 78.15
    assert (out / "training_curve.png").stat().st_size > 1000
    model = PromoterClassifier.from_pretrained(out)
    assert model.max_len == 70 and model.binary
    # the saved model reproduces the dev score written in metrics.json
    dev = load_gue(task_dir, 300, 0)[0]["dev"]
    assert score(model, dev)["mcc"] == pytest.approx(metrics["metrics"]["dev_mcc"], abs=1e-9)


@pytest.mark.parametrize("strand_flags, strand_averaged", [
    ([], False),  # GUE sequences are TSS-oriented: strand-aware by default
    (["--rc-augment"], True),  # --strand follows --rc-augment
    (["--rc-augment", "--strand", "forward"], False),
])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_strand_options_reach_the_saved_model(require_data, tmp_path, strand_flags, strand_averaged):
    task_dir = require_data("promoters", "gue", "prom_core_tata")
    out = tmp_path / "run"
    assert quick_run(task_dir, out, 200, *strand_flags) == 0
    model = PromoterClassifier.from_pretrained(out)
    assert model.rc_average is strand_averaged
    dev = load_gue(task_dir, 200, 0)[0]["dev"]
    reverse = [encode(reverse_complement(sequence)) for sequence in dev.sequences]
    forward_p, reverse_p = model.predict_tokens(dev.tokens), model.predict_tokens(reverse)
    if strand_averaged:
        np.testing.assert_array_equal(forward_p, reverse_p)
    else:  # a strand-aware model scores the two strands differently
        assert np.abs(forward_p - reverse_p).max() > 1e-3


def test_existing_run_dir_is_refused_without_resume(require_data, tmp_path, capsys):
    task_dir = require_data("promoters", "gue", "prom_core_tata")
    out = tmp_path / "run"
    out.mkdir()
    (out / "something").write_text("x")
    assert quick_run(task_dir, out, 100) == 2
    assert "--resume" in capsys.readouterr().err


def test_ecoli_loading_removes_case_and_header_leaks(require_data):
    data = load_ecoli(require_data("promoters", "ecoli_sigma70"), None, 0)
    assert len(data) == 5719 and int(data.labels.sum()) == 2859  # one duplicated promoter kept once
    assert all(s == s.upper() for s in data.sequences)
    assert {len(s) for s in data.sequences} == {81}
