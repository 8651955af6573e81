"""Same seed, same bytes: a promoter and a CT cross-validation, run by this tree (and by an older one), write the
same out-of-fold file and the same fold weights.

A refactor of the training protocols must not change what a run computes. This script writes a small labelled
CSV of DNA sequences (a planted motif in the positives) and a small manifest of NIfTI volumes (a bright sphere in
half of them), runs ``bioattn train promoter --cv 3`` and ``bioattn train ct --cv 3`` on them with a fixed seed,
once per source tree, each in a fresh process with ``OMP_NUM_THREADS=1``, and compares the SHA-256 of
``out_of_fold.csv`` and of every ``model.safetensors`` under the run directory (the fold models, and the CT's
baselines). ``metrics.json`` is not compared: its keys may change between versions, its numbers come from these
files.

Usage::

    python bench/protocol_identity.py                     # this tree, twice: is a run deterministic here?
    python bench/protocol_identity.py --before OLD_TREE   # this tree against an export of an older one
    python bench/protocol_identity.py --smoke             # the same on the smallest inputs (a smoke test)

``OLD_TREE`` is a folder holding an older ``bioattn/`` package (for instance ``git archive <commit> bioattn |
tar -x -C OLD_TREE``). Prints one line per file and a verdict; exits 1 when a file differs.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MOTIF = "TATAAAAG"


def write_promoter_csv(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` random 80-nt sequences, half of them positives with :data:`MOTIF` planted near position 30."""
    rng = np.random.default_rng(seed)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sequence", "label"])
        for i in range(rows):
            sequence = list(rng.choice(list("ACGT"), 80))
            if i % 2:
                start = 26 + int(rng.integers(0, 8))
                sequence[start:start + len(MOTIF)] = MOTIF
            writer.writerow(["".join(sequence), i % 2])
    return path


def write_ct_manifest(folder: Path, volumes: int, edge: int = 16, seed: int = 0) -> Path:
    """``volumes`` NIfTI volumes of ``edge``³ voxels (noise, a bright sphere in the ``lesion`` half) and their
    ``labels.csv``."""
    import nibabel as nib

    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(*[np.arange(edge)] * 3, indexing="ij"))
    rows = []
    for i in range(volumes):
        image = rng.normal(0.0, 0.2, (edge,) * 3).astype(np.float32)
        label = "lesion" if i % 2 else "normal"
        if label == "lesion":
            centre = rng.integers(4, edge - 4, 3)[:, None, None, None]
            image[((grid - centre) ** 2).sum(0) <= 9] += 1.5
        path = folder / f"scan{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(image, np.eye(4)), path)
        rows.append([path.name, label])
    manifest = folder / "labels.csv"
    with manifest.open("w", newline="") as handle:
        csv.writer(handle).writerows([["image", "label"], *rows])
    return manifest


def run_tree(tree: Path, argv: list[str]) -> None:
    """``python -m bioattn.cli ARGV`` with ``tree``'s package first on the path, one thread."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "BIOATTN_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-m", "bioattn.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{tree}: bioattn {' '.join(argv[:2])} failed:\n{done.stderr[-3000:]}")


def digests(run_dir: Path) -> dict[str, str]:
    """SHA-256 of ``out_of_fold.csv`` and every ``model.safetensors`` under ``run_dir``, by relative path."""
    files = [run_dir / "out_of_fold.csv",
             *sorted(p for p in run_dir.rglob("model.safetensors") if "checkpoint" not in p.parts)]
    return {str(path.relative_to(run_dir)): hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, metavar="OLD_TREE",
                        help="a folder holding an older bioattn/ package (default: this tree again)")
    parser.add_argument("--smoke", action="store_true", help="the smallest inputs (a smoke test; checks the same)")
    args = parser.parse_args()
    if args.before is not None and not (args.before / "bioattn" / "__init__.py").is_file():
        raise SystemExit(f"error: {args.before}: no bioattn/ package in it")
    sequences, volumes = (40, 12) if args.smoke else (300, 24)
    trees = [("now", ROOT)] if args.smoke else [("now", ROOT), ("before" if args.before else "again", args.before or ROOT)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        promoter_csv = write_promoter_csv(work / "promoter.csv", sequences)
        (work / "ct").mkdir()
        manifest = write_ct_manifest(work / "ct", volumes)
        found: dict[str, dict[str, str]] = {}
        for name, tree in trees:
            promoter_run, ct_run = work / name / "promoter", work / name / "ct"
            run_tree(tree, ["train", "promoter", "--train", str(promoter_csv), "--cv", "3", "--quick",
                            "--out", str(promoter_run)])
            found[name] = {f"promoter/{k}": v for k, v in digests(promoter_run).items()}
            if not args.smoke:  # the smoke test runs the promoter path only (a CT run costs ~15 s more)
                run_tree(tree, ["train", "ct", "--manifest", str(manifest), "--cv", "3", "--quick", "--size", "16",
                                "16", "16", "--out", str(ct_run)])
                found[name].update({f"ct/{k}": v for k, v in digests(ct_run).items()})
    if len(found) == 1:
        for path, digest in found["now"].items():
            print(f"{path:45s} {digest[:12]}")
        return
    (first, a), (second, b) = found.items()
    same = 0
    for path in sorted(set(a) | set(b)):
        verdict = "identical" if a.get(path) == b.get(path) else "DIFFERS"
        same += verdict == "identical"
        print(f"{path:45s} {verdict} ({(a.get(path) or 'missing')[:12]} vs {(b.get(path) or 'missing')[:12]})")
    total = len(set(a) | set(b))
    print(f"{same} of {total} files byte-identical ({first} vs {second})")
    if same != total:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
