"""Tiny activity models fitted in closed form on a planted-motif table, saved as the run directories
``bioattn train activity`` writes (one run; a cross-validation ensemble of fold folders), in well under a second.

The table: random sequences, every other one carrying a TATA box at a random place; the value is 2 for a carrier,
0 otherwise, plus noise. The model: a tiny untrained ActivityRegressor blended (as training blends it) with a ridge
on the scores of two known motifs (the TATA box and a GC box, :data:`MOTIFS`), so what it reads is known.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.activity.branches import MotifSet, blend_with_ridge
from bioattn.tasks.driver import member_dir_name, save_ensemble

TATA = "TATAAAAG"
#: The known motifs of the models' motif branch: id → (name, consensus).
MOTIFS = {"PLANTED.1": ("TATA box", TATA), "PLANTED.2": ("GC box", "GGGGCGGGG")}
LENGTH = 40


def tata_table(n: int, seed: int = 0, length: int = LENGTH) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(sequences, values (n,), starts (n,))``: every odd row carries :data:`TATA` at ``starts[row]`` (-1: none)."""
    rng = np.random.default_rng(seed)
    sequences, values, starts = [], [], []
    for row in range(n):
        letters = list(rng.choice(list("ACGT"), length))
        start = int(rng.integers(2, length - len(TATA) - 2)) if row % 2 else -1
        if start >= 0:
            letters[start : start + len(TATA)] = TATA
        sequences.append("".join(letters))
        starts.append(start)
        values.append(2.0 * (start >= 0) + 0.1 * rng.normal())
    return sequences, np.asarray(values), np.asarray(starts)


def motif_set() -> MotifSet:
    """Log-odds matrices (bits against a uniform background) of the consensus letters of :data:`MOTIFS`."""
    matrices = [np.where(np.array([[b == c for c in consensus] for b in "ACGT"]), np.log2(0.91 / 0.25),
                         np.log2(0.03 / 0.25)) for _, consensus in MOTIFS.values()]
    config = {"ids": list(MOTIFS), "names": [name for name, _ in MOTIFS.values()],
              "widths": [m.shape[1] for m in matrices], "bins": 1, "source": "planted test matrices"}
    return MotifSet(config, matrices)


def fitted_model(sequences: list[str], values: np.ndarray, *, deep_weight: float | None = 0.0,
                 seed: int = 0) -> ActivityRegressor:
    """A tiny ActivityRegressor (untrained deep part, seed ``seed``) blended with a ridge on :func:`motif_set` fitted
    on ``sequences`` / ``values`` at ``deep_weight`` (0: the ridge alone); ``None``: the deep model alone, no branch."""
    torch.manual_seed(seed)
    model = ActivityRegressor(input_length=LENGTH, target_names=["activity"], target_mean=[float(values.mean())],
                              target_sd=[float(values.std())], channels=8, kernel=5, stages=1, embed_dim=8,
                              num_heads=2, num_layers=1, dropout=0.0).eval()
    if deep_weight is None:
        return model
    return blend_with_ridge(model, model.tokenize(sequences), values[:, None], blend="motifs", deep_weight=deep_weight,
                            motif_set=motif_set())


def save_single(folder: Path, sequences: list[str], values: np.ndarray, **options) -> Path:
    """:func:`fitted_model` saved as a one-run directory."""
    fitted_model(sequences, values, **options).save_pretrained(folder)
    return folder


def save_cv(folder: Path, sequences: list[str], values: np.ndarray,
            deep_weights: tuple[float | None, ...] = (0.2, None)) -> Path:
    """A cross-validation ensemble directory (``fold1``, ``fold2``, ... and the ensemble ``config.json``): fold ``k``
    fitted on the rows outside its fold, at ``deep_weights[k]`` (``None``: the deep model kept alone)."""
    folds = len(deep_weights)
    names = []
    for k, weight in enumerate(deep_weights):
        keep = (np.arange(len(sequences)) // 2) % folds != k  # carriers and non-carriers in every fold
        names.append(member_dir_name("fold", k + 1))
        save_single(folder / names[-1], [s for s, chosen in zip(sequences, keep) if chosen], values[keep],
                    deep_weight=weight, seed=k)
    save_ensemble(folder, "ActivityRegressor", names)
    return folder
