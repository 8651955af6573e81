"""The Python API for strings and files: ``model.predict_proba(["ACGT...", ...])`` on a promoter model or
ensemble, ``predict_proba_files(model, path)`` (:mod:`bioattn.tasks.ct.volumes`) with the run's saved
preprocessing, both equal to what the CLI computes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.ct import VolumePreprocessing, write_nifti
from bioattn.data.dna import reverse_complement
from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.ensemble import Ensemble
from bioattn.tasks.ct import predict as ct_predict
from bioattn.tasks.ct.preprocessing import SavedPreprocessing
from bioattn.tasks.ct.volumes import predict_proba_files

SEQUENCES = ["ACGTTATAAAGGCGCGCTAGCTAGGATCCGATCGATCGTAGCTAGCTAGGGGCCCATATATATGCGCAT",
             "ttgacaNNNNtataatgcgcgcgatcgatcga", "GCGCGCGCGCGCRYACGT", "A" * 70]


def _cli_probabilities(model: str, tmp_path: Path, capsys) -> np.ndarray:
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(SEQUENCES)))
    assert cli_main(["predict", "promoter", "--model", model, "--input", str(fasta), "--output", "-"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()[1:]]
    return np.array([float(row[1]) for row in rows])


@pytest.mark.parametrize("name", ["gue-prom-core-all", "gue-prom-core-all-ensemble"])
def test_promoter_predict_on_strings_equals_the_command(name: str, tmp_path: Path, capsys) -> None:
    model = load_pretrained(name, expect=PromoterClassifier)
    assert isinstance(model, Ensemble) == name.endswith("ensemble")
    probabilities = model.predict_proba(SEQUENCES)
    assert probabilities.shape == (len(SEQUENCES), 2)
    np.testing.assert_allclose(probabilities[:, 1], _cli_probabilities(name, tmp_path, capsys), atol=1e-5)
    # one at a time (no padding) equals the padded batch; one string is a list of one
    alone = np.concatenate([model.predict_proba(s) for s in SEQUENCES])
    np.testing.assert_allclose(alone, probabilities, atol=1e-5)


def test_promoter_predict_uses_the_runs_strand_handling(tmp_path: Path) -> None:
    torch.manual_seed(0)
    PromoterClassifier(max_len=40, embed_dim=16, num_heads=2, num_layers=1, rc_average=True).save_pretrained(tmp_path / "both")
    both = load_pretrained(tmp_path / "both")
    forward, backward = both.predict_proba(SEQUENCES[1]), both.predict_proba(reverse_complement(SEQUENCES[1]))
    np.testing.assert_allclose(forward, backward, atol=1e-6)  # the mean of both strands, as the run evaluated
    assert not np.allclose(both.predict_proba(SEQUENCES[1], rc_average=False),
                           both.predict_proba(reverse_complement(SEQUENCES[1]), rc_average=False), atol=1e-6)


def test_promoter_predict_names_the_bad_sequence() -> None:
    model = PromoterClassifier.from_pretrained("gue-prom-core-all")
    with pytest.raises(UserInputError, match="sequence 1: 71 nt long; this model accepts at most 70"):
        model.predict_proba(["ACGT", "A" * 71])
    with pytest.raises(UserInputError, match="sequence 0: invalid character 'U' at position 3"):
        model.predict(["ACUG"])


def _hu_volume(rng: np.random.Generator, lesion: bool) -> np.ndarray:
    volume = rng.normal(-100, 30, (20, 18, 22)).astype(np.float32)
    if lesion:
        volume[6:12, 6:12, 8:14] = 180.0
    return volume


def test_ct_predict_on_nifti_paths_applies_the_saved_preprocessing(tmp_path: Path) -> None:
    torch.manual_seed(0)
    run = tmp_path / "run"
    HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=1,
               dropout=0.0, class_names=["normal", "lesion"]).eval().save_pretrained(run)
    steps = VolumePreprocessing(orientation="RAS", window=(-160.0, 240.0), size=(16, 16, 16))
    SavedPreprocessing(source="manifest", preprocessing=steps, flip_tta=True).save(run)
    rng = np.random.default_rng(0)
    affine = np.diag([-0.8, 0.9, 1.5, 1.0])  # not the identity: orientation and size matter
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"scan{i}.nii.gz")
        write_nifti(paths[-1], _hu_volume(rng, lesion=i == 1), affine)

    model = HybridCT3D.from_pretrained(run)
    assert model.input_preprocessing == steps and model.flip_tta
    many = predict_proba_files(model, paths)
    assert many.shape == (3, 2)
    np.testing.assert_allclose(many.sum(1), 1.0, atol=1e-5)
    loaded, saved = ct_predict.load_run(run)
    for path, row in zip(paths, many):
        expected, _ = ct_predict.predict_volume(loaded, path, ct_predict.resolve_preprocessing(saved), saved,
                                                flip_tta=ct_predict.resolve_flip_tta(saved, None))
        np.testing.assert_allclose(row, expected.probabilities, atol=1e-5)
    np.testing.assert_allclose(predict_proba_files(model, str(paths[1])), many[1:2], atol=1e-6)  # one path: (1, K)
    # the saved window matters: raw Hounsfield units give other numbers
    raw = predict_proba_files(model, paths, preprocessing=VolumePreprocessing(orientation="RAS", size=(16, 16, 16)))
    assert not np.allclose(raw, many, atol=1e-4)
    with pytest.raises(UserInputError, match="missing.nii.gz"):
        predict_proba_files(model, [paths[0], tmp_path / "missing.nii.gz"])
    with pytest.raises(UserInputError, match="a model reads no files"):
        model.predict_proba(paths)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_ct_ensemble_and_shipped_model_predict_paths(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    mask = np.zeros((28, 28, 28), dtype=np.float32)
    mask[10:18, 9:19, 11:16] = 1.0
    path = tmp_path / "mask.nii.gz"
    write_nifti(path, mask, np.eye(4))
    model = load_pretrained("adrenalmnist3d-28")
    assert model.flip_tta  # from the shipped preprocessing.json
    loaded, saved = ct_predict.load_run("adrenalmnist3d-28")
    expected, _ = ct_predict.predict_volume(loaded, path, ct_predict.resolve_preprocessing(saved), saved, flip_tta=True)
    np.testing.assert_allclose(predict_proba_files(model, path)[0], expected.probabilities, atol=1e-5)

    torch.manual_seed(0)
    ensemble_dir = tmp_path / "ensemble"
    for seed in (0, 1):
        HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=1,
                   dropout=0.0).eval().save_pretrained(ensemble_dir / f"seed{seed}")
    from bioattn.io import write_json
    from bioattn.models.ensemble import ensemble_config

    write_json(ensemble_dir / "config.json", ensemble_config("HybridCT3D", ["seed0", "seed1"]))
    SavedPreprocessing(source="manifest", preprocessing=VolumePreprocessing(size=(16, 16, 16))).save(ensemble_dir)
    ensemble = load_pretrained(ensemble_dir, expect=HybridCT3D)
    members = [HybridCT3D.from_pretrained(ensemble_dir / f"seed{seed}") for seed in (0, 1)]
    steps = VolumePreprocessing(size=(16, 16, 16))
    mean = np.mean([predict_proba_files(m, path, preprocessing=steps) for m in members], axis=0)
    np.testing.assert_allclose(predict_proba_files(ensemble, path), mean, atol=1e-5)
    del rng
