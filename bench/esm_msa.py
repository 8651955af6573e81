"""Benchmark: the whole MSA Transformer (ESM-MSA-1b shape) through bioattn vs through fair-esm, same random weights.

For each alignment of N rows × L columns, inference (no gradients) of the 12-layer, 768-wide, 12-head model with
fair-esm's random initialisation, both implementations holding the same weights, each measured in a fresh
subprocess: wall time and process CPU time (median of ``--repeats``; after one warm-up on CUDA; on a shared CPU
the CPU-time ratio is the steadier one) and peak memory (CUDA: peak allocated;
CPU: the rise of the process's peak resident set size, reset after set-up, over its state then). Two tasks:

- ``contacts``: logits + contact probabilities (what ``bioattn predict msa --contact-method esm-msa`` runs). fair-esm then
  collects every layer's column-attention maps (layers × H × L × N² floats) besides the row maps;
- ``logits``: the masked-LM logits only (fair-esm still builds one layer's H × L × N² column maps at a time).

Before running, each implementation's need is estimated from its shapes (activations, attention maps); a point whose
estimate exceeds ``--budget-gib`` (default: 60 % of the free memory of the device) is not run and reported as
"would need X GiB". The two implementations' outputs are compared where both ran (max abs difference of the
contacts or logits). Ratios are bioattn / fair-esm, from the same run.

    python bench/esm_msa.py --device cuda                              # 256x256, 512x256, 1024x512
    python bench/esm_msa.py --device cpu --points 32x64,64x64,128x64   # CPU-sized points, same model
    python bench/esm_msa.py --device cpu --quick                       # a 2-layer model, seconds
    python bench/esm_msa.py --smoke        # smoke test: the 2-layer model on a 4x8 alignment, in this process
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

FULL = dict(layers=12, embed_dim=768, ffn_embed_dim=3072, attention_heads=12, max_positions=1024)
QUICK = dict(layers=2, embed_dim=64, ffn_embed_dim=256, attention_heads=4, max_positions=1024)
DEFAULT_POINTS = "256x256,512x256,1024x512"
GIB = 2**30


def esm_model(size: dict):
    """fair-esm's MSATransformer, its random initialisation from seed 0, eval mode."""
    import esm

    args = argparse.Namespace(arch="msa_transformer", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                              max_tokens_per_msa=2**14, max_tokens=2**14, embed_positions_msa=True, **size)
    torch.manual_seed(0)
    return esm.MSATransformer(args, esm.Alphabet.from_architecture("msa_transformer")).eval()


def estimate_gib(name: str, task: str, n: int, length: int, size: dict) -> float:
    """Peak memory estimate: model weights, a few copies of the (N, L+1, D) activations, attention maps."""
    c, d, h, layers = length + 1, size["embed_dim"], size["attention_heads"], size["layers"]
    weights = 4 * (layers * (4 * 4 * d * d + 2 * d * size["ffn_embed_dim"]) + 33 * d + 1024 * d * 2)
    activations = 4 * n * c * d
    row_maps = 4 * layers * h * c * c
    if name == "bioattn":
        chunk = 4 * 2**14 * (size["ffn_embed_dim"] + 4 * d) + 4 * h * 2**14 * max(n, c)
        need = weights + 5 * activations + chunk + (row_maps if task == "contacts" else 0) + 4 * n * c * 33
    else:
        column_maps = 4 * h * c * n * n
        ffn = 4 * n * c * size["ffn_embed_dim"]
        kept = layers * column_maps if task == "contacts" else column_maps
        need = weights + 5 * activations + ffn + kept + column_maps + row_maps + 4 * n * c * 33
    return need / GIB


