"""``--method auto`` measures faithfulness on the input and picks the most faithful there; figures and
descriptions name the method used."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import build_parser
from bioattn.cli import main as cli_main
from bioattn.data.dna import decode
from bioattn.explain.faithfulness import most_faithful
from bioattn.explain.result import resolve_method
from bioattn.models.promoter import PromoterClassifier
from tests.helpers.ct_volumes import write_tiny_ct_run


def _result(deletion: float, insertion: float) -> dict:
    return {"deletion_auc": deletion, "insertion_auc": insertion, "deletion_auc_sd": 0.0, "insertion_auc_sd": 0.0,
            "examples": 4, "seconds": 0.0}


def test_auto_picks_the_method_most_faithful_on_the_input_not_the_fixed_order(capsys) -> None:
    # the first method of the fixed order deletes worse than random on this input
    measured = {"gradient_x_input": _result(0.986, 0.90), "integrated_gradients": _result(0.70, 0.95),
                "relevance": _result(0.60, 0.97), "rollout": _result(0.85, 0.92), "random": _result(0.883, 0.91)}
    asked = []

    def measure(methods):
        asked.append(tuple(methods))
        return {name: measured[name] for name in methods}

    order = ("gradient_x_input", "integrated_gradients", "relevance", "rollout")
    assert resolve_method("auto", order, lambda: 0.001, measure, sample="this volume") == "relevance"
    assert asked == [(*order, "random")]  # every candidate and the random floor, measured once
    err = capsys.readouterr().err
    assert "explain: method relevance" in err and "this volume" in err
    assert "gradient_x_input 0.986" in err and "random 0.883" in err  # the measured AUCs, said
    # too slow methods are not measured; a choice no better than random is flagged
    measured["relevance"] = _result(0.95, 0.90)
    measured["rollout"] = _result(0.95, 0.90)
    slow = lambda: 10.0  # noqa: E731  one gradient pass: Integrated Gradients (64 passes) exceeds the budget
    order = ("integrated_gradients", "relevance", "rollout")
    assert resolve_method("auto", order, slow, measure) in ("relevance", "rollout")
    assert asked[-1] == ("relevance", "rollout", "random")
    assert "warning: no method deletes the prediction faster than a random ranking" in capsys.readouterr().err


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_ct_auto_shows_the_method_its_own_table_stars(tmp_path: Path, capsys) -> None:
    write_tiny_ct_run(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["explain", "ct", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "vols.npz"),
                     "--out", str(out), "--faithfulness-steps", "4"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    candidates = {k: v for k, v in summary["faithfulness"].items() if k != "random"}
    assert summary["method"] == most_faithful(candidates)
    captured = capsys.readouterr()
    err = captured.err + captured.out
    assert f"explain: method {summary['method']} (the more faithful on this volume" in err
    assert f"| random | {summary['faithfulness']['random']['deletion_auc']:.3f}" in err  # the table beside it


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_promoter_track_figures_label_the_method_used(tmp_path: Path, monkeypatch) -> None:
    import bioattn.explain.figures as figures

    torch.manual_seed(0)
    PromoterClassifier(max_len=16, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=0).eval().save_pretrained(tmp_path / "run")
    rng = np.random.default_rng(0)
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{decode(torch.from_numpy(rng.integers(1, 5, 12)))}\n" for i in range(3)))
    labels = []
    real = figures.plot_rollout_track
    monkeypatch.setattr(figures, "plot_rollout_track", lambda *a, **k: labels.append(k.get("ylabel")) or real(*a, **k))
    assert cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out",
                     str(tmp_path / "out"), "--motif", "", "--plot-sequences", "2", "--method", "gradient_x_input",
                     "--no-faithfulness"]) == 0
    assert len(labels) == 3  # two tracks and the profile
    assert all(label == "gradient × input attribution" for label in labels), labels
    assert sorted(p.name for p in (tmp_path / "out" / "tracks").iterdir())  # the tracks were drawn


def test_explain_descriptions_do_not_claim_rollout_for_every_method() -> None:
    parser = build_parser()
    explain = next(a for a in parser._subparsers._group_actions[0].choices["explain"]._actions
                   if isinstance(a, argparse._SubParsersAction))
    for target in ("promoter", "ct"):
        description = explain.choices[target].description
        assert "attention-rollout influence" not in description
        assert "--method" in description
