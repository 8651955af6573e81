"""What the :class:`~bioattn.training.trainer.Trainer` loop keeps between steps and across a restart."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import load as safetensors_from_bytes, save as safetensors_to_bytes

from bioattn.distributed import gather_bytes, is_main_process
from bioattn.errors import UserInputError
from bioattn.training import checkpoint as ckpt
from bioattn.training.rng import restore_rng_state, rng_state_tensors, seed_everything

CHECKPOINT_DIR = "checkpoint"


@dataclass
class FitResult:
    """Outcome of :meth:`Trainer.fit`. Epochs are counted from 1; steps are optimizer steps."""

    best_metrics: dict[str, float]
    best_epoch: int
    best_step: int
    history: list[dict[str, float]]
    global_step: int
    stop_reason: str  # "completed" | "early_stopping" | "time_budget"


@dataclass
class Progress:
    """The loop's position that a checkpoint restores (JSON-serialisable)."""

    epoch: int = 0  # 0-based epoch to run next
    steps_in_epoch: int = 0  # optimizer steps already done in that epoch
    global_step: int = 0
    seq: int = 0  # number of checkpoints written
    best_value: float | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    best_epoch: int = 0
    best_step: int = 0
    bad_evals: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    loss_sum: float = 0.0  # training loss accumulated since the last evaluation
    loss_steps: int = 0
    stop_reason: str | None = None


def move_to(batch: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) tuple/list/dict batch to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: move_to(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to(v, device) for v in batch)
    return batch


def as_float(name: str, value: Any) -> float:
    try:
        return float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"evaluate() must return a dict of numbers; {name!r} is {type(value).__name__}") from exc


def is_tie(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def tie_break_loss(monitor: str, metrics: dict[str, float]) -> str | None:
    """The loss that breaks ties on ``monitor``: ``<prefix>_loss`` for ``<prefix>_<score>``, else ``loss``."""
    prefix = monitor.rsplit("_", 1)[0] + "_" if "_" in monitor else ""
    for name in (f"{prefix}loss", "loss"):
        if name in metrics and name != monitor:
            return name
    return None


def save_checkpoint(trainer: Any) -> None:
    """Write a checkpoint (rank 0 writes; every rank contributes its random state)."""
    p = trainer.progress
    rng_files = gather_bytes(safetensors_to_bytes(rng_state_tensors()))
    if not is_main_process():
        return
    assert rng_files is not None
    p.seq += 1
    optimizer_tensors, optimizer_meta = ckpt.optimizer_state(trainer.optimizer)
    scheduler_state = trainer.scheduler.state_dict()
    files = {"model": {k: v.detach().to("cpu", copy=True) for k, v in trainer.module.state_dict().items()},
             "optimizer": optimizer_tensors,
             **{f"rng_rank{r}": safetensors_from_bytes(data) for r, data in enumerate(rng_files)}}
    if trainer.best_state is not None:
        files["best_model"] = trainer.best_state
    if trainer.average is not None:
        files["weight_average"] = {k: v.detach().to("cpu", copy=True) for k, v in trainer.average.state_dict().items()}
    state = {"format": 1, "world_size": trainer.world, "config": trainer.config.to_dict(), "progress": vars(p),
             "optimizer": optimizer_meta, "scheduler": scheduler_state, "scaler": trainer.scaler.state_dict()}
    ckpt.write_checkpoint(trainer.run_dir / CHECKPOINT_DIR, p.seq, files, state)


def restore_checkpoint(trainer: Any) -> bool:
    """Load the latest checkpoint into model, optimizer, schedules, RNG and loop position."""
    snapshot = ckpt.latest_checkpoint(trainer.run_dir / CHECKPOINT_DIR)
    if snapshot is None:
        if is_main_process():
            print(f"note: {trainer.run_dir} has no checkpoint yet; starting a new run", file=sys.stderr)
        return False
    ckpt.verify_checkpoint(snapshot)
    state = ckpt.read_state(snapshot)
    saved = state["config"]
    for name in ("batch_size", "seed", "ema_decay"):
        if saved.get(name) != getattr(trainer.config, name):
            raise UserInputError(f"{snapshot}: the run was started with {name}={saved.get(name)}, now "
                                 f"{getattr(trainer.config, name)}; resume with the same value or start a new run")
    model_state = ckpt.read_tensors(snapshot, "model")
    try:
        trainer.module.load_state_dict(model_state)
    except RuntimeError as exc:
        raise UserInputError(f"{snapshot}: checkpoint weights do not fit this model ({exc})") from exc
    ckpt.load_optimizer_state(trainer.optimizer, ckpt.read_tensors(snapshot, "optimizer"), state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.scaler.load_state_dict(state["scaler"])
    trainer.progress = Progress(**state["progress"])
    if trainer.average is not None:
        trainer.average.load_state_dict(ckpt.read_tensors(snapshot, "weight_average"))
    best = ckpt.read_tensors(snapshot, "best_model")
    trainer.best_state = best or None
    rng = ckpt.read_tensors(snapshot, f"rng_rank{trainer.rank}")
    if rng and state["world_size"] == trainer.world:
        restore_rng_state(rng)
    else:
        seed_everything(trainer.config.seed + trainer.rank + 7919 * trainer.progress.global_step)
        if is_main_process():
            print(f"note: {snapshot} was written by {state['world_size']} process(es), now {trainer.world}; "
                  "the data order is kept but random draws (dropout) differ from an uninterrupted run",
                  file=sys.stderr)
    if is_main_process():
        print(f"resuming from {snapshot} (epoch {trainer.progress.epoch + 1}, step {trainer.progress.global_step})",
              file=sys.stderr)
    return True
