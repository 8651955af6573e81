"""The shared training loop (one process or ``torchrun``): :class:`Trainer` and its :class:`FitResult`."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from bioattn.errors import TrainingDivergedError, UserInputError
from bioattn.training import checkpoint as ckpt
from bioattn.training.averaging import weight_average
from bioattn.training.config import TrainConfig
from bioattn.distributed import (all_reduce_sum, broadcast_json, init_distributed, is_distributed, is_main_process,
                                 rank, resolve_device, world_size)
from bioattn.training.loop_state import (CHECKPOINT_DIR, FitResult, Progress, is_tie, as_float, move_to,
                                         restore_checkpoint, save_checkpoint, tie_break_loss)
from bioattn.training.metrics_log import MetricLogger
from bioattn.precision import warn_if_bf16_is_emulated
from bioattn.progress import progress_bar
from bioattn.training.determinism import deterministic_kernels
from bioattn.training.rng import seed_everything
from bioattn.training.run_dir import write_run_config
from bioattn.training.sampler import ResumableSampler
from bioattn.training.schedules import build_optimizer, build_scheduler, schedule_notes

LossFn = Callable[[nn.Module, Any], torch.Tensor]
EvaluateFn = Callable[[nn.Module], dict[str, float]]


class NonFiniteLossError(TrainingDivergedError):
    """The loss (or gradient norm) became NaN/inf; training stopped, the last checkpoint is intact."""


class Trainer:
    """Train ``model`` in place on ``train_dataset`` per ``config``, writing into ``run_dir``; after :meth:`fit` it
    holds the best weights (by ``config.monitor``) in eval mode.

    Args:
        loss_fn: ``loss_fn(model, batch) -> scalar tensor``; ``model`` may be the DDP wrapper (call its forward).
        evaluate: ``evaluate(module) -> {"metric": number}`` on rank 0 under ``torch.no_grad()``; ``None``: keep
            the final weights.
        run_info: extra options recorded in ``run_dir/run_config.json``.
        bucket_lengths: every sample's length, to batch similar lengths together; ``None``: plain shuffling.
        evaluate_start: also evaluate the starting weights as epoch 0.
    """

    def __init__(self, model: nn.Module, train_dataset: Dataset, config: TrainConfig, run_dir: str | os.PathLike,
                 loss_fn: LossFn, evaluate: EvaluateFn | None = None,
                 collate_fn: Callable[[list[Any]], Any] | None = None, resume: bool = False,
                 run_info: dict[str, Any] | None = None, bucket_lengths: Sequence[int] | None = None,
                 evaluate_start: bool = False) -> None:
        init_distributed()
        self.evaluate_start, self.config, self.run_dir, self.loss_fn = evaluate_start, config, Path(run_dir), loss_fn
        self.evaluate_fn, self.resume, self.run_info = evaluate, resume, run_info
        self.world, self.rank = world_size(), rank()
        self.device = resolve_device(config.device)
        if config.precision == "fp16" and self.device.type != "cuda":
            raise UserInputError("precision fp16 needs a CUDA GPU; on a CPU use --precision fp32, or bf16 where the CPU "
                                 "has bf16 units (AVX512-BF16 or AMX-BF16)")
        if is_main_process():
            warn_if_bf16_is_emulated(config.precision, self.device)
        per_step = self.world * config.grad_accum
        if config.batch_size % per_step:
            raise UserInputError(f"batch size {config.batch_size} must be divisible by processes ({self.world}) x "
                                 f"gradient accumulation ({config.grad_accum})")
        samples = len(train_dataset)  # type: ignore[arg-type]
        smaller = config.small_set_batch(samples, per_step)
        if smaller is not None:
            ragged = samples % smaller
            drop = 0 < ragged < smaller / 2 and not config.drop_last
            self._note(f"note: the training set ({samples} samples) is smaller than {config.min_batches_per_epoch} "
                       f"batches of {config.batch_size}; using batches of {smaller}"
                       + (f" (the {ragged} left over of each shuffled epoch wait for a later one: a batch of "
                          f"{ragged} would set the normalisation statistics of that step)" if drop else ""))
            config = self.config = dataclasses.replace(config, batch_size=smaller, drop_last=config.drop_last or drop)
        if config.batch_size > samples and samples >= per_step:
            reduced = samples // per_step * per_step
            self._note(f"note: batch size {config.batch_size} is larger than the training set ({samples} samples); "
                       f"using {reduced}")
            config = self.config = dataclasses.replace(config, batch_size=reduced)
        if config.monitor_mode != "auto" and (config.monitor_mode == "max") != config.maximize:
            kind = "a score: larger is better" if config.maximize else "a loss: smaller is better"
            self._note(f"note: monitor {config.monitor!r} is {kind}; monitor_mode {config.monitor_mode!r} ignored")
        self.micro_batch = config.batch_size // per_step
        self.module = model.to(self.device)
        self.sampler = ResumableSampler(train_dataset, num_replicas=self.world, rank=self.rank, seed=config.seed,
                                        lengths=bucket_lengths, bucket_size=self.micro_batch * self.world)
        if self.sampler.num_samples == 0 or len(train_dataset) == 0:  # type: ignore[arg-type]
            raise UserInputError("the training dataset is empty")
        self.loader = DataLoader(train_dataset, batch_size=self.micro_batch, sampler=self.sampler,
                                 collate_fn=collate_fn, num_workers=config.num_workers, drop_last=config.drop_last,
                                 generator=torch.Generator(), pin_memory=self.device.type == "cuda")
        self.steps_per_epoch = math.ceil(len(self.loader) / config.grad_accum)
        if config.max_steps_per_epoch is not None:
            self.steps_per_epoch = min(self.steps_per_epoch, config.max_steps_per_epoch)
        if self.steps_per_epoch == 0:
            raise UserInputError(f"the training dataset ({len(train_dataset)} samples) "  # type: ignore[arg-type]
                                 f"is smaller than one batch ({config.batch_size}) with drop_last; "
                                 "lower the batch size")
        if config.min_steps and config.max_epochs * self.steps_per_epoch < config.min_steps:
            epochs = math.ceil(config.min_steps / self.steps_per_epoch)
            milestones = tuple(round(m * epochs / config.max_epochs) for m in config.milestones)
            patience = None if config.patience is None else math.ceil(config.patience * epochs / config.max_epochs)
            self._note(f"note: {config.max_epochs} epochs of {self.steps_per_epoch} optimizer "
                       f"{'step' if self.steps_per_epoch == 1 else 'steps'} are fewer than "
                       f"{config.min_steps} steps (small training set): training up to {epochs} epochs"
                       + (f", early stopping after {patience} evaluations without improvement (instead of "
                          f"{config.patience})" if patience is not None and patience != config.patience else ""))
            config = self.config = dataclasses.replace(config, max_epochs=epochs, milestones=milestones,
                                                       patience=patience)
        for line in schedule_notes(config, self.steps_per_epoch):
            self._note(line)
        self.optimizer = build_optimizer(self.module, config)
        self.scheduler = build_scheduler(self.optimizer, config, self.steps_per_epoch)
        self.scaler = torch.amp.GradScaler("cuda", enabled=config.precision == "fp16")
        self.model: nn.Module = self.module
        if is_distributed():
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.module, device_ids=device_ids,
                                                 find_unused_parameters=config.find_unused_parameters)
        self.average = weight_average(self.module, config.ema_decay) if config.ema_decay is not None else None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.progress = Progress()

    @staticmethod
    def _note(line: str) -> None:
        if is_main_process():
            print(line, file=sys.stderr)

    def fit(self) -> FitResult:
        """Train until ``max_epochs``, early stopping or the time budget; return the best metrics."""
        restored = restore_checkpoint(self) if self.resume else False
        if not restored:
            seed_everything(self.config.seed + self.rank)
        if self.progress.stop_reason == "early_stopping":
            return self._finish()
        self.progress.stop_reason = None
        logger = None
        if is_main_process():
            write_run_config(self.run_dir, self.config, self.run_info)
            logger = MetricLogger(self.run_dir, resume_step=self.progress.global_step if restored else None)
        total = self.config.max_epochs * self.steps_per_epoch
        bar = progress_bar(total=total, initial=min(self.progress.global_step, total), desc="training", unit="step",
                           disable=not is_main_process(), dynamic_ncols=True)
        started = time.monotonic()
        if self.evaluate_start and not restored and self.evaluate_fn is not None:
            self._evaluate_and_track(logger, bar, 0)
        self.module.train()
        try:
            with deterministic_kernels(self.device, self.config.deterministic):
                while self.progress.epoch < self.config.max_epochs and self.progress.stop_reason is None:
                    self._run_epoch(logger, bar, started)
        finally:
            bar.close()
            if logger is not None:
                logger.close()
        return self._finish()

    def _run_epoch(self, logger: MetricLogger | None, bar: tqdm, started: float) -> None:
        p, config = self.progress, self.config
        epoch_number = p.epoch + 1
        self.sampler.set_position(p.epoch, p.steps_in_epoch * config.grad_accum * self.micro_batch)
        assert self.loader.generator is not None
        self.loader.generator.manual_seed(config.seed * 1_000_003 + p.epoch * 1_009 + self.rank)
        batches = iter(self.loader)
        remaining = len(self.loader)
        bar.set_description(f"epoch {epoch_number}/{config.max_epochs}")
        while p.steps_in_epoch < self.steps_per_epoch and remaining > 0:
            group = min(config.grad_accum, remaining)
            remaining -= group
            lr = self.optimizer.param_groups[0]["lr"]
            loss, grad_norm, time_up = self._train_step(batches, group, started)
            p.global_step += 1
            p.steps_in_epoch += 1
            if logger is not None:
                logger.log(p.global_step, epoch_number, "train", {"loss": loss, "lr": lr, "grad_norm": grad_norm})
            if not math.isfinite(loss) or (not math.isfinite(grad_norm) and config.precision != "fp16"):
                self._diverged(loss, grad_norm, epoch_number)
            p.loss_sum += loss
            p.loss_steps += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4g}", lr=f"{lr:.3g}", refresh=False)
            epoch_done = p.steps_in_epoch >= self.steps_per_epoch or remaining == 0
            last_step = epoch_done and p.epoch + 1 >= config.max_epochs
            if epoch_done:
                p.epoch += 1
                p.steps_in_epoch = 0
            if time_up:
                p.stop_reason = "time_budget"
            every = config.eval_every_steps
            if (every is None and epoch_done) or (every is not None and p.global_step % every == 0) or last_step or time_up:
                self._evaluate_and_track(logger, bar, epoch_number)
            if p.stop_reason is None and last_step:
                p.stop_reason = "completed"
            ckpt_every = config.checkpoint_every_steps
            evaluated = bool(p.history) and p.history[-1]["step"] == p.global_step
            if epoch_done or evaluated or p.stop_reason or (ckpt_every and p.global_step % ckpt_every == 0):
                save_checkpoint(self)
            if p.stop_reason is not None:
                if p.stop_reason == "early_stopping" and is_main_process():
                    best = (f"; the best was step {p.best_step} ({config.monitor}={p.best_value:.4g})"
                            if p.best_value is not None else "")
                    tqdm.write(f"early stopping at step {p.global_step}: no better {config.monitor} in the last "
                               f"{config.patience} evaluations{best}", file=sys.stderr)
                if p.stop_reason == "time_budget" and is_main_process():
                    tqdm.write(f"time budget of {config.max_minutes} min reached at step {p.global_step}; "
                               f"continue with --resume", file=sys.stderr)
                return
            if epoch_done:
                return

    def _train_step(self, batches: Iterator[Any], group: int, started: float) -> tuple[float, float, bool]:
        """Forward/backward ``group`` micro-batches, clip, step; (mean loss over ranks, grad norm, time up)."""
        config = self.config
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        for index in range(group):
            batch = move_to(next(batches), self.device)
            sync = index == group - 1 or not isinstance(self.model, DistributedDataParallel)
            no_sync = contextlib.nullcontext() if sync else self.model.no_sync()  # type: ignore[operator]
            with no_sync:
                with self._autocast():
                    loss = self.loss_fn(self.model, batch)
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    raise TypeError("loss_fn must return a scalar tensor (the mean loss of the batch)")
                self.scaler.scale(loss.float().reshape(()) / group).backward()
            loss_sum += loss.detach().to(torch.float64).reshape(())
        self.scaler.unscale_(self.optimizer)
        params = [p for group_ in self.optimizer.param_groups for p in group_["params"]]
        max_norm = config.grad_clip if config.grad_clip is not None else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        over_budget = config.max_minutes is not None and (time.monotonic() - started) > 60 * config.max_minutes
        flags = torch.stack([loss_sum.cpu() / group, torch.tensor(float(over_budget), dtype=torch.float64)])
        reduced = all_reduce_sum(flags)
        loss_value = float(reduced[0]) / self.world
        grad_value = float(grad_norm)
        if math.isfinite(loss_value) and (math.isfinite(grad_value) or config.precision == "fp16"):
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.scheduler.step()
            if self.average is not None:
                self.average.update_parameters(self.module)
        self.optimizer.zero_grad(set_to_none=True)
        return loss_value, grad_value, bool(reduced[1] > 0)

    @property
    def kept_module(self) -> nn.Module:
        """The weights evaluated and kept: the moving average with ``config.ema_decay``, else the module."""
        return self.average.module if self.average is not None else self.module

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.config.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.config.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def _diverged(self, loss: float, grad_norm: float, epoch_number: int) -> None:
        last = ckpt.latest_checkpoint(self.run_dir / CHECKPOINT_DIR)
        kept = f"the last good checkpoint {last} is kept" if last else "no checkpoint had been written yet"
        what = f"loss became {loss}" if not math.isfinite(loss) else f"gradient norm became {grad_norm}"
        raise NonFiniteLossError(f"{self.run_dir}: {what} at epoch {epoch_number}, step {self.progress.global_step}; "
                                 f"training stopped and this step was not applied; {kept}. Try a lower --lr, "
                                 f"--precision fp32 or gradient clipping, then continue with --resume (or start again "
                                 f"with --overwrite)")

    def _evaluate(self) -> dict[str, float]:
        outcome: dict[str, Any] | None = None
        if is_main_process():
            module = self.kept_module
            module.eval()
            try:
                with torch.no_grad():
                    raw = self.evaluate_fn(module) if self.evaluate_fn is not None else {}
                outcome = {"metrics": {str(k): as_float(str(k), v) for k, v in raw.items()}}
            except Exception as exc:
                if not is_distributed():
                    raise
                broadcast_json({"error": f"{type(exc).__name__}: {exc}"})
                raise
            finally:
                module.train()
        outcome = broadcast_json(outcome)
        if "error" in outcome:
            raise RuntimeError(f"evaluation failed on rank 0: {outcome['error']}")
        return outcome["metrics"]

    def _evaluate_and_track(self, logger: MetricLogger | None, bar: tqdm, epoch_number: int) -> None:
        p, config = self.progress, self.config
        metrics = self._evaluate()
        train_loss = p.loss_sum / max(1, p.loss_steps)
        p.loss_sum, p.loss_steps = 0.0, 0
        trained = {"train_loss": train_loss} if p.global_step else {}
        p.history.append({"epoch": epoch_number, "step": p.global_step, **trained, **metrics})
        if logger is not None and metrics:
            logger.log(p.global_step, epoch_number, "eval", metrics)
        if self.evaluate_fn is None:
            return
        if config.monitor not in metrics:
            raise UserInputError(f"monitor {config.monitor!r} is not one of the evaluation metrics {sorted(metrics)}")
        value = metrics[config.monitor]
        if self._improves(value, metrics) and math.isfinite(value):
            p.best_value, p.best_metrics, p.best_epoch, p.best_step = value, dict(metrics), epoch_number, p.global_step
            p.bad_evals = 0
            self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.kept_module.state_dict().items()}
        else:
            p.bad_evals += 1
            if config.patience is not None and p.bad_evals >= config.patience and p.stop_reason is None:
                p.stop_reason = "early_stopping"
        if is_main_process():
            shown = ", ".join(f"{k}={v:.4g}" for k, v in metrics.items())
            tqdm.write(f"epoch {epoch_number} step {p.global_step}: {shown}", file=sys.stderr)

    def _improves(self, value: float, metrics: dict[str, float]) -> bool:
        """Whether ``metrics`` replace the kept ones (ties: lower :func:`tie_break_loss`, then later)."""
        p, config = self.progress, self.config
        if p.best_value is None:
            return True
        if not is_tie(value, p.best_value):
            return value > p.best_value if config.maximize else value < p.best_value
        loss_name = tie_break_loss(config.monitor, metrics)
        if loss_name is None or loss_name not in p.best_metrics:
            return True
        loss, best_loss = metrics[loss_name], p.best_metrics[loss_name]
        return is_tie(loss, best_loss) or loss < best_loss

    def _finish(self) -> FitResult:
        p = self.progress
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)
        elif self.average is not None:
            self.module.load_state_dict(self.average.module.state_dict())
        self.module.eval()
        return FitResult(best_metrics=dict(p.best_metrics), best_epoch=p.best_epoch, best_step=p.best_step,
                         history=list(p.history), global_step=p.global_step, stop_reason=p.stop_reason or "completed")
