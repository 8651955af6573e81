"""The contact-map figure of an MSA run (``contact_map.png``); matplotlib's object-oriented API, no pyplot."""
from __future__ import annotations

import os

import numpy as np
from matplotlib.figure import Figure

from bioattn.io import save_figure
from bioattn.metrics import CONTACT_CUTOFF

__all__ = ["plot_contact_map"]


def plot_contact_map(
    path: str | os.PathLike, scores: np.ndarray, distances: np.ndarray | None, *, title: str = "", top_fraction: int = 1
) -> Figure:
    """PNG of the top-L/``top_fraction`` predicted pairs (upper triangle) over the native contacts (grey); returns
    the figure. Top-L/5 pairs large, correct blue, wrong red, without native coordinates hollow."""
    length = scores.shape[0]
    i, j = np.triu_indices(length, k=6)
    order = np.argsort(-np.nan_to_num(scores[i, j], nan=-np.inf), kind="stable")[: max(length // top_fraction, 1)]
    first = np.arange(len(order)) < max(length // 5, 1)  # the top-L/5 pairs among those drawn
    fig = Figure(figsize=(5.5, 5.5))
    ax = fig.subplots()
    tiers = (("top-L/5", first, dict(s=22, edgecolors="black", linewidths=0.5)),
             (f"top L/5–L/{top_fraction}" if top_fraction > 1 else "top L/5–L", ~first, dict(s=7, alpha=0.6)))
    if distances is not None:
        native = np.argwhere(np.triu(np.nan_to_num(distances, nan=np.inf) < CONTACT_CUTOFF, k=6))
        ax.scatter(native[:, 1], native[:, 0], s=6, c="0.75", marker="s", label="native (Cβ < 8 Å)")
        ax.scatter(native[:, 0], native[:, 1], s=6, c="0.75", marker="s")
        predicted = distances[i[order], j[order]]
        known = np.isfinite(predicted)
        hit = known & (np.nan_to_num(predicted, nan=np.inf) < CONTACT_CUTOFF)
        for tier, chosen, style in tiers:
            for kind, mask, colour in (("correct", hit, "tab:blue"), ("wrong", known & ~hit, "tab:red")):
                if (mask & chosen).any():
                    ax.scatter(j[order][mask & chosen], i[order][mask & chosen], c=colour,
                               label=f"{tier}, {kind}", **style)
            if (~known & chosen).any():
                ax.scatter(j[order][~known & chosen], i[order][~known & chosen], facecolors="none",
                           label=f"{tier}, no native coordinates", **{**style, "edgecolors": "0.4"})
    else:
        for tier, chosen, style in tiers:
            if chosen.any():
                ax.scatter(j[order][chosen], i[order][chosen], c="tab:blue", label=f"{tier} predicted", **style)
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(length - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("residue j")
    ax.set_ylabel("residue i")
    ax.set_title(title or f"top-L/{top_fraction} predicted contacts (|i-j| ≥ 6) over native")
    ax.legend(loc="lower left", fontsize=7, markerscale=1.5)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return fig
