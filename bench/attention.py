"""Benchmark: bioattn MultiHeadAttention vs torch.nn.MultiheadAttention vs a plain explicit-softmax MHA.

Forward + backward time and peak memory for self-attention at a constant token budget B·L while the
sequence length L grows (so quadratic cost shows directly). Each (implementation, L) runs in a fresh
subprocess and peak memory is that process's peak resident set size above its state after set-up, so
the three implementations are measured the same way in the same run.

    python bench/attention.py                 # L = 128 … 8192, B·L = 8192, E = 256, H = 8
    python bench/attention.py --quick         # a few small lengths
    python bench/attention.py --smoke         # smoke test: each implementation once, tiny, in this process
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

import torch
from torch import nn

IMPLEMENTATIONS = ("bioattn", "torch.nn.MultiheadAttention", "explicit softmax")


class ExplicitMHA(nn.Module):
    """What users write by hand: materialise softmax(QKᵀ/√d) and multiply by V."""

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, e = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, length, e))


def _build(name: str, embed_dim: int, heads: int) -> nn.Module:
    if name == "bioattn":
        from bioattn.attention import MultiHeadAttention

        mha = MultiHeadAttention(embed_dim, heads)
        return _FirstOutput(lambda x: mha(x)[0], mha)
    if name == "torch.nn.MultiheadAttention":
        mha = nn.MultiheadAttention(embed_dim, heads, batch_first=True)
        return _FirstOutput(lambda x: mha(x, x, x, need_weights=False)[0], mha)
    return ExplicitMHA(embed_dim, heads)


class _FirstOutput(nn.Module):
    def __init__(self, fn, module: nn.Module) -> None:
        super().__init__()
        self.fn, self.module = fn, module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(name: str, length: int, tokens: int, embed_dim: int, heads: int, repeats: int) -> dict:
    """Time forward+backward of one implementation in this process; report median seconds and peak MiB."""
    torch.manual_seed(0)
    module = _build(name, embed_dim, heads).train()
    x = torch.randn(max(1, tokens // length), length, embed_dim, requires_grad=True)
    base = _peak_rss_mib()
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        module(x).sum().backward()
        if i:  # the first run warms up kernels and the allocator
            times.append(time.perf_counter() - start)
    return {"impl": name, "L": length, "seconds": statistics.median(times), "peak_mib": _peak_rss_mib() - base}


def _measure_in_subprocess(args: argparse.Namespace, name: str, length: int) -> dict:
    cmd = [sys.executable, __file__, "--child", name, str(length), str(args.tokens), str(args.embed_dim),
           str(args.heads), str(args.repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"impl": name, "L": length, "seconds": float("nan"), "peak_mib": float("nan"),
                "note": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096, 8192])
    parser.add_argument("--tokens", type=int, default=8192, help="constant B·L")
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--explicit-max-len", type=int, default=4096,
                        help="skip the explicit implementation above this L (its L² weights exhaust memory)")
    parser.add_argument("--quick", action="store_true", help="lengths 128, 512, 1024 only")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: each implementation once at L=32, E=16 in this process, measures nothing")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        for name in IMPLEMENTATIONS:
            row = run_one(name, 32, 64, 16, 2, 1)
            print(f"{name}: {row['seconds'] * 1e3:.1f} ms (smoke)")
        return
    if args.child:
        name, length, tokens, embed_dim, heads, repeats = args.child
        print(json.dumps(run_one(name, int(length), int(tokens), int(embed_dim), int(heads), int(repeats))))
        return
    lengths = [128, 512, 1024] if args.quick else args.lengths
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads; B·L = {args.tokens}, E = {args.embed_dim}, H = {args.heads}; "
          "forward+backward, median of", args.repeats)
    header = f"{'L':>6} {'B':>4} | " + " | ".join(f"{n[:22]:>22} ms   MiB" for n in IMPLEMENTATIONS)
    print(header + " | torch/ours  explicit/ours")
    print("-" * len(header) + "-" * 28)
    for length in lengths:
        rows = {}
        for name in IMPLEMENTATIONS:
            if name == "explicit softmax" and length > args.explicit_max_len:
                rows[name] = {"seconds": float("nan"), "peak_mib": float("nan")}
                continue
            rows[name] = _measure_in_subprocess(args, name, length)
        ours = rows["bioattn"]["seconds"]
        cells = " | ".join(f"{rows[n]['seconds'] * 1e3:>25.1f} {rows[n]['peak_mib']:>5.0f}" for n in IMPLEMENTATIONS)
        ratio_torch = rows["torch.nn.MultiheadAttention"]["seconds"] / ours
        ratio_explicit = rows["explicit softmax"]["seconds"] / ours
        print(f"{length:>6} {max(1, args.tokens // length):>4} | {cells} | {ratio_torch:>9.2f}x  {ratio_explicit:>11.2f}x")


if __name__ == "__main__":
    main()
