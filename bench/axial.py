"""Benchmark: bioattn AxialTransformerLayer vs ESM's axial layer vs full attention over the flattened MSA.

Forward + backward time and peak memory of one layer on an MSA of N sequences × L positions (batch 1,
width D, H heads, feed-forward 4D), for a grid of (N, L), all in the same run:

- ``bioattn axial``: :class:`bioattn.attention.AxialTransformerLayer` (tied rows, batch-first, fused kernels);
- ``esm axial``: ``esm.modules.AxialTransformerLayer`` of fair-esm (``RowSelfAttention`` + ``ColumnSelfAttention``,
  sequence-first ``(R, C, B, D)``, explicit softmax), same sizes, dropout off;
- ``full attention``: :class:`bioattn.attention.TransformerEncoderLayer` over the N·L cells as one sequence
  (fused kernel), only up to ``--full-max-cells`` cells — its time grows as (N·L)².

Axial cost is O(N·L·(N+L)); the table gives time and memory per N·L·(N+L) unit so the scaling shows, and
the last rows run a forward pass of an N=1024 × L=512 alignment (inference, chunked and not). Each
measurement runs in a fresh subprocess; peak memory is the rise of the process's peak resident set size
over its state after set-up. CPU seconds are reported beside wall seconds (robust on a shared machine).

    python bench/axial.py                     # D=64, H=4, grid up to 512×256, plus 1024×512 inference
    python bench/axial.py --quick             # three small shapes
    python bench/axial.py --smoke             # smoke test: each implementation once, tiny, in this process
    python bench/axial.py --out runs/bench_axial   # also writes results.json and scaling.png there
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

IMPLEMENTATIONS = ("bioattn axial", "esm axial", "full attention")
GRID = [(16, 64), (32, 64), (64, 64), (64, 128), (128, 128), (256, 128), (256, 256), (512, 256)]
QUICK_GRID = [(16, 32), (32, 32), (32, 64)]


class _EsmLayer(nn.Module):
    """fair-esm's AxialTransformerLayer on batch-first input ``(B, N, L, D)``."""

    def __init__(self, embed_dim: int, heads: int) -> None:
        super().__init__()
        from esm.modules import AxialTransformerLayer

        self.layer = AxialTransformerLayer(embed_dim, 4 * embed_dim, heads, dropout=0.0, attention_dropout=0.0,
                                           activation_dropout=0.0, max_tokens_per_msa=2**14)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x.permute(1, 2, 0, 3)).permute(2, 0, 1, 3)


