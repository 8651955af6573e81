"""Benchmark: windows/s of a genome scan, the model alone vs ``bioattn predict promoter --window`` end to end.

A synthetic genome (random A/C/G/T chromosomes with a stretch of N, ``--megabases`` in all) is scanned with the
shipped ``gue-prom-core-all`` model (70 nt windows every ``--stride`` nt) set to average both strands (each window
is scored on both strands, two forward passes, as a model trained with strand averaging scores). Measured in the
same run, in wall seconds:

- ``model-only``: :meth:`PromoterClassifier.proba_from_ids` on ready batches of random windows at the scan's batch
  size (``--batch-size``; default: the scan's for the device), the same precision, in this process with the
  allocator setting the command makes (:func:`bioattn.runtime.keep_freed_memory`);
- ``end-to-end``: the command ``bioattn predict promoter --window 70 --stride S --output scan.bedGraph`` run as a
  fresh process on the FASTA (start-up, indexed reading, tokenising, model, writing the bedGraph), timed from
  launch to exit;
- ``start-up``: the same command on a 1 kb FASTA (imports, model loading, indexing: what a scan pays once), and
  the end-to-end rates without it;
- ``before`` (with ``--before SRC``): the same command from another source tree (e.g. an export of an older
  commit: ``git archive OLD bioattn | tar -x -C SRC``) on the same FASTA, in the same run, at the same precision
  and, when that is not fp32 (the older default), at fp32 too.

``--precision auto`` (the default on a CPU, as the scan command's) is bf16 on a CPU with bf16 units, else fp32.

Each rate is given per wall second and, on the CPU, per CPU second (user + system of every thread of the process:
what the load of a shared machine moves least; the end-to-end command's reader and writer threads count in it).
The last line is ``scan cpu X windows/s, end-to-end/model-only R (precision; per CPU second Y windows, R')``
(wall-clock rates first; the per-CPU-second ones move less when other jobs share the cores) and
``scan cuda X windows/s, end-to-end/model-only R`` with ``--device cuda``, preceded by
the projected wall time of the human genome (3.1 Gb) on both strands at this stride: ``3.1e9 / stride`` windows at
the end-to-end rate. ``--compile`` adds ``--compile`` to the command (the model-only rate stays eager).

``--null-model`` adds the host's ceiling: the same scan pipeline (reading, tokenising, batching, copying to the
device and back, writing) with the model replaced by a constant (a module returning fixed logits of the model's
shapes, no computing), timed inside a fresh process from the call of ``scan_genome`` to its return (start-up,
imports, indexing and a first scan of a 2 kb FASTA excluded), to ``.bw`` and to ``.bedGraph``; with ``--before SRC`` the older tree's pipeline
too. Then ``pyBigWig alone``: the entries of this tree's null-model ``.bw`` read back and written again by the
scan's own bigWig writer in the benchmark's process (same header, chunks and ``close``; the bytes compared), the
floor a scan to ``.bw`` cannot go below. The line ``null-model DEVICE .bw X windows/s, .bedGraph Y windows/s`` follows, with their ratio to the
model-only rate (above 1: the host can keep the model fed). ``--host-only``: only that (a CPU scores
too slowly with the real model for a genome large enough to time the host). ``--quick``: a short smoke run
(0.05 Mb, no start-up run).

``--nproc N`` then times the same command under ``torchrun --standalone --nproc_per_node N`` against one process,
each process at ``--threads`` threads (``OMP_NUM_THREADS``), ``--repeats`` times interleaved, checks that both
write the same bytes and ends with ``sharded N processes / 1 process: wall R, CPU C, identical bytes``.

    python bench/scan.py                                   # CPU, 6 Mb, stride 35
    python bench/scan.py --before /path/to/old/tree        # and the older code's end-to-end rate
    python bench/scan.py --device cuda --megabases 60      # on a GPU (fp32 and bf16)
    python bench/scan.py --nproc 2 --threads 1             # and torchrun with 2 processes against one
    python bench/scan.py --device cuda --megabases 24 --precision bf16 --null-model   # and the host's ceiling
    python bench/scan.py --host-only --megabases 24 --before /path/to/old/tree   # the host's ceiling on a CPU
    python bench/scan.py --quick --null-model               # smoke test
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HG38_BASES = 3.1e9
WINDOW = 70


def write_genome(path: Path, megabases: float, seed: int = 0) -> int:
    """A FASTA of 4 chromosomes (60 nt lines) of ``megabases`` in all, one with 10 kb of N; returns the bases."""
    rng = np.random.default_rng(seed)
    total = int(megabases * 1e6)
    sizes = [int(total * share) for share in (0.4, 0.3, 0.2)]
    sizes.append(total - sum(sizes))
    with open(path, "w") as handle:
        for number, size in enumerate(sizes, start=1):
            letters = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size)]
            if number == 2:
                letters[size // 2 : size // 2 + 10_000] = ord("N")
            handle.write(f">chr{number}\n")
            text = letters.tobytes().decode()
            handle.write("\n".join(text[i : i + 60] for i in range(0, size, 60)) + "\n")
    return total


def both_strand_model(folder: Path) -> Path:
    """A copy of the shipped gue-prom-core-all model whose config averages both strands."""
    source = ROOT / "bioattn" / "pretrained" / "gue-prom-core-all"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "model.safetensors", folder / "model.safetensors")
    config = json.loads((source / "config.json").read_text())
    config["rc_average"] = True
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def model_only(model_dir: Path, device: str, precision: str, batch_size: int, windows: int) -> tuple[float, float]:
    """Windows per wall second and per CPU second of the model alone on ready batches (both strands), after one
    warm-up batch."""
    import torch

    from bioattn.models.promoter import PromoterClassifier
    from bioattn.precision import inference_autocast

    dev = torch.device(device)
    model = PromoterClassifier.from_pretrained(model_dir, map_location=dev).eval()
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(3, 7, (batch_size, WINDOW), generator=generator).to(dev) for _ in range(4)]

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    with torch.inference_mode(), inference_autocast(precision, dev):
        model.proba_from_ids(batches[0]).cpu()
        sync()
        start, cpu, done = time.perf_counter(), time.process_time(), 0
        while done < windows:
            model.proba_from_ids(batches[done // batch_size % len(batches)]).cpu()
            done += batch_size
        sync()
        return done / (time.perf_counter() - start), done / (time.process_time() - cpu)


def end_to_end(source: Path, model_dir: Path, fasta: Path, output: Path, device: str, precision: str, stride: int,
               batch_size: int | None, compiled: bool = False, nproc: int = 1,
               threads: int | None = None) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds (user + system, all its threads and processes) of the scan command run from
    ``source`` (a fresh process; under ``torchrun --standalone --nproc_per_node nproc`` when ``nproc > 1``), and the
    bedGraph's data rows. ``threads``: ``OMP_NUM_THREADS`` of each process (default: the caller's)."""
    path = os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)  # the tree first, then the caller's
    env = {**os.environ, "PYTHONPATH": path, "BIOATTN_NO_PROGRESS": "1"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    launcher = [sys.executable, "-m", "bioattn.cli"]
    if nproc > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
                    "-m", "bioattn.cli"]
    command = [*launcher, "predict", "promoter", "--model", str(model_dir), "--input",
               str(fasta), "--output", str(output), "--window", str(WINDOW), "--stride", str(stride), "--device", device,
               "--precision", precision]
    if batch_size is not None:
        command += ["--batch-size", str(batch_size)]
    if compiled:
        command += ["--compile"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=output.parent)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"the scan from {source} failed:\n{done.stderr[-3000:]}")
    with open(output) as handle:
        rows = sum(1 for _ in handle) - 1
    return seconds, cpu, rows


