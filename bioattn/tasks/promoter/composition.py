"""How far a DNA input lies from a promoter model's training sequences (``composition.json``)."""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from bioattn.errors import UserInputError
from bioattn.io import write_json

COMPOSITION_NAME = "composition.json"
FORMAT = 1
#: k of the k-mer distribution compared.
K = 2
KMERS = tuple("".join(letters) for letters in itertools.product("ACGT", repeat=K))
#: Percentiles of the training sequences that bound what counts as usual.
LOW, HIGH = 0.5, 99.5
#: Margins beyond those percentiles before a warning: GC fraction, N fraction, k-mer total-variation distance.
GC_MARGIN, N_MARGIN, KMER_MARGIN = 0.05, 0.05, 0.05
_INDEX = {kmer: i for i, kmer in enumerate(KMERS)}


def sequence_composition(sequence: str) -> tuple[float, float, np.ndarray]:
    """``(GC fraction of the A/C/G/T letters, other-letter fraction, k-mer frequencies (4**K,))``."""
    upper = sequence.upper()
    acgt = sum(upper.count(letter) for letter in "ACGT")
    gc = (upper.count("G") + upper.count("C")) / acgt if acgt else 0.5
    other = 1.0 - acgt / len(upper) if upper else 0.0
    counts = np.zeros(len(KMERS))
    for start in range(len(upper) - K + 1):
        index = _INDEX.get(upper[start : start + K])
        if index is not None:
            counts[index] += 1
    total = counts.sum()
    return gc, other, counts / total if total else np.full(len(KMERS), 1.0 / len(KMERS))


def _distance(frequencies: np.ndarray, reference: np.ndarray) -> float:
    """Total-variation distance of two k-mer distributions, in [0, 1]."""
    return float(0.5 * np.abs(frequencies - reference).sum())


def composition_profile(sequences: Iterable[str]) -> dict[str, Any]:
    """The summary of training sequences that :func:`composition_warnings` compares inputs with (JSON-ready)."""
    rows = [sequence_composition(sequence) for sequence in sequences]
    if not rows:
        raise UserInputError("no training sequences to summarise")
    gc, other, frequencies = zip(*rows)
    table = np.stack(frequencies)
    mean = table.mean(axis=0)
    distances = [_distance(row, mean) for row in table]

    def bounds(values: list[float]) -> list[float]:
        return [round(float(v), 6) for v in np.percentile(values, [LOW, HIGH])]

    return {"format": FORMAT, "sequences": len(gc), "k": K, "percentiles": [LOW, HIGH],
            "gc": bounds(gc), "gc_mean": round(float(np.mean(gc)), 6), "other_letters": bounds(other),
            "kmers": list(KMERS), "kmer_mean": [round(float(v), 6) for v in mean], "kmer_distance": bounds(distances)}


def composition_warnings(profile: Mapping[str, Any] | None, sequence: str) -> list[str]:
    """How ``sequence`` differs from the training sequences of ``profile``; empty when it does not or no profile."""
    if not profile:
        return []
    gc, other, frequencies = sequence_composition(sequence)
    problems = []
    low, high = profile["gc"]
    if other < 1.0 and not low - GC_MARGIN <= gc <= high + GC_MARGIN:
        problems.append(f"GC content {gc:.2f}, the training sequences had {low:.2f} to {high:.2f}")
    most = profile["other_letters"][1]
    if other > most + N_MARGIN:
        problems.append(f"{other:.0%} N or other non-ACGT letters, the training sequences had at most {most:.0%}")
    distance = _distance(frequencies, np.asarray(profile["kmer_mean"]))
    farthest = profile["kmer_distance"][1]
    if other < 1.0 and distance > farthest + KMER_MARGIN:
        problems.append(f"dinucleotide frequencies {distance:.2f} (total variation) from the training mean, the "
                        f"training sequences were within {farthest:.2f}")
    return problems


def save_composition(run_dir: str | os.PathLike, sequences: Iterable[str]) -> Path:
    """Write :func:`composition_profile` of ``sequences`` as ``run_dir/composition.json``; returns the path."""
    path = Path(run_dir) / COMPOSITION_NAME
    write_json(path, composition_profile(sequences))
    return path


def load_composition(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The ``composition.json`` of ``run_dir``, or ``None`` when the run has none (it is then not checked)."""
    path = Path(run_dir) / COMPOSITION_NAME
    if not path.is_file():
        return None
    try:
        profile = json.loads(path.read_text())
        for key in ("gc", "other_letters", "kmer_mean", "kmer_distance"):
            profile[key]  # noqa: B018  (a missing key is a malformed file)
        if len(profile["kmer_mean"]) != len(KMERS):
            raise ValueError(f"{len(profile['kmer_mean'])} k-mer frequencies, expected {len(KMERS)}")
        return profile
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UserInputError(f"{path}: not a valid {COMPOSITION_NAME} ({exc})") from exc