class _Flattened(nn.Module):
    """Full self-attention over the N·L cells of ``(B, N, L, D)``."""

    def __init__(self, embed_dim: int, heads: int) -> None:
        super().__init__()
        from bioattn.attention import TransformerEncoderLayer

        self.layer = TransformerEncoderLayer(embed_dim, heads, dropout=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, length, d = x.shape
        return self.layer(x.reshape(b, n * length, d))[0].view(b, n, length, d)


class _Ours(nn.Module):
    def __init__(self, embed_dim: int, heads: int, chunk_size: int | None) -> None:
        super().__init__()
        from bioattn.attention import AxialTransformerLayer

        self.layer = AxialTransformerLayer(embed_dim, heads, dropout=0.0, tied=True, chunk_size=chunk_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)[0]


def build(name: str, embed_dim: int, heads: int, chunk_size: int | None) -> nn.Module:
    if name == "bioattn axial":
        return _Ours(embed_dim, heads, chunk_size)
    if name == "esm axial":
        return _EsmLayer(embed_dim, heads)
    return _Flattened(embed_dim, heads)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(name: str, n: int, length: int, embed_dim: int, heads: int, repeats: int, backward: bool, chunk_size: int | None) -> dict:
    """Median wall/CPU seconds of forward(+backward) of one implementation in this process, and its peak MiB."""
    torch.manual_seed(0)
    module = build(name, embed_dim, heads, chunk_size).train(backward)
    x = torch.randn(1, n, length, embed_dim, requires_grad=backward)
    base = _peak_rss_mib()
    wall, cpu = [], []
    for i in range(repeats + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        if backward:
            module(x).square().mean().backward()
        else:
            with torch.no_grad():
                module(x)
        if i or repeats == 0:  # the first run warms up kernels and the allocator
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return {"impl": name, "N": n, "L": length, "backward": backward, "chunk_size": chunk_size,
            "seconds": statistics.median(wall), "cpu_seconds": statistics.median(cpu), "peak_mib": _peak_rss_mib() - base}


def measure(args: argparse.Namespace, name: str, n: int, length: int, backward: bool, chunk_size: int | None = None, repeats: int | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps(
        [name, n, length, args.embed_dim, args.heads, args.repeats if repeats is None else repeats, backward, chunk_size])]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        note = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return {"impl": name, "N": n, "L": length, "backward": backward, "chunk_size": chunk_size,
                "seconds": float("nan"), "cpu_seconds": float("nan"), "peak_mib": float("nan"), "note": note}
    return json.loads(done.stdout.strip().splitlines()[-1])


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in IMPLEMENTATIONS:
        rows = [r for r in results if r["impl"] == name and r["backward"] and r["seconds"] == r["seconds"]]
        units = [r["N"] * r["L"] * (r["N"] + r["L"]) for r in rows]
        axes[0].loglog(units, [r["cpu_seconds"] for r in rows], "o-", label=name)
        axes[1].loglog(units, [max(r["peak_mib"], 0.1) for r in rows], "o-", label=name)
    axes[0].set_ylabel("forward+backward CPU seconds")
    axes[1].set_ylabel("peak memory above set-up (MiB)")
    for ax in axes:
        ax.set_xlabel("N·L·(N+L)")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("one axial layer vs full attention over the flattened MSA")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--full-max-cells", type=int, default=16384, help="largest N·L for full attention")
    parser.add_argument("--big", type=int, nargs=2, default=[1024, 512], metavar=("N", "L"), help="inference shape")
    parser.add_argument("--chunk-size", type=int, default=64, help="rows/columns per chunk for the big inference run")
    parser.add_argument("--quick", action="store_true", help="three small shapes, no big inference run")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.json and scaling.png")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: each implementation once at N=4, L=8, D=16 in this process, measures nothing")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        for name in IMPLEMENTATIONS:
            row = run_one(name, 4, 8, 16, 2, 0, True, None)
            print(f"{name}: {row['cpu_seconds'] * 1e3:.1f} CPU ms (smoke)")
        return
    if args.child:
        print(json.dumps(run_one(*json.loads(args.child))))
        return
    grid = QUICK_GRID if args.quick else GRID
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads; "
          f"D = {args.embed_dim}, H = {args.heads}, batch 1, forward+backward, median of {args.repeats}")
    print("| N | L | N·L·(N+L) | " + " | ".join(f"{n}: CPU s / MiB" for n in IMPLEMENTATIONS) + " | ours µs per 10³ units |")
    print("|---|---|---|" + "---|" * (len(IMPLEMENTATIONS) + 1))
    results = []
    for n, length in grid:
        row = {}
        for name in IMPLEMENTATIONS:
            if name == "full attention" and n * length > args.full_max_cells:
                row[name] = None
                continue
            row[name] = measure(args, name, n, length, backward=True)
            results.append(row[name])
        units = n * length * (n + length)
        cells = " | ".join("—" if r is None else f"{r['cpu_seconds']:.3f} / {r['peak_mib']:.0f}" for r in row.values())
        per_unit = row["bioattn axial"]["cpu_seconds"] / units * 1e9
        print(f"| {n} | {length} | {units:,} | {cells} | {per_unit:.2f} |", flush=True)
    if not args.quick:
        n, length = args.big
        print(f"\n# forward only (inference), N = {n}, L = {length}")
        print("| implementation | wall s | CPU s | peak MiB |\n|---|---|---|---|")
        for name, chunk in (("bioattn axial", args.chunk_size), ("bioattn axial", None), ("esm axial", None)):
            result = measure(args, name, n, length, backward=False, chunk_size=chunk, repeats=0)
            results.append(result)
            label = f"{name}" + (f" (chunk_size={chunk})" if chunk else "")
            note = f" ({result['note']})" if "note" in result else ""
            print(f"| {label}{note} | {result['seconds']:.1f} | {result['cpu_seconds']:.1f} | {result['peak_mib']:.0f} |", flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
        plot(results, args.out / "scaling.png")
        print(f"wrote {args.out / 'results.json'} and {args.out / 'scaling.png'}")


if __name__ == "__main__":
    main()
