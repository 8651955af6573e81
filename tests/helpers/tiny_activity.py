"""Tiny activity models written in the layouts 'bioattn train activity' saves (one run directory; an ensemble of
``seed<S>/`` or ``fold<K>/`` members with the ensemble ``config.json`` the shared driver writes), built in memory in
a fraction of a second instead of trained: what variant scoring and explanation tests need is the files, not a fit."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.driver import member_dir_name, save_ensemble

#: A small architecture (one conv stage, one attention layer) reading 40 nt.
TINY = {"input_length": 40, "channels": 8, "kernel": 5, "stages": 1, "embed_dim": 8, "num_heads": 2, "num_layers": 1,
        "dropout": 0.0}


def tiny_activity_model(seed: int, *, targets: Sequence[str] = ("activity",), strand: str = "forward",
                        kmer_branch: int = 2, **config: object) -> ActivityRegressor:
    """A randomly initialised (``seed``) :class:`ActivityRegressor` of :data:`TINY` size, its k-mer branch given
    random weights too, in eval mode; outputs in units of sd 2 around 1."""
    torch.manual_seed(seed)
    model = ActivityRegressor(**{**TINY, **config}, target_names=list(targets), target_mean=[1.0] * len(targets),
                              target_sd=[2.0] * len(targets), strand=strand, kmer_branch=kmer_branch)
    if kmer_branch:
        with torch.no_grad():
            model.kmer_linear.weight.normal_(0.0, 0.3)
    return model.eval()


def write_activity_run(folder: Path, kind: str | None = None, members: int = 3, **model: object) -> Path:
    """``folder`` as a run of 'bioattn train activity': ``kind`` None: one model; ``"seed"`` (``--seeds``) or
    ``"fold"`` (``--cv``): ``members`` models in ``seed<S>/`` / ``fold<K>/`` and the ensemble config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind is None:
        tiny_activity_model(0, **model).save_pretrained(folder)
        return folder
    first = 0 if kind == "seed" else 1
    names = [member_dir_name(kind, first + k) for k in range(members)]
    for k, name in enumerate(names):
        tiny_activity_model(k, **model).save_pretrained(folder / name)
    save_ensemble(folder, "ActivityRegressor", names)
    return folder
