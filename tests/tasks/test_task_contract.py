"""A registered task's hooks, called the way a shared driver calls them, on tiny files the test writes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bioattn.tasks.driver import Member
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


def write_ct_manifest(folder: Path, volumes: int) -> Path:
    """``volumes`` binary 16³ masks (a large or a small sphere) as NIfTI and their ``labels.csv``."""
    import nibabel as nib

    grid = np.stack(np.meshgrid(*[np.arange(16)] * 3, indexing="ij"))
    lines = ["image,label"]
    for i in range(volumes):
        radius = 6 if i % 2 else 3
        mask = (((grid - 8) ** 2).sum(0) <= radius ** 2).astype(np.float32)
        nib.save(nib.Nifti1Image(mask, np.eye(4)), folder / f"v{i}.nii.gz")
        lines.append(f"v{i}.nii.gz,{'large' if i % 2 else 'small'}")
    (folder / "labels.csv").write_text("\n".join(lines) + "\n")
    return folder / "labels.csv"


@pytest.mark.slow  # about 15 CPU-s: one quick training of both CT models
def test_ct_hooks_load_fit_score_predict_and_the_depth_baseline(tmp_path: Path) -> None:
    from bioattn.tasks.ct.options import DEPTH_BASELINE_NAME, CTOptions

    task = get_task("ct")
    options = CTOptions(out=tmp_path / "run", manifest=write_ct_manifest(tmp_path, 16), quick=True,
                        size=(16, 16, 16))
    data = task.load_data(options)
    assert len(data.train) + len(data.dev) == 16 and len(data.pool) == 16
    assert list(data.class_names) == ["large", "small"] and data.train.binary
    member = Member(kind="seed", index=2, run_dir=tmp_path / "run" / "seed2", number=1, total=1)
    fitted = task.fit_member(options, data, member)
    assert (member.run_dir / "config.json").is_file() and (member.run_dir / "baseline_resnet" / "config.json").is_file()
    probabilities = task.predict_split(fitted.model, data.dev)
    assert probabilities.shape == (len(data.dev), 2) and np.allclose(probabilities.sum(1), 1.0, atol=1e-5)
    scores = task.score(fitted.model, data.dev)
    assert task.headline_metric in scores and 0.0 <= scores[task.headline_metric] <= 1.0
    baselines = task.fit_baselines(options, data.train, data.dev)
    assert baselines[DEPTH_BASELINE_NAME]["auroc"] == 1.0  # the mean depth inside the mask separates the radii
