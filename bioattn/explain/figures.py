"""Figures for attention explanations; every function writes one PNG atomically (matplotlib OO API, no pyplot)."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure

from bioattn.errors import UserInputError
from bioattn.io import save_figure

ArrayLike = np.ndarray | torch.Tensor | Sequence[float]


def _as_numpy(values: ArrayLike, name: str, ndim: int) -> np.ndarray:
    array = values.detach().float().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values, dtype=float)
    if array.ndim != ndim:
        raise UserInputError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    return array


def _save(fig: Figure, path: str | os.PathLike, dpi: int) -> Path:
    return save_figure(fig, path, dpi=dpi, bbox_inches="tight")


def plot_head_maps(weights_layer: ArrayLike, path: str | os.PathLike, *, title: str | None = None,
                   reference: ArrayLike | None = None, reference_title: str = "reference",
                   head_scores: Sequence[float] | None = None, score_name: str = "score", dpi: int = 90) -> Path:
    """Draw each head's ``(L, Lk)`` map of ``weights_layer (H, L, Lk)``, after an optional ``reference (L, Lk)``."""
    maps = _as_numpy(weights_layer, "weights_layer", 3)
    panels: list[tuple[str, np.ndarray, str, float | None]] = []  # title, image, colour map, colour-scale top
    if reference is not None:
        ref = _as_numpy(reference, "reference", 2)
        if ref.shape != maps.shape[1:]:
            raise UserInputError(f"reference has shape {ref.shape}, the head maps are {maps.shape[1:]}")
        panels.append((reference_title, ref, "Greys", None))
    if head_scores is not None and len(head_scores) != maps.shape[0]:
        raise UserInputError(f"head_scores has {len(head_scores)} values for {maps.shape[0]} heads")
    for head, head_map in enumerate(maps):
        label = f"head {head}" if head_scores is None else f"head {head}: {score_name} {head_scores[head]:.2f}"
        panels.append((label, head_map, "viridis", float(np.nanpercentile(head_map, 99)) or None))
    ncols = min(len(panels), 5)
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(2.6 * ncols, 2.6 * nrows), layout="tight")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (label, image, cmap, top) in zip(axes.flat, panels):
        ax.imshow(image, cmap=cmap, interpolation="nearest", vmax=top)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("key", fontsize=7)
        ax.set_ylabel("query", fontsize=7)
        ax.tick_params(labelsize=6)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path, dpi)


def plot_head_diversity(similarity: ArrayLike, path: str | os.PathLike, *, title: str | None = None, dpi: int = 90) -> Path:
    """Draw an ``(H, H)`` head-similarity matrix (from :func:`bioattn.explain.head_diversity`)."""
    matrix = _as_numpy(similarity, "similarity", 2)
    heads = matrix.shape[0]
    fig = Figure(figsize=(1.0 + 0.45 * max(heads, 4), 0.6 + 0.45 * max(heads, 4)), layout="tight")
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="magma", vmin=0.0, vmax=1.0)
    if heads <= 12:
        for i in range(heads):
            for j in range(heads):
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if matrix[i, j] < 0.6 else "black")
    ax.set(xticks=range(heads), yticks=range(heads), xlabel="head", ylabel="head")
    ax.set_title(title or "head similarity (cosine)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, path, dpi)


def plot_rollout_track(influence: ArrayLike, path: str | os.PathLike, *, positions: ArrayLike | None = None,
                       spread: ArrayLike | None = None, sequence: str | None = None,
                       spans: Mapping[str, tuple[float, float]] | None = None,
                       others: Mapping[str, ArrayLike] | None = None, label: str = "influence",
                       spread_label: str = "± spread", title: str | None = None, xlabel: str = "position",
                       ylabel: str = "influence", dpi: int = 90) -> Path:
    """Draw an ``influence (L,)`` track, optionally with ``spread``, ``sequence`` letters, ``spans`` and ``others``."""
    values = _as_numpy(influence, "influence", 1)
    xs = np.arange(values.size, dtype=float) if positions is None else _as_numpy(positions, "positions", 1)
    if xs.shape != values.shape:
        raise UserInputError(f"positions has shape {xs.shape}, influence has {values.shape}")
    if sequence is not None and len(sequence) != values.size:
        raise UserInputError(f"sequence has {len(sequence)} letters, influence has {values.size} values")
    band = None if spread is None else _as_numpy(spread, "spread", 1)
    if band is not None and band.shape != values.shape:
        raise UserInputError(f"spread has shape {band.shape}, influence has {values.shape}")
    extra = {name: _as_numpy(other, f"others[{name!r}]", 1) for name, other in (others or {}).items()}
    for name, other_values in extra.items():
        if other_values.shape != values.shape:
            raise UserInputError(f"others[{name!r}] has shape {other_values.shape}, influence has {values.shape}")
    fig = Figure(figsize=(min(14.0, 3.0 + 0.12 * values.size), 3.0), layout="tight")
    ax = fig.subplots()
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (span_label, (start, end)) in enumerate((spans or {}).items()):
        ax.axvspan(start - 0.5, end + 0.5, color=colours[(index + 1) % len(colours)], alpha=0.2, label=span_label)
    ax.plot(xs, values, color=colours[0], linewidth=1.2, label=label)
    for index, (other_label, other_values) in enumerate(extra.items()):
        ax.plot(xs, other_values, color=colours[(index + 2 + len(spans or {})) % len(colours)], linewidth=1.0,
                linestyle="--", label=other_label)
    if band is not None:
        ax.fill_between(xs, values - band, values + band, color=colours[0], alpha=0.25, linewidth=0, label=spread_label)
    if sequence is not None and values.size <= 120:
        ax.set_xticks(xs)
        ax.set_xticklabels(list(sequence), fontsize=6, family="monospace")
        ax.set_xlabel("sequence")
        top = ax.secondary_xaxis("top")
        top.set_xticks([x for x in xs if x % 10 == 0])
        top.tick_params(labelsize=7)
        top.set_xlabel(xlabel, fontsize=8)
    else:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(xs.min() - 0.5, xs.max() + 0.5)
    if spans or extra or band is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path, dpi)