#: Run in a fresh process by :func:`null_model`: the scan pipeline of the tree on the path, a constant as model.
NULL_MODEL_RUN = '''
import json, sys, time
from pathlib import Path
import pyfaidx, torch
from bioattn.precision import inference_autocast
from bioattn.tasks.promoter.scan import scan_genome

fasta, output, device, precision, stride, batch = sys.argv[1:7]
dev = torch.device(device)


class NullModel(torch.nn.Module):
    """The model's interface and output shapes (binary, both strands): fixed logits instead of computing."""

    binary, max_len, rc_average, threshold, class_names = True, 70, True, 0.5, ["0", "1"]

    def __init__(self, rows):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # where the model lives
        self.register_buffer("logits", torch.randn(rows, generator=torch.Generator().manual_seed(0)))

    def forward(self, ids, **_):  # the scan's keywords (check_ids)
        return self.logits[: ids.shape[0]]


batch = int(batch) if batch != "none" else (4096 if dev.type == "cuda" else 512)
model = NullModel(batch).to(dev)
pyfaidx.Fasta(fasta).close()  # the index exists before the clock starts
warm = Path(output).with_name("warm-up.fa")  # first-call costs (lazy imports, tables) before the clock starts
warm.write_text(">w\\n" + "ACGT" * 500 + "\\n")
with inference_autocast(precision, dev):
    scan_genome(model, warm, Path(output), window=70, stride=int(stride), class_index=1, batch_size=batch)
    start, cpu = time.perf_counter(), time.process_time()
    summary = scan_genome(model, Path(fasta), Path(output), window=70, stride=int(stride), class_index=1,
                          batch_size=batch)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"windows": summary.windows, "seconds": time.perf_counter() - start,
                      "cpu": time.process_time() - cpu}))
'''


