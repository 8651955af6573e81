"""Benchmark: peak resident memory (CPU) of one training step and of one inference call, per model and input size.

Every measurement runs in a fresh Python process (``--child``) that imports torch, builds the task's default model,
runs the call once and exits; the parent reads that child's own peak resident set size (``ru_maxrss`` from
``os.wait4``), so each number is the whole process: interpreter, torch, model, optimizer state, activations.
Sizes grow until a measurement passes ``--max-measured-gib`` (or the next size is predicted to); the growth over
the three largest sizes is fitted as ``a + b * size`` or, when the memory per unit clearly grows, ``a + b * size +
c * size**2`` (size = tokens, rows, columns or voxels) and solved for the largest size under ``--budget-gib``
(24 GiB). Numbers above the largest measured size are extrapolated, and the table says so.

Probes (the task defaults: promoter width 64, 2 layers; CT stem 16-32-64(-96) + 3 layers of 96; MSA 4 axial
layers of 64):

- promoter: sequence length L, one training step at batch 64 (forward + backward + AdamW) and inference
  (``proba_from_ids``, both strands) at batch 1 and 256;
- CT: cube side S, training step at batch 32 (the recipe's precision: bf16 autocast), inference (one forward) at batch 1, and the full-resolution
  explanation (``HybridCT3D.attention_map``: probabilities + [CLS] rollout on the voxel grid) at batch 1;
- MSA: alignment columns L at 32 rows (the training block) and rows N at 256 columns, a masked-LM training step
  and the attention contact features (``contact_features``, which hold every layer's tied maps).

    python bench/memory.py                       # all probes, Markdown table at the end
    python bench/memory.py --probes ct-infer     # one probe
    python bench/memory.py --smoke               # smoke test: every probe's call once, tiny, in this process
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GIB = 2**30
SCRIPT = Path(__file__).resolve()


# ------------------------------------------------------------------------------------------- child side
def _promoter(mode: str, batch: int, length: int) -> None:
    import torch

    from bioattn.tasks.promoter.train import PromoterOptions, build_model, classification_loss
    from bioattn.training import TrainConfig
    from bioattn.training.schedules import build_optimizer

    model = build_model(PromoterOptions(out=Path(".")), length, ["non-promoter", "promoter"])
    ids = torch.randint(0, 4, (batch, length))
    if mode == "train":
        model.train()
        optimizer = build_optimizer(model, TrainConfig())
        classification_loss(model(ids), torch.randint(0, 2, (batch,))).backward()
        optimizer.step()
    else:
        model.eval()
        model.proba_from_ids(ids, rc_average=True)


def _ct(mode: str, batch: int, side: int) -> None:
    import torch
    import torch.nn.functional as F

    from bioattn.attention import use_backend
    from bioattn.tasks.ct.fit import build_models
    from bioattn.tasks.ct.options import PROTOCOLS, CTOptions
    from bioattn.training.schedules import build_optimizer
    from bioattn.tasks.common import training_attention_backend

    options = CTOptions(out=Path("."), manifest=Path("volumes.csv"), size=(side,), baseline="none")
    model, _ = build_models(options, num_classes=2, in_channels=1)
    volumes = torch.rand(batch, 1, side, side, side)
    if mode == "train":  # as the recipe trains: its precision (bf16 autocast) and attention backend
        config = PROTOCOLS[options.protocol].train_config
        model.train()
        optimizer = build_optimizer(model, config)
        with use_backend(training_attention_backend(config, torch.device("cpu"))), \
                torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.precision == "bf16"):
            loss = F.cross_entropy(model(volumes), torch.randint(0, 2, (batch,)))
        loss.backward()
        optimizer.step()
    elif mode == "infer":
        model.eval()
        with torch.no_grad():
            model(volumes).softmax(dim=-1)
    else:
        model.eval()
        model.attention_map(volumes)


def _msa(mode: str, rows: int, columns: int) -> None:
    import torch

    from bioattn.models.msa_contact import MSAContactModel
    from bioattn.models.msa_contact import masked_lm_loss
    from bioattn.tasks.msa.features import MSAOptions
    from bioattn.training import TrainConfig
    from bioattn.training.schedules import build_optimizer

    options = MSAOptions()
    model = MSAContactModel(max_len=columns, embed_dim=options.embed_dim, num_heads=options.heads,
                            num_layers=options.layers, dropout=options.dropout)
    tokens = torch.randint(0, 20, (1, rows, columns))
    if mode == "train":
        model.train()
        model.contact_head.requires_grad_(False)
        optimizer = build_optimizer(model, TrainConfig())
        masked_lm_loss(model, tokens).backward()
        optimizer.step()
    else:
        model.eval()
        model.contact_features(tokens)


def run_child(model: str, mode: str, a: int, b: int) -> None:
    import torch

    torch.set_num_threads(1)
    {"promoter": _promoter, "ct": _ct, "msa": _msa}[model](mode, a, b)


# ------------------------------------------------------------------------------------------ parent side
@dataclass(frozen=True)
class Probe:
    """One curve: ``model`` in ``mode`` with a fixed ``fixed`` and a growing ``sizes``; ``args(size)`` → the child's
    two integers; ``tokens(size)`` the quantity the fit is in (tokens, voxels)."""

    name: str
    model: str
    mode: str
    what: str
    sizes: tuple[int, ...]
    args: Callable[[int], tuple[int, int]]
    tokens: Callable[[int], float]
    size_label: str
    invert: Callable[[float], float]  # tokens -> size


PROBES = (
    Probe("promoter-train", "promoter", "train", "promoter, training step, batch 64",
          (256, 512, 1024, 2048, 4096), lambda L: (64, L), float, "length (nt)", float),
    Probe("promoter-infer-1", "promoter", "infer", "promoter, inference, batch 1",
          (1024, 4096, 16384, 32768), lambda L: (1, L), float, "length (nt)", float),
    Probe("promoter-infer-256", "promoter", "infer", "promoter, inference, batch 256",
          (256, 512, 1024, 2048), lambda L: (256, L), float, "length (nt)", float),
    Probe("ct-train", "ct", "train", "CT, training step, batch 32",
          (32, 48, 64, 80, 96, 112), lambda S: (32, S), lambda S: float(S) ** 3, "cube side (voxels)",
          lambda v: v ** (1 / 3)),
    Probe("ct-infer", "ct", "infer", "CT, inference, batch 1",
          (64, 128, 256, 384, 512), lambda S: (1, S), lambda S: float(S) ** 3, "cube side (voxels)",
          lambda v: v ** (1 / 3)),
    Probe("ct-explain", "ct", "explain", "CT, explanation (attention map on the voxel grid), batch 1",
          (64, 128, 256, 384, 512), lambda S: (1, S), lambda S: float(S) ** 3, "cube side (voxels)",
          lambda v: v ** (1 / 3)),
    Probe("msa-train-columns", "msa", "train", "MSA, training step, 32 rows",
          (128, 256, 512, 1024), lambda L: (32, L), float, "columns", float),
    Probe("msa-features-columns", "msa", "features", "MSA, contact features, 32 rows",
          (128, 256, 512, 1024, 2048), lambda L: (32, L), float, "columns", float),
    Probe("msa-train-rows", "msa", "train", "MSA, training step, 256 columns",
          (32, 64, 128, 256, 512), lambda N: (N, 256), float, "rows", float),
    Probe("msa-features-rows", "msa", "features", "MSA, contact features, 256 columns",
          (32, 64, 128, 256, 512), lambda N: (N, 256), float, "rows", float),
)


#: ``--smoke``: the child's two integers per model (batch/rows and size), small enough for a second.
QUICK_ARGS = {"promoter": (2, 64), "ct": (2, 32), "msa": (4, 32)}


def measure(probe: Probe, size: int, timeout: float) -> tuple[float, float]:
    """Peak RSS (GiB) and wall seconds of one child process running ``probe`` at ``size``."""
    a, b = probe.args(size)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, str(SCRIPT), "--child", probe.model, probe.mode, str(a), str(b)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            child.kill()
            os.wait4(child.pid, 0)
            raise TimeoutError(f"{probe.name} at {size} took longer than {timeout:.0f} s")
        time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        stderr = child.stderr.read().decode() if child.stderr else ""
        raise RuntimeError(f"{probe.name} at {size} failed: {stderr.strip().splitlines()[-1:]}")
    return usage.ru_maxrss * 1024 / GIB, time.perf_counter() - start  # ru_maxrss is in KiB on Linux


def fit_growth(tokens: np.ndarray, gib: np.ndarray) -> tuple[np.ndarray, str]:
    """Coefficients (constant first) and name of the growth fitted to the three largest sizes, where the fixed cost
    (interpreter, torch, allocator pools) no longer dominates: quadratic (through the three points) when the
    memory per unit grew by more than 25 % from the first interval to the second, else a least-squares line."""
    tokens, gib = tokens[-3:], gib[-3:]
    if len(tokens) == 3:
        slopes = np.diff(gib) / np.diff(tokens)
        if slopes[0] > 0 and slopes[1] > 1.25 * slopes[0]:
            return np.polyfit(tokens, gib, 2)[::-1], "quadratic"
    return np.polyfit(tokens, gib, 1)[::-1], "linear"


def largest_tokens(coefficients: np.ndarray, budget: float) -> float:
    """Largest ``t`` with ``sum(c_i t^i) <= budget`` for an increasing fit."""
    c = coefficients
    if len(c) == 3 and c[2] > 0:
        return (-c[1] + math.sqrt(c[1] ** 2 - 4 * c[2] * (c[0] - budget))) / (2 * c[2])
    return (budget - c[0]) / c[1]


def run_probe(probe: Probe, max_measured: float, budget: float, timeout: float) -> list[object]:
    points: list[tuple[int, float, float]] = []
    for size in probe.sizes:
        if len(points) >= 2:
            coefficients, _ = fit_growth(np.array([probe.tokens(s) for s, _, _ in points]),
                                         np.array([g for _, g, _ in points]))
            predicted = float(np.polyval(coefficients[::-1], probe.tokens(size)))
            if predicted > max_measured or points[-1][1] > max_measured / 2:
                break
        try:
            gib, seconds = measure(probe, size, timeout)
        except TimeoutError as exc:
            print(f"  {exc}; stopping this probe", flush=True)
            break
        points.append((size, gib, seconds))
        print(f"  {probe.name}: {probe.size_label} {size}: {gib:.2f} GiB peak RSS ({seconds:.0f} s)", flush=True)
        if gib > max_measured:
            break
    tokens = np.array([probe.tokens(s) for s, _, _ in points])
    gib = np.array([g for _, g, _ in points])
    coefficients, kind = fit_growth(tokens, gib)
    largest = probe.invert(largest_tokens(coefficients, budget))
    measured = ", ".join(f"{s}: {g:.2f}" for s, g, _ in points)
    unit = "voxel" if "side" in probe.size_label else "nt" if "(nt)" in probe.size_label else probe.size_label.rstrip("s")
    growth = f"{kind}: {coefficients[0]:.2f} GiB + {coefficients[1] * GIB / 2**20:.3g} MiB per {unit}"
    if kind == "quadratic":
        growth += f" + {coefficients[2] * GIB / 2**20:.3g} MiB per {unit}²"
    where = "measured" if largest <= points[-1][0] else "extrapolated"
    return [probe.what, probe.size_label, measured, growth,
            f"{largest:,.0f} ({where}, {largest / points[-1][0]:.1f}× the largest measured)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=4, metavar=("MODEL", "MODE", "A", "B"), help=argparse.SUPPRESS)
    parser.add_argument("--probes", nargs="+", default=None, choices=[p.name for p in PROBES],
                        help="which curves to measure (default: all)")
    parser.add_argument("--budget-gib", type=float, default=24.0, help="memory to fit in (default: %(default)s)")
    parser.add_argument("--max-measured-gib", type=float, default=6.0,
                        help="never start a measurement predicted above this, stop after one above it "
                             "(default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per measurement (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: run every chosen probe's call once at a tiny size in this process, "
                             "measure nothing")
    args = parser.parse_args()
    if args.child:
        model, mode, a, b = args.child
        run_child(model, mode, int(a), int(b))
        return
    if args.smoke:
        for probe in PROBES:
            if args.probes is None or probe.name in args.probes:
                run_child(probe.model, probe.mode, *QUICK_ARGS[probe.model])
                print(f"  {probe.name}: ran at {QUICK_ARGS[probe.model]}", flush=True)
        return
    from bioattn.report import format_table

    chosen = [p for p in PROBES if args.probes is None or p.name in args.probes]
    print(f"peak RSS per process, 1 thread, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = [run_probe(probe, args.max_measured_gib, args.budget_gib, args.timeout) for probe in chosen]
    print(format_table(["model, call", "size", "measured peak RSS (GiB) by size", "fitted growth",
                        f"largest size in {args.budget_gib:g} GiB"], rows,
                       title=f"peak resident memory (load average at the end {os.getloadavg()[0]:.2f})"))


if __name__ == "__main__":
    main()
