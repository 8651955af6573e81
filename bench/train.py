"""Benchmark: samples/s of one training step (forward + backward + optimizer) of each task's default model.

Each task's default model at its default batch size and default optimizer (promoter: 70 nt, batch 64; CT: MedMNIST
28³ zero-padded to the stem stride, batch 32, the ``tuned`` protocol's optimizer; MSA: one block of the default 32
rows of a synthetic 128-column alignment, batch 1, so a "sample" is a row block) on fixed synthetic batches.
Settings, all in the same run: ``eager fp32`` (the defaults before this benchmark changed them: dropout 0.1
everywhere, fp32, torch's attention kernel choice, the CT model's conv weights contiguous and its CNN stages 16, 32
and 64 channels wide, the promoter's first convolution as an ``nn.Conv1d`` on the embeddings, the optimizer looping over
the parameters), one change at a time (bf16 autocast, bf16 + the math attention
backend, dropout off, ``torch.compile``: inductor, compiled in the warm-up steps, the promoter's first convolution
from per-token tables: :func:`~bioattn.models.promoter.token_table_conv1d`; the other tasks have no such layer and
run as eager fp32 there; ``fused AdamW``: the optimizer's fused kernel instead of its loop over parameters), the three together (dropout off + bf16 + math), ``default``: the recipes' defaults now
(:data:`DEFAULTS`; a line is printed when the code's defaults differ from them), and ``default + --deterministic``:
the same under ``TrainConfig(deterministic=True)`` (deterministic kernels and, on a GPU, the math attention kernel;
on a CPU it changes nothing, so its ratio there only shows the timing noise). Each setting starts from the same
seeded model; after the warm-up the settings of a task take turns one step at a time; the median of the timed steps
is reported, with its ratio to eager fp32. On the CPU steps are timed in CPU
seconds of this process (``time.process_time``): with one thread that is the wall time of a quiet machine, and it
moves much less than wall time when other jobs share the cores. With ``--device cuda`` the models and batches live
on the GPU, autocast is CUDA's, and each step is timed in wall seconds between two ``torch.cuda.synchronize()``
calls (``bf16 + math backend`` then forces the math kernel, which a GPU only needs for comparison). The last line
is ``speedup promoter X.XX ct Y.YY msa Z.ZZ``: ``default`` vs eager fp32.

    python bench/train.py                  # 3 warm-up + 20 timed steps per setting, CPU
    python bench/train.py --steps 5        # quicker, noisier
    python bench/train.py --device cuda    # the same settings on a GPU
    python bench/train.py --tasks ct       # one task
    python bench/train.py --smoke          # smoke test: eager fp32 and default only, one step each
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import use_backend
from bioattn.data.dna import collate_tokens, reverse_complement_ids
from bioattn.models.msa_contact import masked_lm_loss
from bioattn.report import format_table
from bioattn.tasks.common import training_attention_backend
from bioattn.tasks.ct.fit import build_models, prepare_for_training
from bioattn.tasks.ct.options import PROTOCOLS, CTOptions
from bioattn.tasks.msa.features import DEFAULTS as MSA_DEFAULTS
from bioattn.tasks.msa.features import MSAOptions
from bioattn.tasks.promoter.train import DEFAULTS as PROMOTER_DEFAULTS
from bioattn.tasks.promoter.train import PromoterOptions, build_model, classification_loss
from bioattn.training import TrainConfig
from bioattn.training.determinism import deterministic_kernels
from bioattn.training.schedules import build_optimizer

PROMOTER_LENGTH = 70
CT_EDGE = 28
MSA_COLUMNS = 128
BASELINE = "eager fp32"
CT_DEFAULTS = PROTOCOLS["tuned"].train_config


@dataclass(frozen=True)
class Defaults:
    """The training-speed options of one recipe: model dropout, autocast precision, attention backend (``auto``:
    math under bf16 on a CPU, see :func:`~bioattn.tasks.common.training_attention_backend`)."""

    dropout: float
    precision: str = "fp32"
    attention_backend: str = "auto"


# The recipes' defaults (bioattn/tasks/promoter.py, ct.py, msa_features.py), as chosen from this benchmark and
# bench/ct_epoch.py with the dev/validation metrics re-run; main() reports any drift from the code.
DEFAULTS = {
    "promoter": Defaults(dropout=0.0),
    "ct": Defaults(dropout=0.0),
    "msa": Defaults(dropout=0.1),
}


def code_defaults() -> dict[str, Defaults]:
    """The same options as the recipes' code sets them today."""
    return {
        "promoter": Defaults(PromoterOptions(out=Path(".")).dropout, PROMOTER_DEFAULTS.precision,
                             PROMOTER_DEFAULTS.attention_backend),
        "ct": Defaults(CTOptions(out=Path(".")).dropout, CT_DEFAULTS.precision, CT_DEFAULTS.attention_backend),
        "msa": Defaults(MSAOptions().dropout, MSA_DEFAULTS.precision, MSA_DEFAULTS.attention_backend),
    }