def null_model(source: Path, fasta: Path, output: Path, device: str, precision: str, stride: int,
               batch_size: int | None) -> tuple[float, float]:
    """Windows per wall second and per CPU second of the scan pipeline of the tree ``source`` with a constant in
    place of the model, in a fresh process, start-up excluded (:data:`NULL_MODEL_RUN`)."""
    path = os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "BIOATTN_NO_PROGRESS": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", NULL_MODEL_RUN, str(fasta), str(output), device, precision,
                           str(stride), str(batch_size or "none")], env=env, capture_output=True, text=True,
                          cwd=output.parent)
    if done.returncode != 0:
        raise SystemExit(f"the null-model scan from {source} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["windows"] / result["seconds"], result["windows"] / max(result["cpu"], 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to scan (default: %(default)s)")
    parser.add_argument("--megabases", type=float, default=6.0,
                        help="size of the synthetic genome (default: %(default)s; the start-up is a small part of a scan this size)")
    parser.add_argument("--stride", type=int, default=35, help="nt between window starts (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="windows per forward pass, model-only and end-to-end (default: the scan's default for the device)")
    parser.add_argument("--precision", nargs="+", choices=("auto", "fp32", "bf16"), default=None,
                        help="precisions to measure (default: auto on a CPU, the scan command's default: bf16 where "
                             "the CPU has bf16 units, else fp32; fp32 and bf16 on a GPU)")
    parser.add_argument("--compile", action="store_true",
                        help="end-to-end with --compile (torch.compile; CUDA graphs on a GPU) (default: off)")
    parser.add_argument("--before", type=Path, default=None, metavar="SRC",
                        help="also run the scan command from this source tree (a folder holding 'bioattn') (default: no)")
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="also time the scan under 'torchrun --standalone --nproc_per_node N' against one process at "
                             "the same threads per process, check both write the same bytes and print the wall-time "
                             "ratio (default: no)")
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP_NUM_THREADS of each process in the --nproc comparison (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="--nproc comparison: interleaved repeats of one process and N processes; medians are "
                             "reported (default: %(default)s)")
    parser.add_argument("--null-model", action="store_true",
                        help="also time the scan pipeline with a constant in place of the model (the host's ceiling), "
                             "to .bw and .bedGraph, start-up excluded (default: off)")
    parser.add_argument("--host-only", action="store_true",
                        help="only the --null-model measurement (no model-only or end-to-end run: for a large genome "
                             "on a CPU, where the real model takes hours) (default: off)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 0.05 Mb, no start-up measurement (default: off)")
    parser.add_argument("--smoke", action="store_true", help="smoke test of the benchmark itself: a 5 kb genome, "
                        "implies --quick (default: off)")
    args = parser.parse_args()
    if args.smoke:
        args.quick, args.megabases = True, 0.005
    if args.quick:
        args.megabases = min(args.megabases, 0.05)
    if args.host_only:
        args.null_model = True
    sys.path.insert(0, str(ROOT))
    import torch

    from bioattn.precision import resolve_inference_precision
    from bioattn.runtime import keep_freed_memory
    from bioattn.tasks.promoter.scan import default_batch_size

    if args.nproc is not None and args.nproc < 2:
        parser.error(f"--nproc must be >= 2, got {args.nproc}")
    if args.threads < 1 or args.repeats < 1:
        parser.error("--threads and --repeats must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA GPU")
    precisions = args.precision or (["fp32", "bf16"] if args.device == "cuda" else ["auto"])
    keep_freed_memory()  # the model-only rate in this process, with the allocator setting the command uses
    batch_size = args.batch_size or default_batch_size(torch.device(args.device))
    where = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {where}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bioattn-bench-scan-") as tmp:
        folder = Path(tmp)
        model_dir = both_strand_model(folder / "model")
        fasta = folder / "genome.fa"
        bases = write_genome(fasta, args.megabases)
        import pyfaidx

        pyfaidx.Fasta(str(fasta)).close()  # its index, built once before any clock starts, as for a user's 2nd scan
        tiny = folder / "tiny.fa"
        tiny.write_text(">chr1\n" + "ACGT" * 250 + "\n")
        lines = []
        if args.host_only:
            for precision in precisions:
                resolved = resolve_inference_precision(precision, torch.device(args.device))
                print(f"  {args.device} {precision}: {bases / 1e6:.2f} Mb, stride {args.stride}, batch {batch_size}")
                host_ceiling(args, fasta, folder, resolved, precision)
            return
        def timed(source: Path, name: str, precision: str, batch: int | None, compiled: bool) -> tuple[float, ...]:
            """The command from ``source`` on the 1 kb FASTA first (its start-up; it also takes one-time costs such
            as bytecode compilation off the clock), then on the genome: wall s, CPU s, rows, start-up wall and CPU s."""
            fixed = (0.0, 0.0) if args.quick else end_to_end(
                source, model_dir, tiny, folder / f"{name}-tiny.bedGraph", args.device, precision, args.stride, batch,
                compiled)[:2]
            seconds, cpu, rows = end_to_end(source, model_dir, fasta, folder / f"{name}.bedGraph", args.device,
                                            precision, args.stride, batch, compiled)
            return seconds, cpu, rows, *fixed

        for precision in precisions:
            seconds, cpu, rows, fixed, fixed_cpu = timed(ROOT, "scan", precision, args.batch_size, args.compile)
            resolved = resolve_inference_precision(precision, torch.device(args.device))
            rate, cpu_rate = model_only(model_dir, args.device, resolved, batch_size, max(rows, 4 * batch_size))
            if resolved != precision:
                precision = f"{precision} ({resolved})"
            e2e, e2e_cpu = rows / seconds, rows / cpu
            steady = rows / max(seconds - fixed, 1e-9)
            print(f"  {args.device} {precision}: {rows} windows ({bases / 1e6:.2f} Mb, both strands, batch {batch_size}): "
                  f"model-only {rate:,.0f} windows/s ({cpu_rate:,.0f} per CPU-s), end-to-end {e2e:,.0f} windows/s "
                  f"({e2e_cpu:,.0f} per CPU-s; {seconds:.1f} s, {cpu:.1f} CPU-s with start-up)", flush=True)
            print(f"  {args.device} {precision}: start-up (the command on a 1 kb FASTA, run first) {fixed:.1f} s, "
                  f"{fixed_cpu:.1f} CPU-s; without it end-to-end {steady:,.0f} windows/s "
                  f"({rows / max(cpu - fixed_cpu, 1e-9):,.0f} per CPU-s), {steady / rate:.2f} of model-only wall, "
                  f"{rows / max(cpu - fixed_cpu, 1e-9) / cpu_rate:.2f} per CPU-s", flush=True)
            if args.before is not None:  # the older tree at this precision and, if that is not it, at fp32
                for old_precision in dict.fromkeys([resolved, "fp32"]):
                    before, before_cpu, before_rows, old_fixed, _ = timed(args.before, "before", old_precision, None,
                                                                          False)
                    old_steady = before_rows / max(before - old_fixed, 1e-9)
                    print(f"  {args.device} {precision}: before ({args.before.name}, {old_precision}): end-to-end "
                          f"{before_rows / before:,.0f} windows/s ({before_rows / before_cpu:,.0f} per CPU-s; "
                          f"{before:.1f} s, {before_cpu:.1f} CPU-s); without its start-up ({old_fixed:.1f} s) "
                          f"{old_steady:,.0f} windows/s; now/before {e2e / (before_rows / before):.2f} wall "
                          f"({steady / old_steady:.2f} without start-up), {e2e_cpu / (before_rows / before_cpu):.2f} CPU",
                          flush=True)
            if args.null_model:
                host_ceiling(args, fasta, folder, resolved, precision, rate, e2e)
            hours = HG38_BASES / args.stride / e2e / 3600
            print(f"  projected hg38 (3.1 Gb, both strands, stride {args.stride}) at {precision}: {hours:.2f} h")
            label = precision + (", compiled" if args.compile else "")
            if args.device == "cpu":  # CPU seconds: what a shared machine's load moves least
                lines.append(f"{e2e:.0f} windows/s, end-to-end/model-only {e2e / rate:.2f} ({label}; per CPU "
                             f"second {e2e_cpu:.0f} windows, {e2e_cpu / cpu_rate:.2f})")
            else:
                lines.append(f"{e2e:.0f} windows/s, end-to-end/model-only {e2e / rate:.2f} ({label})")
        print(f"scan {args.device} " + "; ".join(lines))
        if args.nproc is not None:
            sharded(args, model_dir, fasta, folder, precisions[0])


def writer_alone(scanned: Path, rewritten: Path) -> tuple[int, float, float, bool]:
    """pyBigWig alone on the entries of the bigWig ``scanned``: read back (before the clock), written again to
    ``rewritten`` through the scan's own writer (:func:`~bioattn.tasks.promoter.tracks.write_bigwig`: the same
    header, chunks and ``close``) in this process. Returns the entries, their wall and CPU seconds, and whether the
    bytes equal ``scanned``'s (the same records: the writer's own cost is what a scan to .bw cannot go below)."""
    import pyBigWig

    from bioattn.tasks.promoter.tracks import write_bigwig

    with pyBigWig.open(str(scanned)) as bw:
        header = list(bw.chroms().items())
        tiles = []
        for chrom, _ in header:
            rows = np.array(bw.intervals(chrom) or [], dtype=np.float64).reshape(-1, 3)
            tiles.append((chrom, (rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2])))
    start, cpu = time.perf_counter(), time.process_time()
    write_bigwig(rewritten, header, iter(tiles))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return sum(len(t[0]) for _, t in tiles), wall, cpu, rewritten.read_bytes() == scanned.read_bytes()


