"""The one seed / cross-validation driver the promoter, CT and MSA tasks share (bioattn.tasks.common)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold

from bioattn.tasks.driver import OutOfFold, cv_members, repeated_folds, save_members, seed_members, train_members


def test_seed_members_layout(tmp_path: Path) -> None:
    alone = seed_members(tmp_path, None, 7)
    assert [(m.index, m.run_dir, m.alone) for m in alone] == [(7, tmp_path, True)]
    members = seed_members(tmp_path, [3, 1], 7)
    assert [(m.index, m.run_dir, m.number, m.total) for m in members] == [
        (3, tmp_path / "seed3", 1, 2), (1, tmp_path / "seed1", 2, 2)]


def test_train_members_in_order_and_ensemble_config(tmp_path: Path) -> None:
    members = seed_members(tmp_path, [5, 2], 0)
    assert train_members(members, lambda m: m.index * 10) == [50, 20]
    save_members(tmp_path, "PromoterClassifier", members)
    assert json.loads((tmp_path / "config.json").read_text())["members"] == ["seed5", "seed2"]
    alone = tmp_path / "alone"
    alone.mkdir()
    save_members(alone, "PromoterClassifier", seed_members(alone, None, 0))
    assert not (alone / "config.json").exists()  # the only model is saved in the run directory itself


def test_repeated_folds_number_repeats_after_each_other(tmp_path: Path) -> None:
    labels = np.array([0, 1] * 10)
    split = lambda k, seed: StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(20), labels)  # noqa: E731
    folds = repeated_folds(4, 2, 3, split)
    expected = list(split(4, 3)) + list(split(4, 4))  # repeat r shuffles with seed + r
    assert len(folds) == 8
    for (a, b), (c, d) in zip(folds, expected):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    members = cv_members(tmp_path, folds)
    assert [m.run_dir.name for m in members] == [f"fold{k}" for k in range(1, 9)]


def test_fold_members_that_are_not_saved_name_no_folder(tmp_path: Path, capsys) -> None:
    folds = [(np.array([0, 1]), np.array([2])), (np.array([1, 2]), np.array([0]))]
    saved = cv_members(tmp_path, folds)
    assert train_members(saved, lambda m: m.index) == [1, 2]
    assert capsys.readouterr().err.count(f"held out 1 → {tmp_path / 'fold'}") == 2
    unsaved = cv_members(None, folds)
    assert [(m.kind, m.index, m.run_dir) for m in unsaved] == [("fold", 1, None), ("fold", 2, None)]
    assert train_members(unsaved, lambda m: m.index) == [1, 2]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("fold ")]
    assert lines == ["fold 1 of 2: train 2, held out 1", "fold 2 of 2: train 2, held out 1"]
    assert not any(tmp_path.iterdir())


def test_out_of_fold_is_the_mean_over_repeats_and_fold_of_the_first_repeat(tmp_path: Path) -> None:
    labels = np.array([0, 1] * 6)
    split = lambda k, seed: StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(12), labels)  # noqa: E731
    members = cv_members(tmp_path, repeated_folds(3, 2, 0, split))
    pooled = OutOfFold(12, 3, 2)
    for member in members:  # each member predicts index + 10 * repeat for its held-out examples
        repeat = (member.index - 1) // 3
        pooled.add(member, {"m": member.held_out_index + 10.0 * repeat,
                            "two": np.stack([member.held_out_index, -member.held_out_index], 1).astype(float)})
    np.testing.assert_allclose(pooled.probabilities["m"], np.arange(12) + 5.0)
    np.testing.assert_allclose(pooled.probabilities["two"][:, 0], np.arange(12))
    first = list(split(3, 0))
    for k, (_, held) in enumerate(first, start=1):
        assert (pooled.fold_of[held] == k).all()
