"""A registered task's hooks, called the way a shared driver calls them, on tiny files the test writes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bioattn.tasks.common import Member
from bioattn.tasks.registry import get_task


def write_labelled_csv(path: Path, rows: int, seed: int) -> Path:
    """``sequence,label``: class 1 carries a TATAAA box, class 0 does not."""
    rng = np.random.default_rng(seed)
    lines = ["sequence,label"]
    for i in range(rows):
        sequence = "".join(rng.choice(list("ACGT"), size=30))
        if i % 2:
            sequence = sequence[:10] + "TATAAA" + sequence[16:]
        lines.append(f"{sequence},{i % 2}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow  # about 10 CPU-s: one quick training
def test_promoter_hooks_load_fit_score_predict_and_baselines(tmp_path: Path) -> None:
    from bioattn.tasks.promoter.train import PromoterOptions

    task = get_task("promoter")
    options = PromoterOptions(out=tmp_path / "run", train=write_labelled_csv(tmp_path / "train.csv", 40, 0),
                              dev=write_labelled_csv(tmp_path / "dev.csv", 20, 1), quick=True, pretrain_epochs=0)
    data = task.load_data(options)
    assert len(data.train) == 40 and len(data.dev) == 20 and list(data.class_names) == ["0", "1"]
    member = Member(kind="seed", index=3, run_dir=tmp_path / "run" / "seed3", number=1, total=1)
    fitted = task.fit_member(options, data, member)
    assert (member.run_dir / "config.json").is_file() and fitted.saved_to == member.run_dir
    scores = task.score(fitted.model, data.dev)
    assert task.headline_metric in scores and -1.0 <= scores[task.headline_metric] <= 1.0
    probabilities = task.predict_split(fitted.model, data.dev)
    assert probabilities.shape == (20,) and ((probabilities >= 0) & (probabilities <= 1)).all()
    baselines = task.fit_baselines(options, data.train, data.dev)
    assert baselines and all(task.headline_metric in metrics for metrics in baselines.values())
    assert task.reference["prom_core_all"]  # the published GUE numbers, by task
