"""The training-volume profile of ``preprocessing.json`` and the checks of an input against it."""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from bioattn.data.ct import PREPROCESSING_NAME, SavedPreprocessing
from bioattn.models.ct_classifier import predicted_index

__all__ = [
    "PREPROCESSING_NAME", "SavedPreprocessing", "volume_statistics", "profile_volumes", "distribution_warnings",
    "predicted_index",
]

QUANTILE_SAMPLE = 2**20  # voxels used for the percentiles of one volume
RANGE_MARGIN = 0.05  # of the training intensity span, for the range and mean checks
GEOMETRY_FACTOR = 2.0  # voxel size or field of view more than this factor outside the training range

FITS = ("resize", "crop-pad")


def volume_statistics(image: torch.Tensor) -> dict[str, Any]:
    """Intensity statistics of one model input ``(C, X, Y, Z)`` and its spatial shape."""
    flat = image.detach().reshape(-1).double()
    sample = flat[:: max(1, math.ceil(len(flat) / QUANTILE_SAMPLE))]
    if len(sample) == len(flat) and not torch.isnan(flat).any():
        # one sort gives torch.quantile's percentiles and the count of distinct values
        ordered = torch.sort(flat).values
        ranks = torch.tensor([0.01, 0.99], dtype=torch.float64) * (len(ordered) - 1)
        below = ranks.long()
        p01, p99 = ordered[below].lerp(ordered[ranks.ceil().long()], ranks - below).tolist()
        distinct = 1 + int((ordered[1:] != ordered[:-1]).sum()) if len(ordered) else 0
    else:
        p01, p99 = torch.quantile(sample, torch.tensor([0.01, 0.99], dtype=torch.float64)).tolist()
        distinct = int(torch.unique(flat).numel())
    return {"min": float(flat.min()), "max": float(flat.max()), "mean": float(flat.mean()), "sd": float(flat.std()),
            "p01": p01, "p99": p99, "distinct": distinct, "shape": list(image.shape[1:])}


def profile_volumes(statistics: Sequence[Mapping[str, Any]],
                    geometries: Sequence[Mapping[str, Sequence[float]]] | None = None) -> dict[str, Any]:
    """JSON-ready summary of the training volumes' :func:`volume_statistics` and world geometries."""
    means = np.array([s["mean"] for s in statistics])
    shapes = {tuple(s["shape"]) for s in statistics}
    distinct = [s["distinct"] for s in statistics]
    profile: dict[str, Any] = {
        "volumes": len(statistics),
        "model_input_shape": list(shapes.pop()) if len(shapes) == 1 else None,
        "intensity_min": min(s["min"] for s in statistics),
        "intensity_max": max(s["max"] for s in statistics),
        "volume_mean_min": float(means.min()),
        "volume_mean_max": float(means.max()),
        "volume_mean_sd": float(means.std()),
        "mean_intensity": float(means.mean()),
        "mean_sd": float(np.mean([s["sd"] for s in statistics])),
        "max_distinct_values": max(distinct),
        "binary": max(distinct) <= 2,
    }
    if geometries:
        for key in ("spacing", "extent", "shape"):
            values = np.array([g[key] for g in geometries], dtype=np.float64)
            as_number = int if key == "shape" else lambda v: round(float(v), 4)
            profile[f"{key}_min"] = [as_number(v) for v in values.min(axis=0)]
            profile[f"{key}_max"] = [as_number(v) for v in values.max(axis=0)]
    return profile


def _numbers(values: Iterable[float]) -> str:
    return " x ".join(f"{v:.4g}" for v in values)


def distribution_warnings(profile: Mapping[str, Any], statistics: Mapping[str, Any],
                          geometry: Mapping[str, Sequence[float]] | None = None) -> list[str]:
    """Ways in which one input (statistics after preprocessing, geometry before) lies far from the training volumes."""
    if not profile:
        return []
    problems = []
    low, high = profile["intensity_min"], profile["intensity_max"]
    span = high - low if high > low else max(abs(high), 1.0)
    if profile["binary"] and statistics["distinct"] > 2:
        problems.append(f"the model was trained on binary masks, this input has {statistics['distinct']} distinct "
                        "values after preprocessing")
    elif profile["binary"] and not all(min(abs(v - low), abs(v - high)) <= 1e-6 * span
                                       for v in (statistics["min"], statistics["max"])):
        problems.append(f"the model was trained on masks of the values {low:.4g} and {high:.4g}, this input holds "
                        f"{statistics['min']:.4g} and {statistics['max']:.4g} after preprocessing")
    if statistics["p01"] < low - RANGE_MARGIN * span or statistics["p99"] > high + RANGE_MARGIN * span:
        problems.append(f"intensities {statistics['p01']:.4g} to {statistics['p99']:.4g} (1st-99th percentile) after "
                        f"preprocessing, the training volumes spanned {low:.4g} to {high:.4g}")
    margin = max(3 * profile["volume_mean_sd"], RANGE_MARGIN * span)
    if not profile["volume_mean_min"] - margin <= statistics["mean"] <= profile["volume_mean_max"] + margin:
        problems.append(f"mean intensity {statistics['mean']:.4g} after preprocessing, the training volumes' means "
                        f"were {profile['volume_mean_min']:.4g} to {profile['volume_mean_max']:.4g}")
    trained_shape = profile.get("model_input_shape")
    if trained_shape is not None and list(statistics["shape"]) != list(trained_shape):
        problems.append(f"model input {_numbers(statistics['shape'])} voxels, the training volumes were "
                        f"{_numbers(trained_shape)}")
    if geometry is not None and "spacing_min" in profile:
        for key, what in (("spacing", "voxel size"), ("extent", "field of view")):
            value, least, most = (np.asarray(v, dtype=np.float64) for v in
                                  (geometry[key], profile[f"{key}_min"], profile[f"{key}_max"]))
            if np.any(value < least / GEOMETRY_FACTOR) or np.any(value > most * GEOMETRY_FACTOR):
                problems.append(f"{what} {_numbers(value)} mm (R x A x S), the training files had "
                                f"{_numbers(least)} to {_numbers(most)} mm")
    return problems
