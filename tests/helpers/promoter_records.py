"""Synthetic labelled promoter records: each class draws most of its letters from its own pair of nucleotides, so a
tiny model learns them in a few dozen steps; CSV reading and writing, and a tiny deterministic ``bioattn train
promoter`` run. Shared by the promoter and ensemble tests and the session fixtures of conftest.py."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from bioattn.cli import main as bioattn_main

# Each class draws most letters from its own pair of nucleotides: learnable in a few dozen steps.
ALPHABETS = {"neg": "AT", "pos": "GC", "mid": "AC", "0": "AT", "1": "GC"}
TINY = ["--quick", "--epochs", "2", "--seed", "0", "--deterministic"]  # runs compared bit for bit, on a GPU too


def make_records(classes: tuple[str, ...], count: int, seed: int, lengths: tuple[int, int] = (24, 48)) -> list[tuple[str, str, str]]:
    """``(id, SEQUENCE, label)`` with random lengths; 75 % of letters from the label's alphabet."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        label = classes[i % len(classes)]
        length = int(rng.integers(*lengths))
        own = rng.choice(list(ALPHABETS[label]), size=length)
        sequence = np.where(rng.random(length) < 0.75, own, rng.choice(list("ACGT"), size=length))
        records.append((f"r{i}", "".join(sequence), label))
    return records


def write_csv(path: Path, records, *, columns=("id", "sequence", "label")) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([dict(zip(("id", "sequence", "label"), r))[c] for c in columns] for r in records)
    return path


def read_rows(path: Path, delimiter: str = ",") -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter=delimiter))


def train(tmp: Path, *flags: str) -> Path:
    out = tmp / "run"
    assert bioattn_main(["train", "promoter", "--out", str(out), *TINY, *flags]) == 0
    return out
