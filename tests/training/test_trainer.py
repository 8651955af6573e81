"""The shared training engine: distributed parity, exact resume after SIGKILL, faults, config, run dirs."""
from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from bioattn.errors import TrainingDivergedError, UserInputError
from bioattn.io import load_tensors
from bioattn.commands.training_args import add_training_args, config_from_args
from bioattn.training import (
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    plot_curves,
    prepare_run_dir,
    seed_everything,
)
from bioattn.training import checkpoint as ckpt
from bioattn.training import trainer as trainer_module
from bioattn.training.averaging import EMA_WARMUP, weight_average
from bioattn.training.determinism import CUBLAS_WORKSPACE_CONFIG, deterministic_kernels
from bioattn.training.schedules import lr_factor
from tests.helpers import REPO_ROOT
from tests.training import toy_recipe as toyrun

TOYRUN = Path(toyrun.__file__)


def _train_losses(run_dir: Path) -> list[float]:
    with open(run_dir / "train_log.csv", newline="") as handle:
        return [float(r["loss"]) for r in csv.DictReader(handle) if r["phase"] == "train"]


def _subprocess_env() -> dict[str, str]:
    """Same intra-op thread count as this process, so subprocess arithmetic matches in-process arithmetic."""
    return {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()), "PYTHONUNBUFFERED": "1"}


def _fit(tmp_path: Path, name: str = "run", *, resume: bool = False, loss=toyrun.loss_fn, evaluate=None,
         dropout: float = 0.0, **overrides) -> tuple[nn.Module, Trainer, object]:
    """Train the toy model in-process; returns (model, trainer, result)."""
    config = TrainConfig(**{**vars(toyrun.DEFAULTS), "max_epochs": 2, **overrides})
    run_dir = prepare_run_dir(tmp_path / name, resume=resume, overwrite=False)
    seed_everything(config.seed)
    model = toyrun.make_model(dropout)
    evaluate = evaluate or toyrun.make_evaluate(toyrun.make_dataset(64, seed=2))
    trainer = Trainer(model, toyrun.make_dataset(48, seed=1), config, run_dir, loss_fn=loss, evaluate=evaluate, resume=resume)
    return model, trainer, trainer.fit()


