"""Benchmark: the attention model against its same-run ResNet on small HU pilots that differ in voxel spacing,
lesion contrast and size, and bright structures that say nothing about the label (a "spine").

For each pilot (:data:`PILOTS`; ``tests/small_data_pilots.py`` volumes with the pilot's spacing) it writes
``--volumes`` training volumes and ``--new`` new ones, then runs ``bioattn train ct`` at ``--size`` with ``--flags``
(the attention model and its ResNet in one run) and, for each ``--variant`` (extra ``train ct`` flags), a second
run of the attention model alone with those flags; ``predict ct`` on the new volumes gives each model's accuracy
(and AUROC). Each run is a subprocess with one torch thread. Prints one JSON line per pilot and a Markdown table
at the end::

    python bench/ct_pilots.py OUT                                   # every pilot, 32³, the defaults
    python bench/ct_pilots.py OUT --flags "--pool trunk+gate"       # the gated readout beside its ResNet
    python bench/ct_pilots.py OUT --pilots 1 3 --variant "--pool cls+max"
    python bench/ct_pilots.py OUT --smoke                           # one tiny pilot, --quick runs, in this process
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.small_data_pilots as pilots  # noqa: E402

#: name -> (seed, spacing (mm), lesion options of ct_volume)
PILOTS = {
    "1": (40, (0.8, 0.8, 2.5), {"contrast": (110.0, 110.0), "radius_voxels": (3.0, 5.0), "spine": 700.0}),
    "2": (41, (1.5, 1.5, 1.5), {"contrast": (80.0, 80.0), "radius_mm": (5.0, 7.0), "spine": 900.0}),
    "3": (42, (0.7, 0.7, 3.0), {"contrast": (150.0, 200.0), "radius_mm": (2.5, 4.0)}),
    "4": (43, (1.0, 1.0, 2.0), {"contrast": (90.0, 90.0), "radius_voxels": (3.0, 4.0), "spine": 700.0, "noise": 25.0}),
    "5": (44, (0.8, 0.8, 2.5), {"contrast": (120.0, 120.0), "radius_mm": (3.0, 5.0), "spine": 1000.0}),
}


def write_pilot(folder: Path, name: str, volumes: int, new: int) -> tuple[Path, Path]:
    seed, spacing, lesion = PILOTS[name]
    pilots.CT_SPACING = spacing  # ct_volume and ct_affine read it when called
    return pilots.write_ct_pilot(folder, volumes=volumes, seed=seed, new=new, **lesion)


#: --smoke runs each command in this process (seconds instead of a fresh interpreter's start each time)
IN_PROCESS = False


def bioattn(*args: str) -> float:
    """Run ``bioattn ARGS`` with one torch thread (a subprocess, or in this process under ``--smoke``); return its
    wall seconds."""
    start = time.perf_counter()
    if IN_PROCESS:
        import contextlib

        import torch

        from bioattn.cli import main as cli_main

        torch.set_num_threads(1)
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            if cli_main(list(args)) != 0:
                raise SystemExit(f"bioattn {' '.join(args)} failed")
        return time.perf_counter() - start
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "bioattn.cli", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def new_volume_scores(model: Path, new: Path, output: Path) -> dict[str, float]:
    bioattn("predict", "ct", "--model", str(model), "--input", str(new), "--output", str(output))
    with open(new) as handle:
        truth = [row["label"] for row in csv.DictReader(handle)]
    with open(output) as handle:
        rows = list(csv.DictReader(handle))
    right = sum(row["predicted_label"] == label for row, label in zip(rows, truth))
    auroc = roc_auc_score([label == "lesion" for label in truth], [float(row["p_lesion"]) for row in rows])
    return {"right": right, "of": len(truth), "auroc": round(float(auroc), 3)}


def run_pilot(out: Path, name: str, args: argparse.Namespace) -> dict:
    folder = out / f"pilot{name}"
    manifest, new = write_pilot(folder / "data", name, args.volumes, args.new)
    common = ["--manifest", str(manifest), "--size", str(args.size), "--overwrite", *(["--quick"] if args.smoke else [])]
    result: dict = {"pilot": name, "seed": PILOTS[name][0], "spacing": PILOTS[name][1], **PILOTS[name][2],
                    "flags": args.flags}
    default = folder / "default"
    result["default_seconds"] = round(bioattn("train", "ct", *common, *shlex.split(args.flags), "--out", str(default)), 1)
    kept = json.loads((default / "metrics.json").read_text())["kept_model"]
    hybrid_dir = default / "hybrid_attention" if (default / "hybrid_attention").is_dir() else default
    result["kept"] = kept["model_type"]
    result["hybrid"] = new_volume_scores(hybrid_dir, new, folder / "hybrid.csv")
    result["resnet"] = new_volume_scores(default / "baseline_resnet", new, folder / "resnet.csv")
    for index, variant in enumerate(args.variant):
        run = folder / f"variant{index}"
        seconds = bioattn("train", "ct", *common, "--baseline", "none", *shlex.split(variant), "--out", str(run))
        result[variant] = {**new_volume_scores(run, new, folder / f"variant{index}.csv"), "seconds": round(seconds, 1)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, nargs="?", default=Path("ct_pilots_out"),
                        help="folder for the pilots and runs (default: ct_pilots_out)")
    parser.add_argument("--pilots", nargs="+", default=list(PILOTS), choices=list(PILOTS))
    parser.add_argument("--volumes", type=int, default=48)
    parser.add_argument("--new", type=int, default=16)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--flags", default="", help="extra train ct flags of the run of both models (default: none)")
    parser.add_argument("--variant", action="append", default=[],
                        help="extra train ct flags of a second run, of the attention model alone (repeatable)")
    parser.add_argument("--smoke", action="store_true", help="one pilot of 8 + 4 volumes, --quick runs at 16³")
    args = parser.parse_args()
    if args.smoke:
        global IN_PROCESS
        IN_PROCESS = True
        args.pilots, args.volumes, args.new, args.size = args.pilots[:1], 8, 4, 16
    results = []
    for name in args.pilots:
        results.append(run_pilot(args.out, name, args))
        print(json.dumps(results[-1]), flush=True)
    print(f"| pilot | ResNet right | hybrid ({args.flags or 'defaults'}) right |"
          + "".join(f" `{v}` right |" for v in args.variant))
    print("|---|---|---|" + "---|" * len(args.variant))
    for r in results:
        cells = [f"{r['resnet']['right']}/{r['resnet']['of']}", f"{r['hybrid']['right']}/{r['hybrid']['of']}",
                 *(f"{r[v]['right']}/{r[v]['of']}" for v in args.variant)]
        print(f"| {r['pilot']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
