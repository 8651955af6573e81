"""Each task trained and predicted with ``--device cuda`` on tiny data written here, and the trained model read back
on the CPU: the GPU and the CPU give the same predictions. Skipped cleanly without a CUDA device (``gpu`` marker)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bioattn.cli import main
from bioattn.models.promoter import PromoterClassifier
from tests.helpers.files import write_tiny_adrenalmnist3d

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

#: fp32 on the GPU (cuDNN convolutions, TF32 off by default for matrix products) against the CPU.
PROBABILITY_TOLERANCE = 2e-3


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def probabilities(rows: list[dict[str, str]]) -> np.ndarray:
    """The probability columns: ``p_<class>`` (CT, several classes) or ``promoter_probability`` (a binary promoter)."""
    return np.array([[float(v) for k, v in row.items() if k.startswith("p_") or k.endswith("probability")]
                     for row in rows])


def predict_on_both(argv: list[str], output: Path) -> tuple[np.ndarray, np.ndarray]:
    """The class probabilities of ``argv + --output`` run with ``--device cuda`` and with ``--device cpu``."""
    results = []
    for device in ("cuda", "cpu"):
        target = output.with_name(f"{output.stem}_{device}.csv")
        assert main([*argv, "--output", str(target), "--device", device]) == 0
        results.append(probabilities(read_csv(target)))
    return results[0], results[1]


def test_promoter_trains_on_cuda_and_predicts_alike_on_cuda_and_cpu(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = ["sequence,label"] + [
        "".join(rng.choice(list("GC" if label else "AT"), 40)) + f",{label}" for label in np.arange(200) % 2
    ]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    run = tmp_path / "run"
    assert main(["train", "promoter", "--train", str(tmp_path / "train.csv"), "--out", str(run), "--quick",
                 "--epochs", "1", "--device", "cuda"]) == 0
    model = PromoterClassifier.from_pretrained(run, map_location="cuda")
    assert next(model.parameters()).is_cuda
    on_gpu, on_cpu = predict_on_both(["predict", "promoter", "--model", str(run), "--input", str(tmp_path / "train.csv")],
                                     tmp_path / "predictions.csv")
    assert on_gpu.shape == (200, 1)
    np.testing.assert_allclose(on_gpu, on_cpu, atol=PROBABILITY_TOLERANCE)


def test_ct_trains_on_cuda_and_predicts_alike_on_cuda_and_cpu(tmp_path: Path) -> None:
    data_file = write_tiny_adrenalmnist3d(tmp_path / "root")
    run = tmp_path / "run"
    assert main(["train", "ct", "--quick", "--baseline", "none", "--data-root", str(tmp_path / "root"),
                 "--out", str(run), "--device", "cuda"]) == 0
    on_gpu, on_cpu = predict_on_both(["predict", "ct", "--model", str(run), "--input", str(data_file), "--split", "val"],
                                     tmp_path / "predictions.csv")
    assert on_gpu.shape == (8, 2)
    np.testing.assert_allclose(on_gpu, on_cpu, atol=PROBABILITY_TOLERANCE)


@pytest.mark.parametrize("task", ["promoter", "ct"])
def test_deterministic_runs_of_one_seed_match_bit_for_bit_on_cuda(tmp_path: Path, task: str) -> None:
    """cuDNN's 3D convolutions, the embedding and attention backward passes: each differs between runs without it."""
    if task == "promoter":
        rng = np.random.default_rng(1)
        rows = ["sequence,label"] + ["".join(rng.choice(list("GC" if y else "AT"), 40)) + f",{y}"
                                     for y in np.arange(200) % 2]
        (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
        argv = ["train", "promoter", "--train", str(tmp_path / "train.csv"), "--quick", "--epochs", "2"]
    else:
        write_tiny_adrenalmnist3d(tmp_path / "root")
        # without the MONAI ResNet baseline: its 3D max pooling has no deterministic CUDA backward (torch warns)
        argv = ["train", "ct", "--quick", "--baseline", "none", "--data-root", str(tmp_path / "root")]
    runs = [tmp_path / "first", tmp_path / "second"]
    for run in runs:
        assert main([*argv, "--out", str(run), "--device", "cuda", "--deterministic"]) == 0
    first, second = (load_file(run / "model.safetensors") for run in runs)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)


def test_msa_trains_on_cuda_and_its_attention_maps_match_the_cpu(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    amino = "ACDEFHIKLMNPQRSTVWY"
    tokens = rng.integers(0, len(amino), (60, 30))
    tokens[:, 28] = (tokens[:, 1] + 7) % len(amino)  # one planted coevolving pair
    alignment = tmp_path / "tiny.a3m"
    alignment.write_text("".join(f">seq{k}\n{''.join(amino[t] for t in row)}\n" for k, row in enumerate(tokens)))
    run = tmp_path / "run"
    assert main(["train", "msa", "--input", str(alignment), "--out", str(run), "--quick", "--device", "cuda"]) == 0
    maps = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"explained_{device}"
        assert main(["explain", "msa", "--model", str(run), "--input", str(alignment), "--out", str(out),
                     "--method", "rollout", "--no-faithfulness", "--device", device]) == 0
        maps[device] = load_file(out / "row_attention.safetensors")
    assert maps["cuda"].keys() == maps["cpu"].keys() and maps["cuda"]
    for name, attention in maps["cuda"].items():
        torch.testing.assert_close(attention, maps["cpu"][name], atol=PROBABILITY_TOLERANCE, rtol=0)
