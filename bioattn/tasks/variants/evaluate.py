"""CAGI5 scoring: Pearson and Spearman per element, on all and on confident variants, and their means per element
type (the FASTA headers' ``type=``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bioattn.tasks.variants.vcf import _text_opener

CONFIDENT = 0.1
#: Fewer variants than this in an element (or its confident subset): no correlation (NaN).
MIN_ROWS = 5


def _correlations(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    from scipy.stats import pearsonr, spearmanr
    keep = np.isfinite(predicted) & np.isfinite(measured)
    if keep.sum() < MIN_ROWS or np.ptp(predicted[keep]) == 0 or np.ptp(measured[keep]) == 0:
        return float("nan"), float("nan")
    return float(pearsonr(predicted[keep], measured[keep])[0]), float(spearmanr(predicted[keep], measured[keep])[0])


def per_element(elements: np.ndarray, predicted: np.ndarray, measured: np.ndarray, conf: np.ndarray,
                confident: float = CONFIDENT) -> dict[str, dict[str, float]]:
    """``{element: {pearson, spearman, pearson_conf, spearman_conf, n, n_conf}}`` in first-seen order."""
    out = {}
    for name in dict.fromkeys(elements):
        rows = elements == name
        sure = rows & (conf >= confident)
        p, s = _correlations(predicted[rows], measured[rows])
        pc, sc = _correlations(predicted[sure], measured[sure])
        out[str(name)] = {"pearson": p, "spearman": s, "pearson_conf": pc, "spearman_conf": sc,
                          "n": int(rows.sum()), "n_conf": int(sure.sum())}
    return out


def summarise(per: dict[str, dict[str, float]], types: dict[str, str]) -> dict[str, dict[str, float]]:
    """Mean of each metric over the elements of each type (``promoter``, ``enhancer``; ``all``: every element)."""
    groups: dict[str, list[str]] = {"all": list(per)}
    for name in per:
        groups.setdefault(types.get(name, "other"), []).append(name)
    out = {}
    for group, names in groups.items():
        out[group] = {metric: float(np.nanmean([per[n][metric] for n in names])) if names else float("nan")
                      for metric in ("pearson", "spearman", "pearson_conf", "spearman_conf")}
        out[group]["elements"] = len(names)
    return out


def header_fields(reference: Any) -> dict[str, dict[str, str]]:
    """``key=value`` words of each FASTA header (e.g. ``type=promoter gene_strand=-``), by record name."""
    path = Path(reference.filename) if hasattr(reference, "filename") else Path(reference)
    out: dict[str, dict[str, str]] = {}
    with _text_opener(path)(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                words = line[1:].split()
                out[words[0]] = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return out