def tokens_for(n: int, length: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    body = torch.randint(4, 24, (1, n, length), generator=generator)
    return torch.cat([torch.zeros(1, n, 1, dtype=torch.long), body], dim=2)


def _peak_rss() -> int:
    """The process's peak resident set size in bytes since the last :func:`_reset_peak_rss` (Linux VmHWM)."""
    try:
        with open("/proc/self/status") as handle:
            return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak_rss() -> int:
    """Reset the peak resident set size to the current one (so set-up does not count); returns it in bytes."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed set-up memory back, so reuse of it is not hidden
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass
    return _peak_rss()


def run_one(name: str, task: str, n: int, length: int, quick: bool, repeats: int, device: str, dump: str | None) -> dict:
    """One measurement in this process (called in a subprocess by :func:`measure`)."""
    from bioattn.models.msa_transformer import MSATransformer

    size = QUICK if quick else FULL
    reference = esm_model(size)
    converted = MSATransformer.from_esm_state_dict(reference.state_dict(), vars(reference.args))
    model = converted if name == "bioattn" else reference  # both built in either child: the same set-up
    del converted, reference
    model = model.to(device)
    tokens = tokens_for(n, length).to(device)
    cuda = device == "cuda"

    def call():
        with torch.no_grad():
            out = model(tokens, return_contacts=task == "contacts")
            result = out["contacts"] if task == "contacts" else out["logits"]
            if cuda:
                torch.cuda.synchronize()
            return result

    if cuda:
        call()  # warm-up (kernels, allocator)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _reset_peak_rss()
    times, cpu_times = [], []
    for _ in range(max(1, repeats)):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = call()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - start_cpu)
    peak = (torch.cuda.max_memory_allocated() if cuda else _peak_rss()) - base
    if dump:
        torch.save(result.float().cpu()[..., :64, :64].clone(), dump)
    return {"seconds": statistics.median(times), "cpu_seconds": statistics.median(cpu_times), "peak_gib": peak / GIB}


def measure(args: argparse.Namespace, name: str, task: str, n: int, length: int, dump: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", name, task, str(n), str(length), "--device", args.device,
           "--repeats", str(args.repeats)] + (["--quick"] if args.quick else []) + (["--dump", dump] if dump else [])
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}  # large buffers mmapped, returned on free: RSS tracks use
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        oom = "out of memory" in done.stderr.lower() or done.returncode in (-9, 137)
        return {"error": "out of memory" if oom else tail[0]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def free_gib(device: str) -> float:
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return free / GIB
    with open("/proc/meminfo") as handle:
        info = {line.split(":")[0]: int(line.split()[1]) for line in handle}
    return info["MemAvailable"] * 1024 / GIB


def cell(result: dict, estimate: float) -> str:
    if "skipped" in result:
        return f"not run: would need ~{estimate:.1f} GiB"
    if "error" in result:
        return f"failed: {result['error']} (estimate {estimate:.1f} GiB)"
    cpu = f" (CPU {result['cpu_seconds']:.2f} s)" if "cpu_seconds" in result else ""
    return f"{result['seconds']:.2f} s{cpu}, {result['peak_gib']:.2f} GiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where both models run (default: cpu)")
    parser.add_argument("--points", default=DEFAULT_POINTS, help="NxL alignments, comma-separated (default: %(default)s)")
    parser.add_argument("--tasks", default="contacts,logits", help="contacts and/or logits (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement, median reported (default: 3)")
    parser.add_argument("--budget-gib", type=float, default=None,
                        help="skip a measurement whose estimate exceeds this (default: 60%% of the device's free memory)")
    parser.add_argument("--quick", action="store_true", help="a 2-layer, 64-wide model instead of the ESM-MSA-1b shape")
    parser.add_argument("--estimate-only", action="store_true", help="print each measurement's memory estimate, run nothing")
    parser.add_argument("--out", default=None, help="also write the results as JSON to this file")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: both implementations of the --quick model once on a 4x8 alignment in this "
                             "process (needs fair-esm), measures nothing")
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        for name in ("bioattn", "fair-esm"):
            result = run_one(name, "contacts", 4, 8, True, 1, "cpu", None)
            print(f"{name}: {result['cpu_seconds'] * 1e3:.1f} CPU ms (smoke)")
        return
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.child:
        name, task, n, length = args.child
        print(json.dumps(run_one(name, task, int(n), int(length), args.quick, args.repeats, args.device, args.dump)))
        return
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA GPU")
    budget = args.budget_gib if args.budget_gib is not None else 0.6 * free_gib(args.device)
    size = QUICK if args.quick else FULL
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    print(f"MSA Transformer {size['layers']} layers x {size['embed_dim']} x {size['attention_heads']} heads, same random "
          f"weights; {device_name}; torch {torch.__version__}; budget {budget:.1f} GiB")
    if args.estimate_only:
        for task in args.tasks.split(","):
            for point in args.points.split(","):
                n, length = (int(v) for v in point.lower().split("x"))
                ours, theirs = (estimate_gib(name, task, n, length, size) for name in ("bioattn", "fair-esm"))
                print(f"{task:8s} N x L = {n:4d} x {length:4d}: estimated peak bioattn {ours:.1f} GiB, fair-esm "
                      f"{theirs:.1f} GiB (ratio {ours / theirs:.3f})")
        return
    rows = []
    for task in args.tasks.split(","):
        for point in args.points.split(","):
            n, length = (int(v) for v in point.lower().split("x"))
            row = {"task": task, "N": n, "L": length}
            for name in ("bioattn", "fair-esm"):
                estimate = estimate_gib(name, task, n, length, size)
                row[f"{name}_estimate_gib"] = round(estimate, 2)
                dump = f"/dev/shm/esm_msa_bench_{name}.pt" if os.path.isdir("/dev/shm") else None
                row[name] = {"skipped": True} if estimate > budget else measure(args, name, task, n, length, dump)
                row[f"{name}_dump"] = dump if "seconds" in row[name] else None
            if row["bioattn_dump"] and row["fair-esm_dump"]:
                row["max_abs_difference"] = float((torch.load(row["bioattn_dump"]) - torch.load(row["fair-esm_dump"])).abs().max())
            ours, theirs = row["bioattn"], row["fair-esm"]
            line = (f"{task:8s} N x L = {n:4d} x {length:4d}: bioattn {cell(ours, row['bioattn_estimate_gib'])} | "
                    f"fair-esm {cell(theirs, row['fair-esm_estimate_gib'])}")
            if "seconds" in ours and "seconds" in theirs:
                row["memory_ratio"] = ours["peak_gib"] / max(theirs["peak_gib"], 1e-9)
                row["speed_ratio"] = theirs["seconds"] / ours["seconds"]
                if "cpu_seconds" in ours and "cpu_seconds" in theirs:
                    row["cpu_speed_ratio"] = theirs["cpu_seconds"] / ours["cpu_seconds"]
                cpu = f" (CPU time {row['cpu_speed_ratio']:.2f}x)" if "cpu_speed_ratio" in row else ""
                line += (f" | memory bioattn/fair-esm {row['memory_ratio']:.3f}, speed bioattn/fair-esm "
                         f"{row['speed_ratio']:.2f}x{cpu}, max |diff| {row.get('max_abs_difference', float('nan')):.1e}")
            elif "seconds" in ours:
                need = row["fair-esm_estimate_gib"]
                line += f" | fair-esm {'did not fit' if 'error' in theirs else 'not run'}: memory ratio <= {ours['peak_gib'] / need:.3f} (vs its estimate)"
            print(line, flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"device": device_name, "torch": torch.__version__, "size": size, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