def host_ceiling(args: argparse.Namespace, fasta: Path, folder: Path, resolved: str, precision: str,
                 rate: float | None = None, e2e: float | None = None) -> None:
    """The scan pipeline with a constant for the model (this tree and ``--before``), to .bw and .bedGraph; prints
    each rate (and its ratio to the model-only ``rate`` when given), then the ``null-model`` line."""
    trees = [("now", ROOT)] + ([("before", args.before)] if args.before is not None else [])
    found: dict[str, dict[str, tuple[float, float]]] = {}
    for name, tree in trees:
        found[name] = {suffix: null_model(tree, fasta, folder / f"null{suffix}", args.device, resolved, args.stride,
                                          args.batch_size) for suffix in (".bw", ".bedGraph")}
        print(f"  {args.device} {precision}: null-model ({name}, start-up excluded): " + ", ".join(
            f"{suffix} {wall:,.0f} windows/s ({per_cpu:,.0f} per CPU-s)" + (f", {wall / rate:.2f} of model-only"
                                                                               if rate else "")
            for suffix, (wall, per_cpu) in found[name].items()) + f"; load average {os.getloadavg()[0]:.2f}",
            flush=True)
        if name == "now":
            entries, wall, cpu, same = writer_alone(folder / "null.bw", folder / "alone.bw")
            print(f"  pyBigWig alone (the same {entries:,} entries written again by the scan's writer, this process):"
                  f" {entries / wall:,.0f} entries/s ({entries / cpu:,.0f} per CPU-s), same bytes: "
                  f"{'yes' if same else 'NO'}; a scan to .bw cannot go faster", flush=True)
    now = found["now"]
    line = (f"null-model {args.device} {precision}: .bw {now['.bw'][0]:.0f} windows/s, .bedGraph "
            f"{now['.bedGraph'][0]:.0f} windows/s (per CPU second {now['.bw'][1]:.0f}, {now['.bedGraph'][1]:.0f})")
    if "before" in found:
        line += (f"; now/before .bw {now['.bw'][0] / found['before']['.bw'][0]:.2f}, .bedGraph "
                 f"{now['.bedGraph'][0] / found['before']['.bedGraph'][0]:.2f}")
    if rate:
        line += (f"; null-model/model-only {now['.bw'][0] / rate:.2f} (.bw), {now['.bedGraph'][0] / rate:.2f} "
                 f"(.bedGraph), end-to-end/model-only {e2e / rate:.2f}")
    print(line)


