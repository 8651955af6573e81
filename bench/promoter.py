"""Benchmark: promoter-classifier inference throughput (sequences per second) on CPU.

Times :meth:`PromoterClassifier.predict_tokens` (eval mode, no grad) on random ACGT sequences for each
batch size, with and without reverse-complement averaging (which doubles the work), the whole
``bioattn predict promoter`` path (FASTA parsing + tokenising + model + CSV writing) on a temporary FASTA, and
a genome scan (``--window``, stride = window / 2, bedGraph out) of a random chromosome of ``--scan-kb`` kb.
Each in fp32 and in bf16 autocast (``--precisions``; ``bioattn predict promoter --precision``). In the same run, in
fp32, the model with its encoder's last layer on every position (the computation before ``first_outputs=1``),
printed as a ratio against the model's own [CLS]-only forward. Reports the median of ``--repeats`` timings. The machine's load matters: the script prints the 1-minute
load average beside the numbers, and ``--threads`` fixes torch's intra-op threads.

    python bench/promoter.py --run RUN_DIR            # a trained model (its own size and max_len)
    python bench/promoter.py                          # an untrained model of the default size
    python bench/promoter.py --quick                  # one small configuration
    python bench/promoter.py --smoke                  # smoke test: 16 sequences, 1 kb scan, fp32, one timing
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import collate_tokens, encode
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.registry import load_pretrained
from bioattn.precision import inference_autocast
from bioattn.report import format_table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="trained run directory (default: untrained default-size model)")
    parser.add_argument("--length", type=int, default=None, help="sequence length (default: the model's max_len, else 70)")
    parser.add_argument("--sequences", type=int, default=2048, help="sequences per timing (default: %(default)s)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256], help="(default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timings per configuration; the median is kept (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--scan-kb", type=int, default=200, help="length of the scanned chromosome in kb (default: %(default)s)")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"],
                        help="inference precisions to time (bioattn predict promoter --precision) (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="256 sequences, batch 64, 1 repeat, a 20 kb scan")
    parser.add_argument("--smoke", action="store_true", help="smoke test: 16 sequences, batch 8, one timing, a 1 kb scan, fp32")
    return parser.parse_args()


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@torch.no_grad()
def full_last_layer(model: PromoterClassifier, tokens: list[np.ndarray], batch_size: int) -> np.ndarray:
    """Probabilities ``(N,)`` with the encoder's last layer run on every position, the head reading [CLS]: the
    computation before ``first_outputs=1`` (single strand; the sequences of one length, so no sorting)."""
    out = []
    for start in range(0, len(tokens), batch_size):
        ids, padding_mask = collate_tokens(tokens[start : start + batch_size])
        hidden, _, _ = model.encode(ids, padding_mask)
        out.append(torch.sigmoid(model.head(hidden[:, 0]).squeeze(-1)))
    return torch.cat(out).numpy()


def main() -> int:
    args = parse_args()
    if args.quick:
        args.sequences, args.batch_sizes, args.repeats, args.scan_kb = 256, [64], 1, 20
    if args.smoke:
        args.sequences, args.batch_sizes, args.repeats, args.scan_kb, args.precisions = 16, [8], 1, 1, ["fp32"]
        args.threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = load_pretrained(args.run, expect=PromoterClassifier) if args.run else PromoterClassifier(max_len=70).eval()
    length = args.length or model.max_len
    rng = np.random.default_rng(0)
    sequences = ["".join(rng.choice(list("ACGT"), size=length)) for _ in range(args.sequences)]
    tokens = [encode(s) for s in sequences]
    model.predict_tokens(tokens[:64], batch_size=64)  # warm-up
    results = []
    for precision in args.precisions:
        for batch_size in args.batch_sizes:
            for rc_average in (False, True):
                count = min(args.sequences, 256) if batch_size == 1 else args.sequences
                with inference_autocast(precision, torch.device("cpu")):
                    seconds = timed(lambda: model.predict_tokens(tokens[:count], batch_size=batch_size, rc_average=rc_average),
                                    args.repeats)
                results.append({"path": "model", "precision": precision, "batch_size": batch_size, "rc_average": rc_average,
                                "sequences_per_s": count / seconds})
    batch_size = max(args.batch_sizes)
    own = next((r for r in results if r["path"] == "model" and r["precision"] == "fp32" and r["batch_size"] == batch_size
                and not r["rc_average"]), None)  # the model's own [CLS]-only forward, timed above
    if own is None:  # fp32 not among --precisions
        seconds = timed(lambda: model.predict_tokens(tokens, batch_size=batch_size, rc_average=False), args.repeats)
        own = {"sequences_per_s": args.sequences / seconds}
    every_position = timed(lambda: full_last_layer(model, tokens, batch_size), args.repeats)
    results.append({"path": "model, last layer on every position (before first_outputs=1)", "precision": "fp32",
                    "batch_size": batch_size, "rc_average": False, "sequences_per_s": args.sequences / every_position})
    speedup = own["sequences_per_s"] / results[-1]["sequences_per_s"]
    with tempfile.TemporaryDirectory() as folder:
        run_dir = args.run
        if run_dir is None:
            run_dir = Path(folder) / "run"
            model.save_pretrained(run_dir)
        fasta = Path(folder) / "in.fa"
        fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(sequences)))
        for precision in args.precisions:
            argv = ["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output",
                    str(Path(folder) / "out.csv"), "--batch-size", str(max(args.batch_sizes)), "--precision", precision]
            seconds = timed(lambda: bioattn_main(argv), args.repeats)
            results.append({"path": "bioattn predict promoter (FASTA in, CSV out)", "precision": precision,
                            "batch_size": max(args.batch_sizes), "rc_average": model.rc_average,
                            "sequences_per_s": args.sequences / seconds})
        chromosome = Path(folder) / "chromosome.fa"
        chromosome.write_text(">chrBench\n" + "".join(rng.choice(list("ACGT"), size=args.scan_kb * 1000)) + "\n")
        stride = max(1, model.max_len // 2)
        windows = (args.scan_kb * 1000 - model.max_len) // stride + 2
        argv = ["predict", "promoter", "--model", str(run_dir), "--input", str(chromosome), "--window",
                "--output", str(Path(folder) / "scan.bedGraph"), "--batch-size", str(max(args.batch_sizes)),
                "--precision", args.precisions[-1]]
        seconds = timed(lambda: bioattn_main(argv), args.repeats)
        results.append({"path": f"genome scan, {args.scan_kb} kb (windows/s)", "precision": args.precisions[-1],
                        "batch_size": max(args.batch_sizes),
                        "rc_average": model.rc_average, "sequences_per_s": windows / seconds})
    info = {
        "model": dict(model.config), "parameters": sum(p.numel() for p in model.parameters()), "length": length,
        "threads": args.threads, "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
        "load_average_1min": os.getloadavg()[0], "results": results,
    }
    print(f"PromoterClassifier {info['parameters']:,} parameters, length {length} nt, {args.threads} threads, "
          f"load average {info['load_average_1min']:.1f}")
    print(format_table(["path", "precision", "batch", "RC avg", "sequences/s"],
                       [[r["path"], r["precision"], r["batch_size"], str(r["rc_average"]), f"{r['sequences_per_s']:.0f}"]
                        for r in results]))
    print(f"[CLS]-only last layer (the model's forward) against the full last layer, fp32, batch {batch_size}: "
          f"{speedup:.2f}x the sequences per second")
    if args.json:
        args.json.write_text(json.dumps(info, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