@dataclass
class Workload:
    """One task's training step: its model, a fixed batch, ``loss(model, batch)`` and its optimizer settings."""

    model: nn.Module
    batch: tuple[Tensor, ...]
    loss: Callable[[nn.Module, tuple[Tensor, ...]], Tensor]
    config: TrainConfig
    samples: int


def promoter(dropout: float) -> Workload:
    options = PromoterOptions(out=Path("."), dropout=dropout)
    model = build_model(options, PROMOTER_LENGTH, ["non-promoter", "promoter"])
    batch_size = PROMOTER_DEFAULTS.batch_size
    ids, padding_mask = collate_tokens([torch.randint(0, 4, (PROMOTER_LENGTH,)).numpy() for _ in range(batch_size)])
    labels = torch.randint(0, 2, (batch_size,))

    def loss(module: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:  # as bioattn.tasks.promoter.train_model
        ids, padding_mask, labels = batch
        flip = torch.rand(ids.shape[0], device=ids.device) < 0.5
        ids = torch.where(flip[:, None], reverse_complement_ids(ids, padding_mask), ids)
        return classification_loss(module(ids, padding_mask), labels)

    return Workload(model, (ids, padding_mask, labels), loss, PROMOTER_DEFAULTS, batch_size)


def ct(dropout: float, stem_channels: tuple[int, ...] | None) -> Workload:
    options = CTOptions(out=Path("."), dropout=dropout, stem_channels=stem_channels)
    model, _ = build_models(options, num_classes=2, in_channels=1)
    edge = -(-CT_EDGE // model.stride) * model.stride  # MedMNIST volumes are zero-padded to the stem stride
    batch_size = CT_DEFAULTS.batch_size
    batch = (torch.rand(batch_size, 1, edge, edge, edge), torch.randint(0, 2, (batch_size,)))

    def loss(module: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
        images, labels = batch
        return F.cross_entropy(module(images), labels)

    return Workload(model, batch, loss, CT_DEFAULTS, batch_size)


def msa(dropout: float) -> Workload:
    from bioattn.models.msa_contact import MSAContactModel

    options = MSAOptions()
    model = MSAContactModel(max_len=MSA_COLUMNS, embed_dim=options.embed_dim, num_heads=options.heads,
                            num_layers=options.layers, dropout=dropout)
    model.contact_head.requires_grad_(False)  # as in training: fitted afterwards by logistic regression
    blocks = torch.randint(0, 20, (MSA_DEFAULTS.batch_size, options.rows, MSA_COLUMNS))
    return Workload(model, (blocks,), lambda module, batch: masked_lm_loss(module, batch[0]), MSA_DEFAULTS,
                    MSA_DEFAULTS.batch_size)


TASKS = ("promoter", "ct", "msa")
BEFORE_DROPOUT = 0.1
BEFORE_CT_STEM = (16, 32, 64)  # the CT model's CNN channels at 28³ before this benchmark; None: the recipe's default


@dataclass(frozen=True)
class Setting:
    name: str
    bf16: bool = False
    math_backend: bool = False
    dropout_off: bool = False
    compiled: bool = False
    token_tables: bool = False
    fused: bool = False  # the optimizer's fused kernel (build_optimizer(fused=True))
    default: bool = False  # the recipe's defaults (DEFAULTS) instead of the flags above
    deterministic: bool = False  # with default: as the Trainer runs --deterministic


SETTINGS = (
    Setting(BASELINE),
    Setting("bf16 autocast", bf16=True),
    Setting("bf16 + math backend", bf16=True, math_backend=True),
    Setting("dropout off", dropout_off=True),
    Setting("torch.compile", compiled=True),
    Setting("conv from token tables", token_tables=True),
    Setting("fused AdamW", fused=True),
    Setting("dropout off + bf16 + math", bf16=True, math_backend=True, dropout_off=True),
    Setting("default", default=True),
    Setting("default + --deterministic", default=True, deterministic=True),
)


def workload(task: str, setting: Setting) -> Workload:
    """``task``'s step under ``setting``: the defaults of before, changed as ``setting`` says."""
    dropout = DEFAULTS[task].dropout if setting.default else 0.0 if setting.dropout_off else BEFORE_DROPOUT
    if task == "promoter":
        work = promoter(dropout)
        work.model.conv_from_token_tables = setting.token_tables or setting.default  # the model's default: True
        return work
    if task == "ct":
        work = ct(dropout, None if setting.default else BEFORE_CT_STEM)
        if setting.default:  # as bioattn.tasks.ct.train_one prepares it (channels-last stem weights in fp32)
            prepare_for_training(work.model, TrainConfig(precision=DEFAULTS[task].precision))
        return work
    return msa(dropout)


@contextlib.contextmanager
def _context(task: str, setting: Setting, device: torch.device) -> Iterator[None]:
    bf16, backend = setting.bf16, "math" if setting.math_backend else "auto"
    if setting.default:  # what the Trainer runs for these options on this device
        defaults = DEFAULTS[task]
        bf16 = defaults.precision == "bf16"
        backend = training_attention_backend(TrainConfig(precision=defaults.precision,
                                                         attention_backend=defaults.attention_backend,
                                                         deterministic=setting.deterministic), device)
    with contextlib.ExitStack() as stack:
        stack.enter_context(deterministic_kernels(device, setting.deterministic))
        if backend != "auto":
            stack.enter_context(use_backend(backend))  # type: ignore[arg-type]
        if bf16:
            stack.enter_context(torch.autocast(device.type, dtype=torch.bfloat16))
        yield


def training_step(task: str, setting: Setting, device: torch.device) -> tuple[Callable[[], None], int]:
    """A function running one training step of ``task`` under ``setting`` on ``device`` (on its own seeded model
    and optimizer), and the samples of a step."""
    torch.manual_seed(0)
    work = workload(task, setting)
    model = work.model.to(device).train()
    batch = tuple(tensor.to(device) for tensor in work.batch)
    optimizer = build_optimizer(model, work.config, fused=None if setting.default else setting.fused)
    forward = torch.compile(model) if setting.compiled else model

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with _context(task, setting, device):
            loss = work.loss(forward, batch)
        loss.backward()
        if work.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), work.config.grad_clip)
        optimizer.step()

    return step, work.samples


def timed(step: Callable[[], None], device: torch.device) -> float:
    """Seconds of one ``step``: CPU seconds of this process on the CPU, wall seconds between synchronisations on CUDA."""
    if device.type != "cuda":
        start = time.process_time()
        step()
        return time.process_time() - start
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    torch.cuda.synchronize(device)
    return time.perf_counter() - start


def step_seconds(task: str, warmup: int, steps: int, device: torch.device,
                 settings: Sequence[Setting] = SETTINGS) -> dict[str, tuple[list[float], int]]:
    """Seconds of each timed training step of ``task`` per setting, and the samples of a step. After ``warmup``
    untimed steps each, the settings take turns one step at a time, so a change in the machine's load (or a
    slow first setting) falls on all of them alike."""
    runs = {setting.name: training_step(task, setting, device) for setting in settings}
    for step, _ in runs.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(steps):
        for name, (step, _) in runs.items():
            times[name].append(timed(step, device))
    return {name: (times[name], samples) for name, (_, samples) in runs.items()}


def _on_cpu(defaults: Defaults) -> Defaults:
    """``defaults`` with the attention backend the Trainer resolves it to on a CPU."""
    config = TrainConfig(precision=defaults.precision, attention_backend=defaults.attention_backend)
    return dataclasses.replace(defaults, attention_backend=training_attention_backend(config, torch.device("cpu")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per setting (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per setting (default: %(default)s)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train (default: %(default)s)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS),
                        help="tasks to measure (default: all)")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: eager fp32 and default only, no warm-up, one timed step")
    args = parser.parse_args()
    settings = [s for s in SETTINGS if s.name in (BASELINE, "default")] if args.smoke else list(SETTINGS)
    if args.smoke:
        args.warmup, args.steps = 0, 1
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA GPU")
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {where}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.2f}")
    for task, in_code in code_defaults().items():
        if _on_cpu(in_code) != _on_cpu(DEFAULTS[task]):
            print(f"note: the {task} recipe's defaults are {in_code}, this benchmark's 'default' is {DEFAULTS[task]}")
    rows, ratios = [], {}
    for task in args.tasks:
        baseline = None
        measured = step_seconds(task, args.warmup, args.steps, device, settings)
        for setting in settings:
            times, samples = measured[setting.name]
            median = statistics.median(times)
            rate = samples / median
            baseline = baseline or rate
            ratios[task, setting.name] = rate / baseline
            rows.append([task, setting.name, median * 1000, rate, rate / baseline])
            print(f"  {task}: {setting.name}: {rate:.1f} samples/s", flush=True)
    clock = "CPU" if device.type == "cpu" else "GPU wall"
    print(format_table(["task", "setting", f"step {clock} ms (median)", f"samples/{clock}-s", "ratio to eager fp32"],
                       rows, digits=2,
                       title=f"training step, median of {args.steps} after {args.warmup} warm-up "
                             f"(load average at the end {os.getloadavg()[0]:.2f})"))
    print("speedup " + " ".join(f"{task} {ratios[task, 'default']:.2f}" for task in args.tasks))


if __name__ == "__main__":
    main()
