"""Figures that training, tasks and explanations share (matplotlib's object-oriented API, no pyplot)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from bioattn.io import save_figure


def plot_metric_per_epoch(curves: Mapping[str, Sequence[tuple[int, float]]], path: str | os.PathLike, *, ylabel: str,
                          title: str | None = None, dpi: int = 120) -> Path:
    """One line per model of a metric against the epoch: ``curves = {label: [(epoch, value)]}``."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5.5, 3.5), layout="tight")
    ax = fig.subplots()
    for label, points in curves.items():
        if points:
            epochs, values = zip(*points)
            ax.plot(epochs, values, "o-", markersize=3, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if any(curves.values()):
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    return save_figure(fig, path, dpi=dpi, bbox_inches="tight")
