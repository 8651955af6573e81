"""Benchmark: start-up of the ``bioattn`` command, wall seconds from launch to exit (median of ``--repeats``).

Measured in the same run: ``python -c pass`` (the interpreter alone), ``bioattn --version``, ``bioattn --help``,
``bioattn predict promoter --help`` (imports that command's modules, torch included) and, for comparison,
``import torch`` alone. The last line is ``startup --version X s, --help Y s``.

    python bench/startup.py
    python bench/startup.py --repeats 9
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "python -c pass": ["-c", "pass"],
    "bioattn --version": ["-m", "bioattn.cli", "--version"],
    "bioattn --help": ["-m", "bioattn.cli", "--help"],
    "bioattn predict promoter --help": ["-m", "bioattn.cli", "predict", "promoter", "--help"],
    "python -c 'import torch'": ["-c", "import torch"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per case (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="smoke test: one run of --version and --help only")
    args = parser.parse_args()
    cases = CASES
    if args.smoke:
        args.repeats = 1
        cases = {name: CASES[name] for name in ("bioattn --version", "bioattn --help")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    medians = {}
    for name, argv in cases.items():
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, *argv], env=env, cwd=ROOT, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        medians[name] = statistics.median(times)
        print(f"  {name}: {medians[name]:.2f} s (median of {args.repeats}; min {min(times):.2f} s)", flush=True)
    print(f"startup --version {medians['bioattn --version']:.2f} s, --help {medians['bioattn --help']:.2f} s")


if __name__ == "__main__":
    main()
