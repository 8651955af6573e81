"""Figures of measured faithfulness and of per-head sharpness; every function writes one PNG atomically."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
from matplotlib.figure import Figure

from bioattn.explain.figures import _save
from torch import Tensor


def plot_faithfulness_curves(results: Mapping[str, dict], path: str | os.PathLike, *, title: str = "",
                             unit: str = "inputs", dpi: int = 90) -> Path:
    """Deletion and insertion curves of each method (``results``: method → faithfulness summary) with their areas."""
    fig = Figure(figsize=(10, 3.8))
    deletion_axis, insertion_axis = fig.subplots(1, 2, sharey=True)
    for method, result in results.items():
        fractions = np.asarray(result["fractions"])
        style = {"linestyle": ":", "color": "grey"} if method == "random" else {}
        deletion_axis.plot(fractions, result["deletion_curve"], label=f"{method} (AUC {result['deletion_auc']:.3f})", **style)
        insertion_axis.plot(fractions, result["insertion_curve"], label=f"{method} (AUC {result['insertion_auc']:.3f})", **style)
    for axis, name, better in ((deletion_axis, "deletion", "lower"), (insertion_axis, "insertion", "higher")):
        axis.set_xlabel(f"fraction of {unit} {'removed' if name == 'deletion' else 'revealed'} (top-ranked first)")
        axis.set_title(f"{name}: {better} area = more faithful")
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    deletion_axis.set_ylabel("p(predicted class) / unperturbed p")
    if title:
        fig.suptitle(title)
    return _save(fig, path, dpi)


def plot_head_sharpness(sharpness: Mapping[str, Tensor], path: str | os.PathLike, *, title: str = "",
                        dpi: int = 90) -> Path:
    """Normalised entropy and effective temperature per head (:func:`~bioattn.explain.sharpness.head_sharpness`)."""
    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2)
    for axis, name, label in ((axes[0], "normalised_entropy", "entropy / log(keys)  (1 = uniform)"),
                              (axes[1], "temperature", "effective temperature 1 / sd(log p)")):
        values = np.asarray(sharpness[name], dtype=float)
        layers, heads = values.shape
        width = 0.8 / heads
        for head in range(heads):
            axis.bar(np.arange(layers) + (head - (heads - 1) / 2) * width, values[:, head], width, label=f"head {head}")
        axis.set_xticks(np.arange(layers), [f"layer {layer}" for layer in range(layers)])
        axis.set_ylabel(label)
        axis.grid(axis="y", alpha=0.3)
    axes[0].set_ylim(0, 1.05)
    axes[1].legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title)
    return _save(fig, path, dpi)
