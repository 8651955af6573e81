"""Benchmark: variants/s of variant scoring (``bioattn predict variants``' library call) against the model alone.

A synthetic reference (random A/C/G/T, ``--megabases`` in 3 contigs) and ``--variants`` random SNVs are scored with
the shipped ``gue-prom-core-all`` (70 nt, one strand: its setting) and ``lentimpra-wtc11`` (200 nt, its run's
strand handling), three placements per variant (the default offsets). Measured in the same process and run:

- ``end-to-end``: :func:`bioattn.tasks.variants.score.allele_scores` on an open reference, the library call of the
  command (window building, tokenising, the device feed, the model, unpacking), after a warm-up call on 50
  variants (start-up, imports and model loading excluded);
- ``model-only``: the same forward passes (the same batch shapes and number of windows) on ready random token
  batches already on the device; ``windows/variant``: forward-pass rows per variant (2 alleles x placements x
  strands x the model's own strand passes);
- ``host share``: ``end-to-end variants/s x windows/variant / model-only windows/s`` (1: the host costs nothing);
- ``host only``: the same pipeline with the model replaced by a constant (what the host alone sustains);
- ``scan``: the model-only measure of ``bench/scan.py``, repeated here (gue-prom-core-all averaging both strands,
  its batch size, fp32), as windows (each two forward passes) per CPU second; the target of the variant
  pipeline is ``scan windows/CPU-s x 2 / windows/variant`` variants per CPU second;
- ``paired ratio`` (``--repeats R``, default 3): the end-to-end variant measure and the scan's model-only measure
  alternated R times in the same process, the ratio of each pair (variants per CPU-s over the target) and their
  median: on a shared machine the rates of separate measures move by more than the ratio differs from 1;
- ``string path`` (``--string-path N``, default 500 variants): the former implementation's way of scoring (window
  strings through ``predict``), for comparison.

Rates are per wall second and, on a CPU, per CPU second (user + system of every thread of this process: what the
load of a shared machine moves least). ``--threads`` (default 1) sets torch's threads. ``--device cuda`` also
prints the projected time of one million variants at the end-to-end rate.

    python bench/variants.py                      # CPU, 20,000 variants, one thread
    python bench/variants.py --device cuda --variants 200000
    python bench/variants.py --smoke              # a few seconds, checks that it runs
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = ("gue-prom-core-all", "lentimpra-wtc11")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_reference(path: Path, megabases: float, seed: int) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    total = int(megabases * 1e6)
    sizes = [int(total * share) for share in (0.5, 0.3)]
    sizes.append(total - sum(sizes))
    contigs = {f"chr{i + 1}": np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size)].tobytes().decode()
               for i, size in enumerate(sizes)}
    with open(path, "w") as handle:
        for name, text in contigs.items():
            handle.write(f">{name}\n" + "\n".join(text[i : i + 60] for i in range(0, len(text), 60)) + "\n")
    return contigs


def random_snvs(contigs: dict[str, str], count: int, seed: int) -> list:
    from bioattn.tasks.variants.records import Variant

    rng = np.random.default_rng(seed + 1)
    names = list(contigs)
    lengths = np.array([len(contigs[n]) for n in names], dtype=np.float64)
    chosen = rng.choice(len(names), count, p=lengths / lengths.sum())
    out = []
    for i, c in enumerate(chosen):
        pos = int(rng.integers(1, len(contigs[names[c]]) + 1))
        ref = contigs[names[c]][pos - 1]
        alt = "ACGT".replace(ref, "")[int(rng.integers(0, 3))]
        out.append(Variant(names[c], pos, ref, alt, i, 0, f"bench:{i}"))
    return out


def timed(function) -> tuple[float, float, object]:
    start, cpu = time.perf_counter(), cpu_seconds()
    result = function()
    return time.perf_counter() - start, cpu_seconds() - cpu, result


def model_only(scorer, rows: int, per_batch: int, length: int, device) -> tuple[float, float, int]:
    """Wall and CPU seconds of about ``rows`` windows per allele through ``scorer.score`` on ready random batches
    of ``per_batch`` rows per allele, and the rows per allele scored."""
    import torch

    generator = torch.Generator().manual_seed(0)
    ref = torch.randint(3, 7, (per_batch, length), generator=generator).to(device)
    alt = torch.randint(3, 7, (per_batch, length), generator=generator).to(device)

    def run() -> int:
        with torch.inference_mode():
            done = 0
            while done < rows:
                tuple(r.cpu() for r in scorer.score(ref, alt))
                done += per_batch
        return done

    run_once = scorer.score(ref[:8], alt[:8])  # warm-up
    del run_once
    wall, cpu, done = timed(run)
    return wall, cpu, done


def host_only(scorer, dna, fasta, variants, both: bool) -> tuple[float, float]:
    """Wall and CPU seconds of the pipeline with the model replaced by a constant (windows, tokens, feed, unpacking)."""
    import torch

    from bioattn.tasks.variants import windows
    from bioattn.tasks.variants.score import default_offsets

    class Null(type(scorer)):
        def score(self, ref, alt):
            width = len(dna.target_names)
            return (torch.zeros(ref.shape[0], width, dtype=torch.float64, device=ref.device),
                    torch.zeros(alt.shape[0], width, dtype=torch.float64, device=alt.device))

    null = Null.__new__(Null)
    null.__dict__.update(scorer.__dict__)
    length = int(dna.input_length)
    n, p, s = len(variants), len(default_offsets(length)), 2 if both else 1
    out = {"ref": np.zeros((n, p, s, len(dna.target_names))), "alt": np.zeros((n, p, s, len(dna.target_names))),
           "weights": np.zeros((n, p)), "where": np.zeros((n, p), dtype=np.int64)}
    wall, cpu, _ = timed(lambda: windows.score_tokens(null, fasta, variants, default_offsets(length), length, both, None,
                                                      out, lambda k: None))
    return wall, cpu


def scan_model_only(device, windows: int) -> tuple[float, float]:
    """bench/scan.py's model-only measure, repeated here: windows/s and windows per CPU second of
    gue-prom-core-all averaging both strands (two forward passes per window) on ready random 70-nt batches at the
    scan's batch size (4096 on a GPU, 512 on a CPU), fp32, after one warm-up batch."""
    import torch

    from bioattn.models import load_pretrained

    model = load_pretrained("gue-prom-core-all", map_location=str(device)).eval()
    batch = 4096 if device.type == "cuda" else 512
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(3, 7, (batch, 70), generator=generator).to(device) for _ in range(4)]

    def run() -> int:
        done = 0
        while done < windows:
            model.proba_from_ids(batches[done // batch % len(batches)], rc_average=True).cpu()
            done += batch
        return done

    with torch.inference_mode():
        model.proba_from_ids(batches[0], rc_average=True).cpu()
        wall, cpu, done = timed(run)
    return done / wall, done / cpu


def paired_ratios(model, fasta, variants, device, per_variant: int, repeats: int, scan_windows: int) -> list[float]:
    """``repeats`` ratios of end-to-end variants per CPU-s to the target (the scan's model-only windows per CPU-s x 2
    / ``per_variant``), each from one variant measure followed by one scan measure."""
    from bioattn.tasks.variants.score import allele_scores

    ratios = []
    for _ in range(repeats):
        _, cpu, _ = timed(lambda: allele_scores(model, fasta, variants, progress=False))
        _, scan_cpu = scan_model_only(device, scan_windows)
        ratios.append(len(variants) / cpu / (scan_cpu * 2 / per_variant))
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=20000, help="random SNVs scored (default: %(default)s)")
    parser.add_argument("--megabases", type=float, default=3.0, help="synthetic reference size (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="shipped models (default: both)")
    parser.add_argument("--string-path", type=int, default=500,
                        help="variants scored by the string path for comparison, 0: skip (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternated variant / scan measures for the paired ratio, 0: skip (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--smoke", "--quick", action="store_true", help="a few seconds: tiny sizes, checks it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.variants, args.megabases, args.string_path, args.repeats = 30, 0.02, 10, min(args.repeats, 2)
    import pyfaidx
    import torch

    from bioattn.models import load_pretrained
    from bioattn.tasks.variants import windows
    from bioattn.tasks.variants.score import allele_scores, as_dna_model, default_offsets, resolve_strands

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"device {args.device}, {args.threads} torch thread(s), {args.variants} SNVs on {args.megabases} Mb")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ref.fa"
        contigs = write_reference(path, args.megabases, args.seed)
        variants = random_snvs(contigs, args.variants, args.seed)
        fasta = pyfaidx.Fasta(str(path), as_raw=True)
        for name in args.models:
            model = load_pretrained(name, map_location=str(device)).eval()
            dna = as_dna_model(model)
            p = len(default_offsets(int(dna.input_length)))
            s = 2 if resolve_strands(dna, "auto") else 1
            own = 2 if getattr(model, "strand", "forward") == "both" else 1
            per_variant = 2 * p * s * own
            allele_scores(model, fasta, variants[:50], progress=False)  # warm-up
            wall, cpu, _ = timed(lambda: allele_scores(model, fasta, variants, progress=False))
            n = len(variants)
            scorer = windows.token_model(dna, embed=False)
            length = int(dna.input_length)
            wall_m, cpu_m, done = model_only(scorer, len(variants) * p * s, min(n, max(1, windows.rows_per_allele(device) // (p * s))) * p * s,
                                       length, device)
            n = len(variants)
            rate_m, rate_m_cpu = done * 2 * own / wall_m, done * 2 * own / cpu_m
            print(f"{name}: end-to-end {n / wall:.0f} variants/s, {n / cpu:.0f} per CPU-s; "
                  f"model-only {rate_m:.0f} windows/s, {rate_m_cpu:.0f} per CPU-s; windows/variant {per_variant}; "
                  f"host share: wall {n / wall * per_variant / rate_m:.2f}, CPU {n / cpu * per_variant / rate_m_cpu:.2f}")
            wall_h, cpu_h = host_only(scorer, dna, fasta, variants, s == 2)
            print(f"{name}: host only (model replaced by a constant) {n / wall_h:.0f} variants/s, "
                  f"{n / cpu_h:.0f} per CPU-s, i.e. {n * per_variant / cpu_h:.0f} windows per CPU-s")
            if args.device == "cuda":
                print(f"{name}: one million variants in {1e6 / (n / wall) / 60:.1f} min (end-to-end rate)")
            if args.string_path:
                part = variants[: args.string_path]
                out = {"ref": np.zeros((len(part), p, s, len(dna.target_names))),
                       "alt": np.zeros((len(part), p, s, len(dna.target_names))),
                       "weights": np.zeros((len(part), p)), "where": np.zeros((len(part), p), dtype=np.int64)}
                offsets = default_offsets(length)
                wall_s, cpu_s, _ = timed(lambda: windows.score_strings(dna, fasta, part, offsets, length, s == 2, None,
                                                                       False, 256, out, lambda k: None))
                print(f"{name}: string path {len(part) / wall_s:.0f} variants/s, {len(part) / cpu_s:.0f} per CPU-s "
                      f"({len(part)} variants)")
            if name == "gue-prom-core-all":
                scan_wall, scan_cpu = scan_model_only(device, 512 if args.smoke else max(2048, n * 2))
                target = scan_cpu * 2 / per_variant
                print(f"scan model-only (both strands, fp32): {scan_wall:.0f} windows/s, {scan_cpu:.0f} per CPU-s; "
                      f"target {target:.0f} variants per CPU-s, measured {n / cpu:.0f} "
                      f"(ratio {n / cpu / target:.2f})")
                if args.repeats:
                    ratios = paired_ratios(model, fasta, variants, device, per_variant, args.repeats,
                                           512 if args.smoke else max(2048, n * 2))
                    print(f"paired ratio (variants per CPU-s / target, {args.repeats} alternated pairs): median "
                          f"{float(np.median(ratios)):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
