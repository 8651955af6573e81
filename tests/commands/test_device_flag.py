"""``--device auto|cpu|cuda`` on every command that runs a model, and loading onto a device PyTorch does not see."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.models.promoter import PromoterClassifier
from bioattn.training import TrainConfig

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without CUDA does")

#: Every command that runs a model, with what it needs besides --device (inputs need not exist: the device fails first).
COMMANDS = {
    "train-promoter": ["train", "promoter", "--out", "{tmp}/out"],
    "train-ct": ["train", "ct", "--out", "{tmp}/out"],
    "train-msa": ["train", "msa", "--out", "{tmp}/out"],
    "predict-promoter": ["predict", "promoter", "--model", "gue-prom-core-all", "--input", "{tmp}/x.fa",
                         "--output", "{tmp}/out"],
    "predict-ct": ["predict", "ct", "--model", "adrenalmnist3d-28", "--input", "{tmp}/x.npz", "--output", "{tmp}/out"],
    "predict-msa": ["predict", "msa", "--input", "{tmp}/x.a3m", "--out", "{tmp}/out"],
    "explain-promoter": ["explain", "promoter", "--model", "gue-prom-core-all", "--input", "{tmp}/x.fa",
                         "--out", "{tmp}/out"],
    "explain-ct": ["explain", "ct", "--model", "adrenalmnist3d-28", "--input", "{tmp}/x.npz", "--out", "{tmp}/out"],
    "explain-msa": ["explain", "msa", "--model", "{tmp}/run", "--input", "{tmp}/x.a3m", "--out", "{tmp}/out"],
}


def _write_inputs(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    (tmp_path / "x.fa").write_text("".join(f">s{i}\n{''.join(rng.choice(list('ACGT'), 70))}\n" for i in range(3)))
    np.savez(tmp_path / "x.npz", val_images=np.zeros((1, 28, 28, 28), dtype=np.uint8), val_labels=np.array([[0]]))
    (tmp_path / "x.a3m").write_text(">q\nACDEFGHIKL\n>b\nACDEFGHIKM\n")


@no_gpu
@pytest.mark.parametrize("command", COMMANDS)
def test_cuda_without_a_gpu_is_one_error_line_and_writes_nothing(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_inputs(tmp_path)
    argv = [arg.format(tmp=tmp_path) for arg in COMMANDS[command]]
    assert main([*argv, "--device", "cuda"]) == 2
    error_lines = capsys.readouterr().err.strip().splitlines()
    assert len(error_lines) == 1 and error_lines[0].startswith("error: device cuda requested")
    assert not (tmp_path / "out").exists()


@no_gpu
@pytest.mark.slow
def test_device_cpu_gives_the_same_explanation_as_auto_on_a_machine_without_a_gpu(tmp_path: Path) -> None:
    _write_inputs(tmp_path)
    outputs = {}
    for device in ("cpu", "auto"):
        out = tmp_path / device
        assert main(["explain", "promoter", "--model", "gue-prom-core-all", "--input", str(tmp_path / "x.fa"),
                     "--out", str(out), "--plot-sequences", "0", "--motif", "", "--device", device]) == 0
        outputs[device] = (out / "predictions.tsv").read_text()
    assert outputs["cpu"] == outputs["auto"] and len(outputs["cpu"].splitlines()) == 4


def test_train_config_checks_the_device() -> None:
    assert TrainConfig(device="cpu").device == "cpu"
    with pytest.raises(UserInputError, match="device must be one of auto, cpu, cuda; got 'tpu'"):
        TrainConfig(device="tpu")


@no_gpu
def test_loading_onto_cuda_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(UserInputError, match="cannot load gue-prom-core-all onto cuda: PyTorch sees no CUDA GPU"):
        PromoterClassifier.from_pretrained("gue-prom-core-all", map_location="cuda")


@pytest.mark.parametrize("processes,gpus,expected", [(1, 1, True), (2, 1, False), (2, 2, True), (1, 0, False)])
def test_processes_use_gpus_only_when_each_process_of_the_node_has_one(processes, gpus, expected, monkeypatch) -> None:
    """torchrun with more processes than GPUs (e.g. CPU data parallelism on a 1-GPU machine) trains on the CPU with
    gloo instead of asking for GPU ordinals that do not exist."""
    from bioattn import distributed

    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(processes))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    assert distributed.gpu_per_process() is expected
    assert distributed.default_device().type == ("cuda" if expected else "cpu")