def sharded(args: argparse.Namespace, model_dir: Path, fasta: Path, folder: Path, precision: str) -> None:
    """One process against ``torchrun --nproc_per_node N``, interleaved, the same threads per process; prints the
    median wall and CPU seconds, whether the outputs are byte-identical and the ``sharded`` ratio line."""
    one_out, many_out = folder / "one.bedGraph", folder / "sharded.bedGraph"
    runs: dict[str, list[tuple[float, float]]] = {"one": [], "many": []}
    identical = True
    for _ in range(args.repeats):
        for name, output, nproc in (("one", one_out, 1), ("many", many_out, args.nproc)):
            seconds, cpu, _ = end_to_end(ROOT, model_dir, fasta, output, args.device, precision, args.stride,
                                         args.batch_size, args.compile, nproc=nproc, threads=args.threads)
            runs[name].append((seconds, cpu))
        identical = identical and one_out.read_bytes() == many_out.read_bytes()
    (one_wall, one_cpu), (many_wall, many_cpu) = (np.median(np.array(runs[k]), axis=0) for k in ("one", "many"))
    print(f"  {args.device} {precision}, {args.threads} thread(s) per process, median of {args.repeats}: one process "
          f"{one_wall:.1f} s ({one_cpu:.1f} CPU-s), torchrun --nproc_per_node {args.nproc} {many_wall:.1f} s "
          f"({many_cpu:.1f} CPU-s); outputs {'byte-identical' if identical else 'DIFFER'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"sharded {args.nproc} processes / 1 process: wall {many_wall / one_wall:.2f}, CPU {many_cpu / one_cpu:.2f}, "
          f"{'identical' if identical else 'different'} bytes")
    if not identical:
        raise SystemExit("the sharded scan wrote other bytes than one process")


if __name__ == "__main__":
    main()
