"""Benchmark: samples/s of one training step (forward + backward + optimizer) of each task's default model.

Each task's default model at its default batch size and default optimizer (promoter: 70 nt, batch 64; CT: MedMNIST
28³ zero-padded to the stem stride, batch 32; MSA: one block of the default 32 rows of a synthetic 128-column
alignment, batch 1, so a "sample" is a row block) on fixed synthetic batches. Settings, all in the same run: eager
fp32 (today's default) and the candidates bf16 autocast, bf16 + the math attention backend, dropout off, and
``torch.compile`` (inductor; the compilation happens in the warm-up steps). Each setting starts from the same
seeded model; the median of the timed steps is reported, with its ratio to eager fp32. The last line is
``speedup promoter X.XX ct Y.YY msa Z.ZZ``: the best candidate's ratio per task.

    python bench/train.py                  # 3 warm-up + 20 timed steps per setting
    python bench/train.py --steps 5        # quicker, noisier
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import MultiHeadAttention, use_backend
from bioattn.data.dna import collate_tokens, reverse_complement_ids
from bioattn.models.msa_contact import masked_lm_loss
from bioattn.report import format_table
from bioattn.tasks.ct import MEDMNIST_DEFAULTS, CTOptions, build_models
from bioattn.tasks.msa_features import DEFAULTS as MSA_DEFAULTS
from bioattn.tasks.msa_features import MSAOptions
from bioattn.tasks.promoter import DEFAULTS as PROMOTER_DEFAULTS
from bioattn.tasks.promoter import PromoterOptions, build_model, classification_loss
from bioattn.training import TrainConfig
from bioattn.training.schedules import build_optimizer

PROMOTER_LENGTH = 70
CT_EDGE = 28
MSA_COLUMNS = 128
BASELINE = "eager fp32"


@dataclass
class Workload:
    """One task's training step: its model, a fixed batch, ``loss(model, batch)`` and its optimizer settings."""

    model: nn.Module
    batch: tuple[Tensor, ...]
    loss: Callable[[nn.Module, tuple[Tensor, ...]], Tensor]
    config: TrainConfig
    samples: int


def promoter() -> Workload:
    options = PromoterOptions(out=Path("."))
    model = build_model(options, PROMOTER_LENGTH, ["non-promoter", "promoter"])
    batch_size = PROMOTER_DEFAULTS.batch_size
    ids, padding_mask = collate_tokens([torch.randint(0, 4, (PROMOTER_LENGTH,)).numpy() for _ in range(batch_size)])
    labels = torch.randint(0, 2, (batch_size,))

    def loss(module: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:  # as bioattn.tasks.promoter.train_model
        ids, padding_mask, labels = batch
        flip = torch.rand(ids.shape[0]) < 0.5
        ids = torch.where(flip[:, None], reverse_complement_ids(ids, padding_mask), ids)
        return classification_loss(module(ids, padding_mask), labels)

    return Workload(model, (ids, padding_mask, labels), loss, PROMOTER_DEFAULTS, batch_size)


def ct() -> Workload:
    options = CTOptions(out=Path("."))
    model, _ = build_models(options, num_classes=2, in_channels=1)
    edge = -(-CT_EDGE // model.stride) * model.stride  # MedMNIST volumes are zero-padded to the stem stride
    batch_size = MEDMNIST_DEFAULTS.batch_size
    batch = (torch.rand(batch_size, 1, edge, edge, edge), torch.randint(0, 2, (batch_size,)))

    def loss(module: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
        images, labels = batch
        return F.cross_entropy(module(images), labels)

    return Workload(model, batch, loss, MEDMNIST_DEFAULTS, batch_size)


def msa() -> Workload:
    from bioattn.models import MSAContactModel

    options = MSAOptions()
    model = MSAContactModel(max_len=MSA_COLUMNS, embed_dim=options.embed_dim, num_heads=options.heads,
                            num_layers=options.layers, dropout=options.dropout)
    model.contact_head.requires_grad_(False)  # as in training: fitted afterwards by logistic regression
    blocks = torch.randint(0, 20, (MSA_DEFAULTS.batch_size, options.rows, MSA_COLUMNS))
    return Workload(model, (blocks,), lambda module, batch: masked_lm_loss(module, batch[0]), MSA_DEFAULTS,
                    MSA_DEFAULTS.batch_size)


TASKS: dict[str, Callable[[], Workload]] = {"promoter": promoter, "ct": ct, "msa": msa}


@dataclass(frozen=True)
class Setting:
    name: str
    bf16: bool = False
    math_backend: bool = False
    dropout_off: bool = False
    compiled: bool = False


SETTINGS = (
    Setting(BASELINE),
    Setting("bf16 autocast", bf16=True),
    Setting("bf16 + math backend", bf16=True, math_backend=True),
    Setting("dropout off", dropout_off=True),
    Setting("torch.compile", compiled=True),
)


def _without_dropout(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if isinstance(module, MultiHeadAttention):
            module.dropout = 0.0


@contextlib.contextmanager
def _context(setting: Setting) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if setting.math_backend:
            stack.enter_context(use_backend("math"))
        if setting.bf16:
            stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
        yield


def step_seconds(task: str, setting: Setting, warmup: int, steps: int) -> tuple[list[float], int]:
    """Seconds of each timed training step of ``task`` under ``setting`` (after ``warmup`` untimed steps), and the
    samples of a step."""
    torch.manual_seed(0)
    work = TASKS[task]()
    model = work.model.train()
    if setting.dropout_off:
        _without_dropout(model)
    optimizer = build_optimizer(model, work.config)
    forward = torch.compile(model) if setting.compiled else model
    times = []
    for index in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with _context(setting):
            loss = work.loss(forward, work.batch)
        loss.backward()
        if work.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), work.config.grad_clip)
        optimizer.step()
        if index >= warmup:
            times.append(time.perf_counter() - start)
    return times, work.samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per setting (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per setting (default: %(default)s)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.2f}")
    rows, best = [], {}
    for task in TASKS:
        baseline = None
        for setting in SETTINGS:
            times, samples = step_seconds(task, setting, args.warmup, args.steps)
            median = statistics.median(times)
            rate = samples / median
            baseline = baseline or rate
            ratio = rate / baseline
            rows.append([task, setting.name, median * 1000, rate, ratio])
            print(f"  {task}: {setting.name}: {rate:.1f} samples/s", flush=True)
            if setting.name != BASELINE:
                best[task] = max(best.get(task, 0.0), ratio)
    print(format_table(["task", "setting", "step ms (median)", "samples/s", "ratio to eager fp32"], rows, digits=2,
                       title=f"training step, median of {args.steps} after {args.warmup} warm-up "
                             f"(load average at the end {os.getloadavg()[0]:.2f})"))
    print("speedup " + " ".join(f"{task} {best[task]:.2f}" for task in TASKS))


if __name__ == "__main__":
    main()
