"""``bioattn predict ct`` and ``bioattn train ct`` on MedMNIST: outputs, attention NIfTI on the input grid, protocols,
bad inputs. (Own NIfTI/DICOM data: ``tests/tasks/ct/test_train_ct_own_data.py``.)"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.io import load_tensors
from bioattn.metrics import classification_metrics
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.ct import fit as ct_fit
from bioattn.tasks.ct.train import resolve_protocol
from bioattn.training.mixup import mixup_cross_entropy
from tests.helpers import REPO_ROOT
from tests.helpers.real_data import data_path

AFFINE = np.array([[0.0, -1.5, 0, 30.0], [2.0, 0, 0, -4.0], [0, 0, 2.5, 11.0], [0, 0, 0, 1]])  # axes swapped


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = HybridCT3D(1, 2, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=24, num_heads=2, num_layers=2,
                       dropout=0.0, class_names=["normal", "hyperplasia"])
    path = tmp_path_factory.mktemp("run")
    model.save_pretrained(path)
    return path


def _nifti(path: Path, data: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(data, AFFINE), path)
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_nifti_probabilities_and_attention_map_on_the_input_grid(run_dir: Path, tmp_path: Path) -> None:
    hu = np.random.default_rng(0).uniform(-1200, 1200, size=(10, 9, 7)).astype(np.float32)
    scan = _nifti(tmp_path / "scan.nii.gz", hu)
    out, overlay = tmp_path / "pred" / "probs.csv", tmp_path / "pred" / "attention.nii.gz"
    code = cli_main(["predict", "ct", "--model", str(run_dir), "--input", str(scan), "--output", str(out),
                     "--attention-map", str(overlay), "--intensity-window", "-1000", "1000"])
    assert code == 0
    [row] = _rows(out)
    probs = torch.tensor([float(row["p_normal"]), float(row["p_hyperplasia"])])
    # Reference: window to [0, 1], symmetric zero pad to a multiple of the stride (4), then the model.
    x = torch.from_numpy(np.clip((hu + 1000) / 2000, 0, 1))
    x = F.pad(x, (0, 1, 1, 2, 1, 1))  # (10, 9, 7) -> (12, 12, 8)
    expected = HybridCT3D.from_pretrained(run_dir)(x[None, None]).softmax(-1)[0]
    assert torch.allclose(probs, expected, atol=1e-5)
    attention = nib.load(overlay)
    assert attention.shape == hu.shape
    assert np.allclose(attention.affine, AFFINE)
    values = attention.get_fdata()
    assert np.isclose(values.max(), 1.0) and values.min() >= 0


@pytest.mark.slow
def test_flip_tta_averages_the_eight_flips_of_the_preprocessed_volume(run_dir: Path, tmp_path: Path) -> None:
    hu = np.random.default_rng(1).uniform(-1200, 1200, size=(8, 8, 8)).astype(np.float32)
    scan = _nifti(tmp_path / "scan.nii.gz", hu)
    out_plain, out_tta = tmp_path / "plain.csv", tmp_path / "tta.csv"
    common = ["predict", "ct", "--model", str(run_dir), "--input", str(scan), "--intensity-window", "-1000", "1000"]
    assert cli_main([*common, "--output", str(out_plain)]) == 0
    assert cli_main([*common, "--output", str(out_tta), "--tta", "flips"]) == 0
    got = torch.tensor([float(_rows(out_tta)[0][k]) for k in ("p_normal", "p_hyperplasia")])
    plain = torch.tensor([float(_rows(out_plain)[0][k]) for k in ("p_normal", "p_hyperplasia")])
    x = torch.from_numpy(np.clip((hu + 1000) / 2000, 0, 1))[None, None]  # 8³ is already a multiple of the stride
    model = HybridCT3D.from_pretrained(run_dir).eval()
    with torch.no_grad():
        flips = [x.flip(axes) if axes else x for axes in [(), (2,), (3,), (4,), (2, 3), (2, 4), (3, 4), (2, 3, 4)]]
        expected = torch.stack([model(v).softmax(-1)[0] for v in flips]).mean(0)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert not torch.allclose(plain, got, atol=1e-6)  # the average really differs from the single pass


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_attention_map_on_real_ct_keeps_grid_and_affine(require_data, run_dir: Path, tmp_path: Path) -> None:
    scan = require_data("ct", "totalsegmentator_example", "example_ct_sm.nii.gz")
    out = tmp_path / "probs.csv"
    args = ["predict", "ct", "--model", str(run_dir), "--input", str(scan), "--output", str(out), "--attention-map",
            "--intensity-window", "-160", "240"]
    reference = nib.load(scan)
    # 122x101x30 at stride 4 is 6448 tokens, more than a full N x N map per layer allows: the map is computed in chunks
    for resize in ([], ["--size", "32", "32", "16", "--fit", "resize"]):
        assert cli_main([*args, *resize]) == 0
        overlay = nib.load(tmp_path / "probs.attention.nii.gz")
        assert overlay.shape == reference.shape == (122, 101, 30)
        assert np.allclose(overlay.affine, reference.affine)
        assert len(_rows(out)) == 1


def test_npz_predicts_every_split_or_one(run_dir: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 3), ("val", 2), ("test", 4)):
        arrays[f"{split}_images"] = rng.integers(0, 256, size=(n, 7, 8, 6), dtype=np.uint8)  # padded to 8x8x8
        arrays[f"{split}_labels"] = np.ones((n, 1), np.uint8)
    volumes = tmp_path / "official.npz"
    np.savez(volumes, **arrays)
    out = tmp_path / "all.csv"
    assert cli_main(["predict", "ct", "--model", str(run_dir), "--input", str(volumes), "--output", str(out)]) == 0
    rows = _rows(out)
    assert [r["split"] for r in rows] == ["train"] * 3 + ["val"] * 2 + ["test"] * 4
    assert all(r["label"] == "1" for r in rows)
    assert all(abs(float(r["p_normal"]) + float(r["p_hyperplasia"]) - 1) < 1e-5 for r in rows)
    assert cli_main(["predict", "ct", "--model", str(run_dir), "--input", str(volumes), "--output", str(out),
                     "--split", "test"]) == 0
    assert [r["index"] for r in _rows(out)] == ["0", "1", "2", "3"]


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, list[str], str]]:
    """name -> (input, extra flags, expected message)."""
    nan = np.ones((8, 8, 8), np.float32)
    nan[2, 3, 4] = np.nan
    broken = tmp_path / "broken.nii.gz"
    broken.write_bytes(b"\x1f\x8b definitely not a NIfTI")
    not_dicom = tmp_path / "broken.dcm"
    not_dicom.write_bytes(b"DICOM? no")
    no_keys, flat, rgb = tmp_path / "no_keys.npz", tmp_path / "flat.npz", tmp_path / "rgb.npz"
    np.savez(no_keys, images=np.zeros((2, 8, 8, 8), np.uint8))
    np.savez(flat, train_images=np.zeros((2, 28, 28), np.uint8), train_labels=np.zeros((2, 1), np.uint8))
    np.savez(rgb, val_images=np.zeros((2, 3, 8, 8, 8), np.uint8), val_labels=np.zeros((2, 1), np.uint8))
    good = tmp_path / "good.npz"
    np.savez(good, val_images=np.zeros((2, 8, 8, 8), np.uint8), val_labels=np.zeros((2, 1), np.uint8))
    return {
        "nan voxels": (_nifti(tmp_path / "nan.nii.gz", nan), [], "1 voxel is NaN or infinite"),
        "2D image": (_nifti(tmp_path / "slice.nii.gz", np.ones((8, 8, 1), np.float32)), [], "a 2D image (8x8)"),
        "wrong channels": (_nifti(tmp_path / "two.nii.gz", np.ones((8, 8, 8, 2), np.float32)), [],
                           "has 2 channel(s), the model expects 1"),
        "unreadable NIfTI": (broken, [], "cannot read as NIfTI"),
        "unreadable DICOM": (not_dicom, [], "cannot read as DICOM"),
        "npz without keys": (no_keys, [], "no MedMNIST arrays found"),
        "npz of 2D images": (flat, [], "2D images of shape (2, 28, 28)"),
        "npz wrong channels": (rgb, [], "volumes have 3 channel(s), the model expects 1"),
        "npz missing split": (good, ["--split", "test"], "has no test split"),
        "attention map for npz": (good, ["--attention-map"], "--attention-map needs one NIfTI or DICOM input"),
        "HU window for npz": (good, ["--intensity-window", "0", "1"], "--intensity-window apply to NIfTI/DICOM inputs, not to a .npz"),
        "missing file": (tmp_path / "nowhere.nii.gz", [], "file not found"),
    }


@pytest.mark.slow
def test_bad_inputs_exit_2_with_one_line_and_write_nothing(run_dir: Path, tmp_path: Path, capsys) -> None:
    for name, (path, flags, message) in _bad_inputs(tmp_path).items():
        out = tmp_path / "out" / f"{name.replace(' ', '_')}.csv"
        code = cli_main(["predict", "ct", "--model", str(run_dir), "--input", str(path), "--output", str(out), *flags])
        err = capsys.readouterr().err.strip()
        assert code == 2, name
        assert err.startswith("error: ") and "\n" not in err, (name, err)
        assert str(path) in err and message in err, (name, err)
        assert not out.exists(), name
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_single_dicom_slice_exits_2_without_traceback(require_data, run_dir: Path, tmp_path: Path) -> None:
    """Through a real process: exit status 2, one error line, no traceback."""
    dicom = require_data("ct", "pydicom_ct_small", "CT_small.dcm")
    out = tmp_path / "p.csv"
    result = subprocess.run(
        [sys.executable, "-m", "bioattn.cli", "predict", "ct", "--model", str(run_dir), "--input", str(dicom),
         "--output", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {dicom}: a 2D image (128x128)")
    assert not out.exists()


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from intra-op threads; on a busy 2-core runner they lose a lot."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(*argv: str) -> int:
    return cli_main(["train", "ct", *argv])


def _hybrid(metrics: dict) -> dict:
    return next(v for k, v in metrics["models"].items() if "hybrid" in k)


@pytest.fixture(scope="module")
def quick_64(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    """One quick run on the real volumes at the default 64³, the hybrid alone, with mixup 0.2 (and the α of every
    mixed step): the end-to-end test and the tuned-protocol test read it. The baseline is trained beside the 28³
    runs of the end-to-end test (what it checks does not depend on the size)."""
    data_path("ct", "adrenalmnist3d")
    out = tmp_path_factory.mktemp("quick_64") / "run"
    alphas: list[float] = []

    def spy(*args, alpha: float, **kwargs) -> torch.Tensor:
        alphas.append(alpha)
        return mixup_cross_entropy(*args, alpha=alpha, **kwargs)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ct_fit, "mixup_cross_entropy", spy)
            assert _train("--out", str(out), "--quick", "--deterministic", "--baseline", "none", "--mixup", "0.2") == 0
    finally:
        torch.set_num_threads(threads)
    return out, alphas


@pytest.mark.slow
def test_train_quick_end_to_end_on_real_data(quick_64, tmp_path: Path, one_thread) -> None:
    out, _ = quick_64
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["splits"] == {"train": 1188, "val": 98} and not metrics["test_split_present"]
    assert set(metrics["published_test_auroc_accuracy"]) >= {"ResNet-18+3D", "ResNet-50+3D", "ResNet-18+ACS"}
    (hybrid,) = metrics["models"].values()
    assert 0.0 <= hybrid["val_auroc"] <= 1.0 and 0.0 <= hybrid["val_accuracy"] <= 1.0
    assert {"val_mcc", "val_f1", "val_loss"} <= set(hybrid)
    assert hybrid["optimizer_steps"] == 6 and "test_auroc" not in hybrid
    for name in ("config.json", "model.safetensors", "preprocessing.json", "training_curve.png", "val_auc.png"):
        assert (out / name).is_file(), name
    model = HybridCT3D.from_pretrained(out)
    assert model.class_names == ["normal", "hyperplasia"]
    saved = json.loads((out / "preprocessing.json").read_text())
    assert saved["source"] == "medmnist" and saved["flip_tta"]  # the default (tuned) protocol averages the 8 flips
    assert saved["training_volumes"]["binary"] and saved["training_volumes"]["model_input_shape"] == [64, 64, 64]
    assert model.config["unshuffle"] == 2  # the default 64³ volumes reach the stem as 32³ of 8 channels
    assert model.config["distance_channel"]  # binary masks: the stem also sees each voxel's depth in the mask
    # the saved weights are the best-val-AUROC weights the metrics were computed with
    assert hybrid["val_auroc"] == max(h["val_auroc"] for h in hybrid["val_history"])
    # With the same-run baseline (the default), at 28³: both models' metrics and files. The baseline trained beside a
    # different attention model is the same baseline: same start, same batches (bit for bit on a CPU; on a GPU its 3D
    # max pooling has no deterministic backward, so the last bits may differ there).
    # Without flip averaging: 8 times fewer validation passes, and nothing checked here depends on it.
    small = ("--quick", "--deterministic", "--size", "28", "--tta", "none")
    same, other = tmp_path / "same", tmp_path / "other"
    assert _train("--out", str(same), *small) == 0
    models = json.loads((same / "metrics.json").read_text())["models"]
    assert len(models) == 2
    for result in models.values():
        assert 0.0 <= result["val_auroc"] <= 1.0 and {"val_mcc", "val_f1", "val_loss"} <= set(result)
        assert result["optimizer_steps"] == 6 and "test_auroc" not in result
    for name in ("model.safetensors", "baseline_resnet/model.safetensors", "baseline_resnet/training_curve.png"):
        assert (same / name).is_file(), name
    # an existing run is not overwritten without --resume/--overwrite; --resume of a finished run keeps its result
    assert _train("--out", str(same), *small) == 2
    assert _train("--out", str(same), *small, "--resume") == 0
    resumed = json.loads((same / "metrics.json").read_text())["models"]
    assert {k: v["val_auroc"] for k, v in resumed.items()} == {k: v["val_auroc"] for k, v in models.items()}
    assert _train("--out", str(other), *small, "--stem-depth", "1") == 0
    assert HybridCT3D.from_pretrained(other).config["stem_depth"] == 1
    assert HybridCT3D.from_pretrained(same).config["stem_depth"] != 1
    baseline, same_baseline = (load_tensors(run / "baseline_resnet" / "model.safetensors") for run in (same, other))
    assert baseline.keys() == same_baseline.keys()
    if not torch.cuda.is_available():
        assert all(torch.equal(baseline[key], same_baseline[key]) for key in baseline)
    assert baseline["network.conv1.weight"].shape[1] == 2  # the baseline sees the depth channel too
    # --no-distance-channel: neither model gets the depth; recorded with the run
    plain = tmp_path / "plain"
    assert _train("--out", str(plain), *small, "--no-distance-channel") == 0
    assert not HybridCT3D.from_pretrained(plain).config["distance_channel"]
    assert json.loads((plain / "run_config.json").read_text())["recipe"]["distance_channel"] is False
    assert load_tensors(plain / "baseline_resnet" / "model.safetensors")["network.conv1.weight"].shape[1] == 1


@pytest.mark.slow
def test_recipe_script_is_the_train_command(tmp_path: Path) -> None:
    """``python recipes/ct_classify.py`` takes the flags of ``bioattn train ct`` (notebooks call it)."""
    folder = tmp_path / "ct" / "adrenalmnist3d"
    folder.mkdir(parents=True)
    np.savez(folder / "adrenalmnist3d.npz", val_images=np.zeros((2, 8, 8, 8), np.uint8), val_labels=np.zeros((2, 1)))
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "recipes" / "ct_classify.py"), "--data-root", str(tmp_path), "--dataset",
         "adrenalmnist3d", "--size", "28", "--out", str(out), "--quick", "--seed", "0"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {folder / 'adrenalmnist3d.npz'}: needs a train split (has val)")
    assert not out.exists()


def _options(*argv: str):
    from bioattn.commands import task_command
    from bioattn.tasks.ct.commands import TrainCT

    parser = argparse.ArgumentParser()
    task_command.add_arguments(parser, TrainCT)
    return task_command.options_from_args(TrainCT, parser.parse_args(["--out", "x", *argv])).options()


def test_protocols_set_their_defaults_and_flags_override_them() -> None:
    official = _options("--protocol", "medmnist")
    protocol = resolve_protocol(official)
    config = official.train_config
    assert (config.optimizer, config.lr, config.batch_size, config.weight_decay) == ("adam", 1e-3, 32, 0.0)
    assert (config.schedule, config.max_epochs, config.milestones) == ("multistep", 100, (50, 75))
    assert (config.monitor, config.monitor_mode) == ("val_auroc", "max")
    assert (protocol.label_smoothing, protocol.flip_tta, protocol.intensity_jitter, protocol.mixup) == (
        0.0, False, 0.1, 0.0)
    tuned = _options()  # the default protocol
    assert tuned.protocol == "tuned"
    protocol = resolve_protocol(tuned)
    config = tuned.train_config
    assert (config.optimizer, config.schedule, config.max_epochs, config.weight_decay) == (
        "adamw", "warmup_cosine", 15, 0.05)
    assert (protocol.label_smoothing, protocol.flip_tta, protocol.intensity_jitter, protocol.mixup) == (
        0.1, True, 0.0, 0.0)
    options = _options("--protocol", "tuned", "--epochs", "7", "--tta", "none", "--label-smoothing", "0",
                       "--intensity-jitter", "0.2", "--mixup", "0.4")
    protocol = resolve_protocol(options)
    assert options.train_config.max_epochs == 7
    assert (protocol.label_smoothing, protocol.flip_tta, protocol.intensity_jitter, protocol.mixup) == (
        0.0, False, 0.2, 0.4)
    quick = _options("--quick")
    assert (quick.train_config.max_epochs, quick.train_config.max_steps_per_epoch, quick.train_config.batch_size) == (2, 3, 8)
    with pytest.raises(UserInputError, match=r"--label-smoothing must be in \[0, 1\), got 1.5"):
        resolve_protocol(_options("--label-smoothing", "1.5"))
    with pytest.raises(UserInputError, match=r"--mixup must be >= 0 \(0: off\), got -0.2"):
        resolve_protocol(_options("--mixup", "-0.2"))
    assert _options().stem_depth == 4 and _options("--stem-depth", "2").stem_depth == 2
    with pytest.raises(UserInputError, match="--stem-depth must be >= 1, got 0"):
        _options("--stem-depth", "0")


@pytest.mark.slow
def test_tuned_protocol_records_itself_and_the_tta_ablation(quick_64, tmp_path: Path, one_thread) -> None:
    out, alphas = quick_64  # the default protocol, tuned, with --mixup 0.2 and --baseline none
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["recipe"]["name"] == "tuned" and metrics["recipe"]["flip_tta"]
    assert metrics["recipe"]["mixup"] == 0.2 and alphas == [0.2] * 6  # every training step mixes (2 epochs of 3)
    assert metrics["recipe"]["train"]["optimizer"] == "adamw"
    (hybrid,) = metrics["models"].values()
    assert all("val_auroc_no_tta" in h for h in hybrid["val_history"])
    assert hybrid["val_auroc_last_epoch"] == hybrid["val_history"][-1]["val_auroc"]
    # the run remembers that it evaluates with flip averaging: predict reproduces its validation numbers (the CSV
    # holds 6 significant digits, which can tie near-equal probabilities of this tiny model: AUROC to 1e-3)
    probs = tmp_path / "val.csv"
    npz = data_path("ct", "adrenalmnist3d", "adrenalmnist3d_64_trainval.npz")

    def scores(*flags: str) -> tuple[dict, list[dict]]:
        assert cli_main(["predict", "ct", "--model", str(out), "--input", str(npz), "--split", "val",
                         "--output", str(probs), *flags]) == 0
        rows = _rows(probs)
        labels = np.array([int(r["label"]) for r in rows])
        return classification_metrics(labels, np.array([float(r["p_hyperplasia"]) for r in rows])), rows

    default, rows = scores()
    assert default["auroc"] == pytest.approx(hybrid["val_auroc"], abs=1e-3)
    assert default["loss"] == pytest.approx(hybrid["val_loss"], rel=1e-4)
    assert not any(r["warning"] for r in rows)  # the validation volumes look like the training volumes
    assert scores("--tta", "flips")[0]["loss"] == pytest.approx(default["loss"], rel=1e-6)
    plain, _ = scores("--tta", "none")
    best = hybrid["val_history"][hybrid["best_epoch"] - 1]
    assert plain["auroc"] == pytest.approx(best["val_auroc_no_tta"], abs=1e-3)
    assert plain["auroc"] != pytest.approx(default["auroc"], abs=1e-3)  # so the default really is the flip average


def test_train_refuses_a_file_without_a_train_split(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ct" / "adrenalmnist3d"
    folder.mkdir(parents=True)
    np.savez(folder / "adrenalmnist3d.npz", val_images=np.zeros((2, 8, 8, 8), np.uint8), val_labels=np.zeros((2, 1)))
    out = tmp_path / "run"
    assert _train("--data-root", str(tmp_path), "--out", str(out), "--quick", "--size", "28") == 2
    assert "needs a train split" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dataset", "adrenalmnist3d", "--manifest", "labels.csv"], None),  # argparse: not allowed with
        (["--intensity-window", "0", "1"], "--intensity-window apply to --manifest volumes, not to a MedMNIST dataset"),
        (["--size", "32"], "--size of a MedMNIST dataset must be 28 or 64, got 32"),
    ],
)
def test_dataset_and_manifest_options_do_not_mix(argv: list[str], message: str | None, tmp_path: Path, capsys) -> None:
    if message is None:
        with pytest.raises(SystemExit) as info:
            _train("--out", str(tmp_path / "run"), *argv)
        assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
        return
    assert _train("--out", str(tmp_path / "run"), *argv) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