def plot_orthogonal_slices(volume: ArrayLike, overlay: ArrayLike, path: str | os.PathLike, *,
                           center: Sequence[int] | None = None, title: str | None = None, alpha: float = 0.45,
                           dpi: int = 90) -> Path:
    """Draw three orthogonal slices of ``volume (X, Y, Z)`` through ``center`` (default: the overlay's maximum)."""
    image = _as_numpy(volume, "volume", 3)
    heat = _as_numpy(overlay, "overlay", 3)
    if image.shape != heat.shape:
        raise UserInputError(f"overlay has shape {heat.shape}, volume has {image.shape}")
    if center is None:
        center = np.unravel_index(int(np.argmax(heat)), heat.shape)
    if len(center) != 3 or any(not 0 <= c < n for c, n in zip(center, image.shape)):
        raise UserInputError(f"center {tuple(center)} is outside the volume {image.shape}")
    heat_range = (float(heat.min()), float(heat.max()))
    fig = Figure(figsize=(9.0, 3.3), layout="constrained")
    axes = fig.subplots(1, 3)
    for axis, ax in enumerate(axes):
        index = int(center[axis])
        ax.imshow(np.take(image, index, axis=axis).T, cmap="gray", origin="lower", interpolation="nearest")
        shown = ax.imshow(np.take(heat, index, axis=axis).T, cmap="inferno", origin="lower", alpha=alpha,
                          vmin=heat_range[0], vmax=heat_range[1], interpolation="bilinear")
        ax.set_title(f"axis {axis}, slice {index}", fontsize=9)
        ax.set(xticks=[], yticks=[])
    fig.colorbar(shown, ax=axes, fraction=0.02, label="influence")
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path, dpi)


def plot_head_scores(scores: ArrayLike, path: str | os.PathLike, *, title: str | None = None, label: str = "score",
                     vmin: float | None = 0.0, vmax: float | None = 1.0, dpi: int = 90) -> Path:
    """Draw one number per (layer, head): ``scores (layers, H)``."""
    matrix = _as_numpy(scores, "scores", 2)
    layers, heads = matrix.shape
    fig = Figure(figsize=(1.6 + 0.55 * max(heads, 3), 1.0 + 0.45 * max(layers, 3)), layout="tight")
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
    if layers * heads <= 256:
        low = float(np.nanmin(matrix)) if vmin is None else vmin
        high = float(np.nanmax(matrix)) if vmax is None else vmax
        middle = (low + high) / 2
        for i in range(layers):
            for j in range(heads):
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if matrix[i, j] < middle else "black")
    ax.set(xticks=range(heads), yticks=range(layers), xlabel="head", ylabel="layer")
    ax.set_title(title or label, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, label=label)
    return _save(fig, path, dpi)
