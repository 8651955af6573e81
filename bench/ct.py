"""Benchmark: HybridCT3D vs MONAI's ViT classifier vs a MONAI 3D ResNet-18, at 28³ and 64³.

Training throughput (forward + backward + Adam step) and inference throughput (forward, no grad), in
volumes per second of wall time and per CPU-second (robust on a shared machine), and the peak memory
of each. The hybrid model and the ResNet are exactly the ones ``bioattn train ct`` trains at each
size (:func:`bioattn.tasks.ct.build_models`); the ViT has the same token count (patch = the hybrid's
stride), width and depth. Inputs are padded to a multiple of the stride as training does (28³ → 32³).

Each (model, size) runs in a fresh subprocess; on CPU peak memory is the rise of the process's peak
resident set size over its state after building the model, on CUDA ``torch.cuda.max_memory_allocated``.

    python bench/ct.py                      # 28 and 64, batch 16, CPU or the first GPU
    python bench/ct.py --sizes 28 --steps 3 --batch-size 8
    python bench/ct.py --smoke              # smoke test: each model once at 28³, batch 1, in this process
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from bioattn.tasks.ct.fit import build_models
from bioattn.tasks.ct.options import CTOptions

MODELS = ("hybrid (bioattn)", "MONAI ViT", "MONAI ResNet-18 1/8 width")


class _Logits(nn.Module):
    """MONAI's ViT returns ``(logits, hidden_states)``; keep the logits."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self.vit = vit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit(x)[0]


def build(name: str, size: int) -> tuple[nn.Module, int]:
    """The model and its (padded) input edge length."""
    hybrid, resnet = build_models(CTOptions(out=Path("unused"), size=(size,)), num_classes=2, in_channels=1)
    edge = math.ceil(size / hybrid.stride) * hybrid.stride
    if name == MODELS[0]:
        return hybrid, edge
    if name == MODELS[2]:
        return resnet, edge
    from monai.networks.nets import ViT

    config = hybrid.config
    vit = ViT(1, img_size=edge, patch_size=hybrid.stride, hidden_size=config["embed_dim"],
              mlp_dim=4 * config["embed_dim"], num_layers=config["num_layers"], num_heads=config["num_heads"],
              classification=True, num_classes=2, dropout_rate=config["dropout"], post_activation=None,
              spatial_dims=3)
    return _Logits(vit), edge


def _peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn, steps: int, device: torch.device) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of ``fn`` over ``steps`` runs after one warm-up."""
    walls, cpus = [], []
    for i in range(steps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def run_one(name: str, size: int, batch: int, steps: int) -> dict:
    """Inference then training throughput and peak memory of one model at one size, in this process."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model, edge = build(name, size)
    model = model.to(device)
    x = torch.rand(batch, 1, edge, edge, edge, device=device)
    y = torch.randint(0, 2, (batch,), device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    base = _peak_mib(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) / 2**20

    def infer() -> None:
        with torch.no_grad():
            model(x)

    def train() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    model.eval()
    infer_wall, infer_cpu = _timed(infer, steps, device)
    infer_peak = _peak_mib(device) - base
    model.train()
    train_wall, train_cpu = _timed(train, steps, device)
    return {
        "model": name, "size": size, "input": edge, "batch": batch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_vol_per_s": batch / train_wall, "train_vol_per_cpu_s": batch / train_cpu,
        "infer_vol_per_s": batch / infer_wall, "infer_vol_per_cpu_s": batch / infer_cpu,
        "infer_peak_mib": infer_peak, "train_peak_mib": _peak_mib(device) - base,
    }


def _measure_in_subprocess(name: str, size: int, batch: int, steps: int) -> dict:
    cmd = [sys.executable, __file__, "--child", name, str(size), str(batch), str(steps)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return {"model": name, "size": size, "error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", choices=(28, 64), default=[28, 64])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up (median reported)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: each model once at 28³, batch 1, one step, in this process; measures nothing")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        for name in MODELS:
            row = run_one(name, 28, 1, 1)
            print(f"{name}: {row['parameters'] / 1e6:.2f} M parameters, input {row['input']}³ (smoke)")
        return
    if args.child:
        name, size, batch, steps = args.child
        print(json.dumps(run_one(name, int(size), int(batch), int(steps))))
        return
    cpu = platform.processor() or platform.machine()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else cpu
    print(f"# torch {torch.__version__}, {device}, {torch.get_num_threads()} CPU threads; batch {args.batch_size}, "
          f"median of {args.steps} steps; vol/s = volumes per second of wall time, vol/CPU-s per CPU-second")
    print("| size | model | params | train vol/s | train vol/CPU-s | infer vol/s | infer vol/CPU-s | "
          "train peak MiB | infer peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for size in args.sizes:
        for name in MODELS:
            row = _measure_in_subprocess(name, size, args.batch_size, args.steps)
            rows.append(row)
            if "error" in row:
                print(f"| {size}³ | {name} | failed: {row['error']} |||||||")
                continue
            print(f"| {size}³ (→{row['input']}³) | {name} | {row['parameters'] / 1e6:.2f} M | "
                  f"{row['train_vol_per_s']:.1f} | {row['train_vol_per_cpu_s']:.1f} | {row['infer_vol_per_s']:.1f} | "
                  f"{row['infer_vol_per_cpu_s']:.1f} | {row['train_peak_mib']:.0f} | {row['infer_peak_mib']:.0f} |",
                  flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
