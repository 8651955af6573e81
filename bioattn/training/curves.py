"""``training_curve.png``: training loss, learning rate and evaluation metrics against optimizer step."""
from __future__ import annotations

import math
import os
from pathlib import Path

from bioattn.errors import UserInputError
from bioattn.io import save_figure
from bioattn.training.metrics_log import LOG_NAME, read_log

CURVE_NAME = "training_curve.png"


def _series(rows: list[dict[str, str]], phase: str, name: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for row in rows:
        if row.get("phase") == phase and row.get(name) not in (None, ""):
            steps.append(int(row["step"]))
            values.append(float(row[name]))
    return steps, values


def plot_curves(run_dir: str | os.PathLike) -> Path:
    """Plot ``run_dir/train_log.csv`` into ``run_dir/training_curve.png``; its path."""
    from matplotlib.figure import Figure
    run_dir = Path(run_dir)
    rows = read_log(run_dir / LOG_NAME)
    if not rows:
        raise UserInputError(f"{run_dir / LOG_NAME}: no training log to plot")
    metric_names = [k for k in rows[0] if k not in ("step", "epoch", "phase")]
    eval_names = [k for k in metric_names if _series(rows, "eval", k)[0] and k != "loss"]
    train_extras = [k for k in ("lr", "grad_norm") if _series(rows, "train", k)[0]]
    panels = ["loss", *train_extras, *eval_names]
    columns = min(3, len(panels))
    nrows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(4.5 * columns, 3.2 * nrows), layout="tight")
    axes = fig.subplots(nrows, columns, squeeze=False)
    for ax, name in zip(axes.flat, panels):
        for phase, style in (("train", "-"), ("eval", "o-")):
            steps, values = _series(rows, phase, name)
            if steps:
                ax.plot(steps, values, style, markersize=3, linewidth=1, label=phase)
        ax.set_title(name)
        ax.set_xlabel("optimizer step")
        if name == "loss":
            ax.legend()
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    out = run_dir / CURVE_NAME
    save_figure(fig, out, dpi=120)
    return out
