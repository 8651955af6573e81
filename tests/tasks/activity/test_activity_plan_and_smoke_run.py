"""A run states its plan before it trains and how long it expects to take once the first model has trained a few
epochs; a ``--quick`` run says, in its summary and on the terminal, that it was a smoke run."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main
from bioattn.tasks.activity.protocols import PLAN_EPOCHS, Plan


def write_table(path: Path, n: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with open(path, "w") as handle:
        handle.write("id\tsequence\tactivity\n")
        for i in range(n):
            sequence = "".join(rng.choice(list("ACGT"), 30))
            handle.write(f"r{i}\t{sequence}\t{sequence.count('GG') + 0.1 * rng.normal():.3f}\n")
    return path


def test_the_plan_says_what_trains_then_how_long_it_takes() -> None:
    out = io.StringIO()
    plan = Plan(5, "5-fold cross-validation of 300 sequences", out=out)
    plan.announce()
    assert out.getvalue().startswith("plan: 5-fold cross-validation of 300 sequences")
    plan.start(max_epochs=40)
    for _ in range(PLAN_EPOCHS + 1):  # the first epoch carries start-up costs and is not counted
        plan.epoch_done()
    second = out.getvalue().splitlines()[1]
    assert second.startswith("plan: 5 models × at most ") and "40 epochs of" in second
    assert f"measured on {PLAN_EPOCHS} epochs" in second and " min of training" in second
    plan.epoch_done()
    plan.start(max_epochs=40)  # later models are not timed again
    plan.epoch_done()
    assert len(out.getvalue().splitlines()) == 2 and plan.lines == out.getvalue().splitlines()


@pytest.mark.slow
def test_a_quick_run_prints_its_plan_and_says_it_was_a_smoke_run(tmp_path: Path, capsys) -> None:
    train = write_table(tmp_path / "train.tsv")
    run = tmp_path / "run"
    assert main(["train", "activity", "--train", str(train), "--quick", "--blend", "kmers", "--cv", "2",
                 "--no-baselines", "--device", "cpu", "--out", str(run)]) == 0
    captured = capsys.readouterr()
    plan_lines = [line for line in captured.err.splitlines() if line.startswith("plan:")]
    assert plan_lines and "smoke run (--quick): 2-fold cross-validation of 40 sequences" in plan_lines[0]
    assert captured.err.index("plan:") < captured.err.index("fold 1 of 2")  # said before anything trains
    assert captured.out.startswith("smoke run (--quick), not a model to use: Pearson")
    summary = (run / "summary.md").read_text()
    assert "**Smoke run (--quick): a tiny model, 2 short epochs" in summary and "rerun without --quick" in summary
    assert "Plan: smoke run (--quick): 2-fold" in summary
    assert json.loads((run / "metrics.json").read_text())["quick"] is True
