"""The shared ``metrics.json`` schema (``bioattn.tasks.driver``): what every task's run writes, checked before it
is written, and the headline read from the right split."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bioattn.tasks.driver import METRICS_SCHEMA_VERSION
from bioattn.tasks.driver import RunProtocol, check_metrics, metrics_document, write_run_report

SCORES = {
    "model (this run)": {"dev": {"mcc": 0.4}, "test": {"mcc": 0.5}},
    "k-mer baseline": {"dev": {"mcc": 0.3}, "test": {"mcc": 0.35}},
}


def test_a_document_has_every_shared_key_and_the_headline_prefers_the_test_split() -> None:
    document = metrics_document("promoter", dataset="mine.csv", protocol=RunProtocol().to_dict(),
                                splits={"train": 10, "dev": 3, "test": 3}, scores=SCORES, class_names=["neg", "pos"],
                                trust={"warnings": []})
    check_metrics(document)
    assert document["schema_version"] == METRICS_SCHEMA_VERSION and document["task"] == "promoter"
    assert document["kind"] == "classification" and document["protocol"]["name"] == "holdout"
    assert document["headline"] == {"metric": "mcc", "model": "model (this run)", "split": "test", "value": 0.5,
                                    "sd": None}
    assert document["trust"] == {"warnings": []}  # the task's own keys follow


def test_cross_validation_headlines_are_the_pooled_out_of_fold_number_and_fold_spread_is_kept() -> None:
    scores = {"model": {"oof": {"auroc": 0.9}, "cv": {"auroc": {"mean": 0.88, "sd": 0.02, "n": 5}}}}
    protocol = RunProtocol(cv=5, cv_repeats=2, description="5-fold CV").to_dict()
    document = metrics_document("ct", dataset=None, protocol=protocol, splits={"pool": 50}, scores=scores,
                                class_names=["a", "b"])
    assert protocol == {"name": "cv", "description": "5-fold CV", "seeds": None, "cv_folds": 5, "cv_repeats": 2}
    assert document["headline"]["split"] == "oof" and document["headline"]["value"] == 0.9
    cv = metrics_document("ct", dataset=None, protocol=protocol, splits={"pool": 50}, scores=scores,
                          class_names=["a", "b"], headline_split="cv")
    assert (cv["headline"]["value"], cv["headline"]["sd"]) == (0.88, 0.02)


def test_a_regression_needs_its_target_names_and_task_keys_may_not_shadow_the_shared_ones() -> None:
    document = metrics_document("activity", dataset="x.tsv", protocol=RunProtocol().to_dict(), splits={"pool": 4},
                                scores={"m": {"held_out": {"pearson": 0.3}}}, target_names=["activity"])
    check_metrics(document)
    del document["target_names"]
    with pytest.raises(ValueError, match="target_names"):
        check_metrics(document)
    with pytest.raises(ValueError, match="clash"):
        metrics_document("activity", dataset="x", protocol=RunProtocol().to_dict(), splits={}, scores={},
                         target_names=["a"], headline={"value": 1})


def test_nothing_is_written_when_the_document_breaks_the_schema(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="headline"):
        write_run_report(tmp_path, {"schema_version": METRICS_SCHEMA_VERSION, "task": "promoter", "kind": "x",
                                    "dataset": None, "protocol": {"name": "cv"}, "splits": {}, "scores": {}},
                         "summary")
    assert not list(tmp_path.iterdir())
    good = metrics_document("promoter", dataset=None, protocol=RunProtocol(seeds=(1, 2)).to_dict(), splits={},
                            scores=SCORES, class_names=["neg", "pos"])
    write_run_report(tmp_path, good, "table")
    assert json.loads((tmp_path / "metrics.json").read_text())["protocol"]["seeds"] == [1, 2]
    assert (tmp_path / "summary.md").read_text() == "table\n"