# ------------------------------------------------------------------------------------- distributed
@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path):
    """torchrun with 2 gloo ranks: identical parameters on both ranks, same loss curve as 1 process."""
    common = ["--dropout", "0", "--epochs", "2", "--batch-size", "16", "--samples", "64"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(TOYRUN), "--out", str(tmp_path / "ddp"), "--dump-rank-params", *common]
    done = subprocess.run(command, cwd=REPO_ROOT, env=_subprocess_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert toyrun.main(["--out", str(tmp_path / "single"), *common]) == 0

    rank0 = load_tensors(tmp_path / "ddp" / "params_rank0.safetensors")
    rank1 = load_tensors(tmp_path / "ddp" / "params_rank1.safetensors")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    single = load_tensors(tmp_path / "single" / "model.safetensors")
    assert all(torch.allclose(rank0[k], single[k], atol=1e-5) for k in rank0)
    ddp_losses, single_losses = _train_losses(tmp_path / "ddp"), _train_losses(tmp_path / "single")
    assert len(ddp_losses) == len(single_losses) == 8  # 64 samples / 16 per step x 2 epochs
    assert ddp_losses == pytest.approx(single_losses, rel=1e-5, abs=1e-6)
    assert not (tmp_path / "ddp" / "hang.flag").exists()
    config = json.loads((tmp_path / "ddp" / "run_config.json").read_text())
    assert config["world_size"] == 2


def test_gradient_accumulation_matches_full_batch(tmp_path):
    model_full, _, _ = _fit(tmp_path, "full", batch_size=16, grad_accum=1)
    model_accum, _, _ = _fit(tmp_path, "accum", batch_size=16, grad_accum=4)
    for a, b in zip(model_full.parameters(), model_accum.parameters()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_bf16_autocast_is_applied(tmp_path):
    dtypes = []

    def loss(model, batch):
        logits = model(batch[0])
        dtypes.append(logits.dtype)
        return nn.functional.cross_entropy(logits.float(), batch[1])

    _, _, result = _fit(tmp_path, precision="bf16", loss=loss, max_epochs=1)
    assert set(dtypes) == {torch.bfloat16}
    assert math.isfinite(result.history[-1]["train_loss"])
    if not torch.cuda.is_available():
        with pytest.raises(UserInputError, match="fp16 needs a CUDA GPU"):
            _fit(tmp_path, "fp16", precision="fp16")


# ------------------------------------------------------------------------------------------ resume
@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_is_exact(tmp_path):
    """A run killed with SIGKILL mid-epoch and resumed ends bit-identical to an uninterrupted run."""
    common = ["--epochs", "3", "--batch-size", "8", "--grad-accum", "2", "--dropout", "0.2",
              "--checkpoint-every-steps", "5", "--samples", "96"]
    killed_dir = tmp_path / "killed"
    # 12 steps per epoch, 2 loss calls per step: call 35 is inside step 18 (epoch 2); last checkpoint at step 15.
    process = subprocess.Popen([sys.executable, str(TOYRUN), "--out", str(killed_dir), "--hang-at-call", "35", *common],
                               cwd=REPO_ROOT, env=_subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not (killed_dir / "hang.flag").exists():
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "toy run never reached the kill point"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
        process.stderr.close()
    state = ckpt.read_state(ckpt.latest_checkpoint(killed_dir / "checkpoint"))["progress"]
    assert (state["global_step"], state["epoch"], state["steps_in_epoch"]) == (15, 1, 3)  # mid-epoch 2
    assert max(int(r["step"]) for r in csv.DictReader(open(killed_dir / "train_log.csv"))) == 17

    assert toyrun.main(["--out", str(killed_dir), "--resume", *common]) == 0
    assert toyrun.main(["--out", str(tmp_path / "reference"), *common]) == 0

    resumed = load_tensors(killed_dir / "model.safetensors")
    reference = load_tensors(tmp_path / "reference" / "model.safetensors")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)
    assert json.loads((killed_dir / "metrics.json").read_text()) == json.loads((tmp_path / "reference" / "metrics.json").read_text())
    assert _train_losses(killed_dir) == _train_losses(tmp_path / "reference")  # rows 16-17 of the killed run replaced


def test_time_budget_stops_and_resume_continues(tmp_path):
    _, _, first = _fit(tmp_path, max_minutes=1e-9)
    assert first.stop_reason == "time_budget" and first.global_step == 1
    assert first.history[-1]["step"] == 1  # evaluated before stopping
    _, _, second = _fit(tmp_path, resume=True)
    assert second.stop_reason == "completed" and second.global_step == 12  # 48 samples / 8 per step x 2 epochs


def test_early_stopping_restores_best_weights(tmp_path):
    snapshots = []

    def evaluate(model):  # the first evaluation is the best; later ones get worse
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        return {"accuracy": 1.0 / len(snapshots)}

    model, _, result = _fit(tmp_path, evaluate=evaluate, max_epochs=10, eval_every_steps=2, patience=2)
    assert result.stop_reason == "early_stopping"
    assert len(result.history) == 3 and result.global_step == 6
    assert result.best_step == 2 and result.best_metrics == {"accuracy": 1.0}
    assert all(torch.equal(v, snapshots[0][k]) for k, v in model.state_dict().items())
    assert not all(torch.equal(v, snapshots[-1][k]) for k, v in model.state_dict().items())


# ---------------------------------------------------------------------------- moving average of weights
def _ema_reference(raw_states: list[dict[str, torch.Tensor]], decay: float) -> list[dict[str, torch.Tensor]]:
    """The average after each step, written out: a copy of the first state, then a lerp by ``1 - decay_n``."""
    averages = [{k: v.clone() for k, v in raw_states[0].items()}]
    for n, state in enumerate(raw_states[1:], start=1):
        weight = 1.0 - min(decay, (1.0 + n) / (EMA_WARMUP + n))
        averages.append({k: averages[-1][k] + weight * (v - averages[-1][k]) for k, v in state.items()})
    return averages


def test_ema_weights_are_evaluated_selected_and_kept(tmp_path):
    """With ema_decay, evaluate() sees the moving average (matching a written-out reference), not the trained
    weights, and the best average is what the model holds after fit()."""
    raw, seen = [], []

    def recording_loss(model, batch):  # called once per step, before it: the weights after the previous step
        raw.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return toyrun.loss_fn(model, batch)

    def evaluate(model):  # every step; the second evaluation is the best
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
        return {"accuracy": 1.0 if len(seen) == 2 else 0.5}

    model, _, result = _fit(tmp_path, loss=recording_loss, evaluate=evaluate, ema_decay=0.8, eval_every_steps=1)
    assert result.best_step == 2 and len(seen) == result.global_step == 12
    reference = _ema_reference(raw[1:], 0.8)  # raw[k] holds the weights after step k
    for step in range(1, 11):
        assert all(torch.allclose(seen[step - 1][k], reference[step - 1][k], atol=1e-6) for k in raw[0])
    assert not all(torch.equal(seen[5][k], raw[6][k]) for k in raw[0])  # not the trained weights themselves
    assert all(torch.equal(v, seen[1][k]) for k, v in model.state_dict().items())


def test_weight_average_copies_integer_buffers_and_rejects_a_bad_decay():
    norm = nn.BatchNorm1d(3)
    average = weight_average(norm, 0.5)
    for _ in range(3):
        norm(torch.randn(16, 3) + 4.0)
        average.update_parameters(norm)
    assert int(average.module.num_batches_tracked) == 3
    assert torch.all(average.module.running_mean > 0) and not torch.equal(average.module.running_mean, norm.running_mean)
    with pytest.raises(ValueError, match="between 0 and 1"):
        weight_average(norm, 1.0)
    with pytest.raises(UserInputError, match="ema_decay must be between 0 and 1"):
        TrainConfig(ema_decay=1.5)


def test_ema_decay_flag_and_yaml_key(tmp_path):
    parser = argparse.ArgumentParser()
    add_training_args(parser, TrainConfig(ema_decay=0.99))
    assert config_from_args(parser.parse_args([]), TrainConfig(ema_decay=0.99)).ema_decay == 0.99
    assert config_from_args(parser.parse_args(["--ema-decay", "none"]), TrainConfig(ema_decay=0.99)).ema_decay is None
    config_file = tmp_path / "train.yaml"
    config_file.write_text("ema_decay: 0.999\n")
    assert config_from_args(parser.parse_args(["--config", str(config_file)]), TrainConfig()).ema_decay == 0.999
    with pytest.raises(SystemExit):
        parser.parse_args(["--ema-decay", "slow"])


def test_resume_with_ema_is_exact_and_refuses_another_decay(tmp_path):
    _, _, first = _fit(tmp_path, max_minutes=1e-9, ema_decay=0.9)
    assert first.stop_reason == "time_budget" and first.global_step == 1
    with pytest.raises(UserInputError, match="ema_decay=0.9, now 0.5"):
        _fit(tmp_path, resume=True, ema_decay=0.5)
    resumed, _, second = _fit(tmp_path, resume=True, ema_decay=0.9)
    reference, _, third = _fit(tmp_path, "reference", ema_decay=0.9)
    assert second.global_step == third.global_step == 12
    assert all(torch.equal(v, reference.state_dict()[k]) for k, v in resumed.state_dict().items())
    evaluated = [{k: v for k, v in h.items() if k != "train_loss"} for h in (*second.history[1:], *third.history)]
    assert evaluated[:2] == evaluated[2:]  # (the interrupted run also evaluated at step 1, when its budget ran out)


# ------------------------------------------------------------------------------------------ faults
def test_corrupted_or_truncated_checkpoint_is_reported_not_loaded(tmp_path):
    _fit(tmp_path, max_epochs=1)
    snapshot = ckpt.latest_checkpoint(tmp_path / "run" / "checkpoint")
    assert sorted(p.suffix for p in snapshot.iterdir()) == ["", ".json"] + [".safetensors"] * 4  # nothing pickled
    weights = snapshot / "model.safetensors"
    original = weights.read_bytes()
    data = bytearray(original)
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(UserInputError, match=r"model\.safetensors: checksum mismatch"):
        _fit(tmp_path, resume=True)
    weights.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(UserInputError, match=r"model\.safetensors: checksum mismatch.*not loaded"):
        _fit(tmp_path, resume=True)
    weights.write_bytes(original)
    ckpt.verify_checkpoint(snapshot)
    (snapshot / "optimizer.safetensors").unlink()
    with pytest.raises(UserInputError, match=r"optimizer\.safetensors: file missing"):
        ckpt.verify_checkpoint(snapshot)


def test_diverged_training_exits_3_with_one_line_not_as_bad_input(tmp_path, capsys):
    from bioattn.cli import run_user_main

    def diverging(model, batch):
        return toyrun.loss_fn(model, batch) * float("inf")

    assert run_user_main(lambda: _fit(tmp_path, loss=diverging)) == 3  # 2 would say "your input is wrong"
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "loss became" in err and "Traceback" not in err and err.count("\n") == 1
    assert not issubclass(NonFiniteLossError, UserInputError) and issubclass(NonFiniteLossError, TrainingDivergedError)


def test_nan_loss_stops_with_message_and_keeps_last_good_checkpoint(tmp_path):
    calls = 0

    def exploding(model, batch):
        nonlocal calls
        calls += 1
        loss = toyrun.loss_fn(model, batch)
        return loss * float("nan") if calls == 5 else loss

    with pytest.raises(NonFiniteLossError, match=r"loss became nan at epoch 1, step 5.*last good checkpoint .*ckpt-00000002 is kept"):
        _fit(tmp_path, loss=exploding, checkpoint_every_steps=2)
    snapshot = ckpt.latest_checkpoint(tmp_path / "run" / "checkpoint")
    ckpt.verify_checkpoint(snapshot)
    assert ckpt.read_state(snapshot)["progress"]["global_step"] == 4
    assert all(torch.isfinite(t).all() for t in ckpt.read_tensors(snapshot, "model").values())
    _, _, result = _fit(tmp_path, resume=True, checkpoint_every_steps=2)  # the run continues from step 4
    assert result.global_step == 12 and result.stop_reason == "completed"


def test_disk_full_keeps_previous_checkpoint(tmp_path, monkeypatch):
    writes = 0
    real_save = ckpt.save_tensors

    def save_until_full(path, tensors):
        nonlocal writes
        writes += 1
        if writes > 8:  # two complete checkpoints of 4 files (model, optimizer, rng, best_model)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_save(path, tensors)

    monkeypatch.setattr(ckpt, "save_tensors", save_until_full)
    with pytest.raises(UserInputError, match=r"cannot write checkpoint \(No space left on device\); the previous checkpoint .*ckpt-00000002 is kept"):
        _fit(tmp_path, checkpoint_every_steps=2)
    checkpoint_dir = tmp_path / "run" / "checkpoint"
    assert [p.name for p in checkpoint_dir.iterdir()] and not list(checkpoint_dir.glob(".*"))  # no half-written folder
    ckpt.verify_checkpoint(ckpt.latest_checkpoint(checkpoint_dir))


# ---------------------------------------------------------------------------------------- run dirs
def test_existing_run_dir_requires_resume_or_overwrite(tmp_path):
    run = prepare_run_dir(tmp_path / "run", resume=False, overwrite=False)
    (run / "train_log.csv").write_text("old\n")
    with pytest.raises(UserInputError, match="already exists and is not empty; pass --resume .* or --overwrite"):
        prepare_run_dir(run, resume=False, overwrite=False)
    assert prepare_run_dir(run, resume=True, overwrite=False) == run and (run / "train_log.csv").exists()
    prepare_run_dir(run, resume=False, overwrite=True)
    assert run.is_dir() and not any(run.iterdir())
    with pytest.raises(UserInputError, match="not both"):
        prepare_run_dir(run, resume=True, overwrite=True)


def test_unwritable_output_dir_is_a_clean_error(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    with pytest.raises(UserInputError, match=r"a_file/run: output directory is not writable"):
        prepare_run_dir(blocker / "run", resume=False, overwrite=False)
    from bioattn.cli import run_user_main

    assert run_user_main(lambda: toyrun.main(["--out", str(blocker / "run")])) == 2
    assert capsys.readouterr().err.strip().startswith("error: ") and "Traceback" not in capsys.readouterr().err
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(UserInputError, match="not writable"):
            prepare_run_dir(locked / "run", resume=False, overwrite=False)


# ----------------------------------------------------------------------------------- config & logs
def test_yaml_config_then_flags_override(tmp_path):
    config_file = tmp_path / "train.yaml"
    config_file.write_text("lr: 1e-3\nepochs: 7\nbatch-size: 32\nschedule: multistep\nmilestones: [2, 4]\n"
                           "dropout: 0.3\npatience: 3\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("--dropout", type=float, default=0.1)
    add_training_args(parser, TrainConfig(lr=0.5))
    args = parser.parse_args(["--lr", "0.02", "--config", str(config_file), "--seed", "9"])
    config = config_from_args(args, TrainConfig(lr=0.5))
    assert (config.lr, config.seed) == (0.02, 9)  # flags win, even before --config
    assert (config.max_epochs, config.batch_size, config.schedule, config.milestones, config.patience) == (7, 32, "multistep", (2, 4), 3)
    assert args.dropout == 0.3  # recipe options come from the file too
    assert config_from_args(parser.parse_args([]), TrainConfig(lr=0.5)).lr == 0.5

    config_file.write_text("lr: 0.1\nlearning_rate: 3\n")
    with pytest.raises(UserInputError, match=r"train\.yaml: unknown option 'learning_rate'"):
        parser.parse_args(["--config", str(config_file)])
    config_file.write_text("precision: fp8\n")
    with pytest.raises(UserInputError, match=r"train\.yaml: option 'precision' must be one of"):
        parser.parse_args(["--config", str(config_file)])


@pytest.mark.slow
def test_logs_tensorboard_run_config_and_curve(tmp_path):
    _, _, result = _fit(tmp_path, max_epochs=2)
    run = tmp_path / "run"
    rows = list(csv.DictReader(open(run / "train_log.csv")))
    assert [int(r["step"]) for r in rows if r["phase"] == "train"] == list(range(1, 13))
    assert [float(r["accuracy"]) for r in rows if r["phase"] == "eval"] == [h["accuracy"] for h in result.history]
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    run_config = json.loads((run / "run_config.json").read_text())
    assert run_config["training"]["max_epochs"] == 2
    assert {"torch", "numpy", "monai", "biopython", "scikit-learn"} <= set(run_config["versions"])
    assert plot_curves(run).stat().st_size > 10_000


def test_schedules_per_optimizer_step():
    cosine = lr_factor(TrainConfig(max_epochs=2, warmup_steps=4, schedule="warmup_cosine"), steps_per_epoch=10)
    assert [cosine(s) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert cosine(12) == pytest.approx(0.5) and cosine(19) < 0.01
    multistep = lr_factor(TrainConfig(max_epochs=5, schedule="multistep", milestones=(1, 3), gamma=0.1), steps_per_epoch=10)
    assert [multistep(s) for s in (0, 9, 10, 29, 30)] == pytest.approx([1, 1, 0.1, 0.1, 0.01])
    with pytest.raises(UserInputError, match="schedule must be one of"):
        TrainConfig(schedule="linear")
    with pytest.raises(UserInputError, match="batch size 10 must be divisible by processes"):
        Trainer(toyrun.make_model(0), toyrun.make_dataset(8, 1), TrainConfig(batch_size=10, grad_accum=4), "unused", loss_fn=toyrun.loss_fn)


def test_max_steps_per_epoch_ends_the_epoch(tmp_path):
    """A capped epoch must end at the cap: the next epoch is numbered 2 and starts epoch 2's sample order."""
    def recording(batches):
        def loss(model, batch):
            batches.append(batch[0].clone())
            return toyrun.loss_fn(model, batch)
        return loss

    capped, full = [], []
    _, trainer, result = _fit(tmp_path, "capped", loss=recording(capped), max_steps_per_epoch=2)
    assert trainer.steps_per_epoch == 2
    assert [h["epoch"] for h in result.history] == [1, 2]
    with open(tmp_path / "capped" / "train_log.csv", newline="") as handle:
        assert [r["epoch"] for r in csv.DictReader(handle) if r["phase"] == "train"] == ["1", "1", "2", "2"]
    _, uncapped, _ = _fit(tmp_path, "full", loss=recording(full))
    per_epoch = uncapped.steps_per_epoch
    assert per_epoch > 2
    assert len(capped) == 4
    torch.testing.assert_close(capped[:2], full[:2])  # epoch 1 starts alike
    torch.testing.assert_close(capped[2:], full[per_epoch:per_epoch + 2])  # epoch 2 starts with epoch 2's order


def test_attention_backend_applies_while_training_and_evaluating_then_is_restored(tmp_path):
    """The task layer (``fit_timed``) runs the whole fit under the run's kernel; the trainer itself knows none."""
    from bioattn.attention import get_backend
    from bioattn.tasks.common import fit_timed

    seen = []

    def loss(model, batch):
        seen.append(("train", get_backend()))
        return toyrun.loss_fn(model, batch)

    def evaluate(module):
        seen.append(("eval", get_backend()))
        return {"accuracy": 1.0}

    def fit(name, **overrides):
        config = TrainConfig(**{**vars(toyrun.DEFAULTS), "max_epochs": 1, **overrides})
        run_dir = prepare_run_dir(tmp_path / name, resume=False, overwrite=False)
        trainer = Trainer(toyrun.make_model(0.0), toyrun.make_dataset(48, seed=1), config, run_dir, loss_fn=loss,
                          evaluate=evaluate)
        return fit_timed(trainer)

    fit("explicit", attention_backend="explicit")
    assert set(seen) == {("train", "explicit"), ("eval", "explicit")} and get_backend() == "auto"
    seen.clear()
    fit("bf16", precision="bf16", device="cpu")
    assert set(seen) == {("train", "math"), ("eval", "math")} and get_backend() == "auto"
    seen.clear()
    _fit(tmp_path, "plain", loss=loss, evaluate=evaluate, attention_backend="explicit", max_epochs=1)
    assert set(seen) == {("train", "auto"), ("eval", "auto")}  # Trainer.fit alone leaves the kernel alone
    with pytest.raises(UserInputError, match="attention_backend must be one of"):
        fit("typo", attention_backend="fastest")
    parser = argparse.ArgumentParser()
    add_training_args(parser, TrainConfig())
    assert config_from_args(parser.parse_args(["--attention-backend", "math"]), TrainConfig()).attention_backend == "math"


def test_deterministic_kernels_are_switched_on_for_a_gpu_only_and_restored(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "unset")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")  # absent now, and absent again after the test
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
              torch.backends.cudnn.benchmark)
    assert not before[0]
    with deterministic_kernels(torch.device("cpu")):  # a CPU's kernels repeat already: nothing changes
        assert not torch.are_deterministic_algorithms_enabled() and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    with deterministic_kernels(torch.device("cuda"), enabled=False):
        assert not torch.are_deterministic_algorithms_enabled()
    with deterministic_kernels(torch.device("cuda")):  # setting the flags needs no GPU
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE_CONFIG
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
            torch.backends.cudnn.benchmark) == before and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # a user's own setting is kept
    with deterministic_kernels(torch.device("cuda")):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_the_trainer_enters_deterministic_kernels_and_math_attention_when_asked(tmp_path, monkeypatch):
    from bioattn.tasks.common import training_attention_backend as backend

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert backend(TrainConfig(deterministic=True), cuda) == "math"  # the fused kernels' backward: no fixed order
    assert backend(TrainConfig(deterministic=True), cpu) == "auto"  # CPU runs repeat as they are
    assert backend(TrainConfig(deterministic=True, attention_backend="flash"), cuda) == "flash"  # asked for: kept
    assert backend(TrainConfig(), cuda) == "auto"
    entered = []

    @contextlib.contextmanager
    def recording(device, enabled=True):
        entered.append((device.type, enabled))
        yield

    monkeypatch.setattr(trainer_module, "deterministic_kernels", recording)
    _, trainer, _ = _fit(tmp_path, "deterministic", deterministic=True, max_epochs=1, device="cpu")
    assert entered == [("cpu", True)]
    assert json.loads((trainer.run_dir / "run_config.json").read_text())["training"]["deterministic"] is True
    parser = argparse.ArgumentParser()
    add_training_args(parser, TrainConfig())
    assert config_from_args(parser.parse_args(["--deterministic"]), TrainConfig()).deterministic
    assert not config_from_args(parser.parse_args([]), TrainConfig()).deterministic  # off by default: it is slower
