"""A variant-effect head (``bioattn train variants``): a sparse linear model over features of a DNA activity model
and of a measured release of variant effects, computed by :mod:`bioattn.tasks.variants.head`. Its run directory
holds ``config.json``, ``model.safetensors``, ``release.tsv`` and, when stored with the head, ``activity/``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.errors import UserInputError
from bioattn.models.base import PretrainedModel
from bioattn.models.registry import load_pretrained, resolve_model_dir

RELEASE_NAME = "release.tsv"
ACTIVITY_FOLDER = "activity"


class VariantEffectHead(PretrainedModel):
    """``effect = intercept + Σ coef_i · (feature_i - mean_i) / scale_i``.

    Args:
        activity_model, activity_copy: the activity model's name; load it from ``activity/`` of the run directory.
        offsets, strands, reversed_contigs: window placement (:mod:`bioattn.tasks.variants.score`).
        bandwidth, radius, block: the nearby-effect features (Gaussian bandwidth, radius and own block, in nt).
        release_data: the measured release under the data root, read when there is no ``release.tsv``.
        cell_types, matched_outputs: each element's cell type and matched output (None: none).
        ism_radius: the in-silico mutagenesis radius of the ``ism_*`` features (stored when not the default 4).
    """

    def __init__(self, *, feature_names: Sequence[str], activity_model: str = "", activity_copy: bool = True,
                 offsets: Sequence[int] | None = None, strands: str = "auto",
                 reversed_contigs: Sequence[str] = (), bandwidth: float = 6.0, radius: int = 24, block: int = 16,
                 path_name: str = "head", release_data: str | None = None,
                 cell_types: Mapping[str, str] | None = None,
                 matched_outputs: Mapping[str, str | None] | None = None, ism_radius: int = 4) -> None:
        super().__init__()
        self.config = {"feature_names": list(feature_names), "activity_model": activity_model,
                       "activity_copy": bool(activity_copy),
                       "offsets": None if offsets is None else [int(o) for o in offsets], "strands": strands,
                       "reversed_contigs": list(reversed_contigs), "bandwidth": float(bandwidth), "radius": int(radius),
                       "block": int(block), "path_name": path_name, "release_data": release_data}
        if cell_types is not None or matched_outputs is not None:
            self.config["cell_types"] = {str(k): str(v) for k, v in (cell_types or {}).items()}
            self.config["matched_outputs"] = {str(k): None if v is None else str(v)
                                              for k, v in (matched_outputs or {}).items()}
        if ism_radius != 4:  # a head of the default radius keeps its config as it was
            self.config["ism_radius"] = int(ism_radius)
        self.ism_radius = int(ism_radius)
        self.cell_types: dict[str, str] = dict(self.config.get("cell_types", {}))
        self.feature_names, self.offsets, self.strands = list(feature_names), self.config["offsets"], strands
        self.reversed_contigs = list(reversed_contigs)
        n = len(self.feature_names)
        self.register_buffer("mean", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("scale", torch.ones(n, dtype=torch.float64))
        self.register_buffer("coef", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("intercept", torch.zeros(1, dtype=torch.float64))
        self.activity_model: Any = None
        self.release: Any = None  # pandas.DataFrame: chrom pos ref alt effect conf

    def set_linear(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float) -> None:
        for name, value in (("mean", mean), ("scale", scale), ("coef", coef)):
            getattr(self, name).copy_(torch.as_tensor(np.asarray(value, dtype=np.float64)))
        self.intercept.fill_(float(intercept))

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        """Predicted effects ``(N,)`` of a feature matrix ``(N, F)`` in :attr:`feature_names` order."""
        features = np.asarray(features, dtype=np.float64)
        z = (features - self.mean.numpy()) / self.scale.numpy()
        return z @ self.coef.numpy() + float(self.intercept)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return ((features.double() - self.mean) / self.scale) @ self.coef + self.intercept

    def save_pretrained(self, run_dir: str | os.PathLike) -> None:
        """config.json, model.safetensors and release.tsv (the caller saves the activity model)."""
        from bioattn.io import write_table
        super().save_pretrained(run_dir)
        if self.release is not None:
            columns = ["chrom", "pos", "ref", "alt", "effect", "conf"]
            write_table(Path(run_dir) / RELEASE_NAME, columns, self.release[columns].itertuples(index=False, name=None))

    @classmethod
    def from_pretrained(cls, run_dir: str | os.PathLike, map_location: str | torch.device = "cpu") -> "VariantEffectHead":
        import pandas as pd
        head = super().from_pretrained(run_dir, map_location="cpu")
        folder = resolve_model_dir(run_dir)
        local = folder / ACTIVITY_FOLDER
        source = local if head.config["activity_copy"] and local.is_dir() else head.config["activity_model"]
        head.activity_model = load_pretrained(source, map_location=str(map_location))
        release = folder / RELEASE_NAME
        if not release.is_file() and head.config.get("release_data"):
            from bioattn.data.root import resolve_data_root
            release = resolve_data_root().joinpath(*head.config["release_data"].split("/"))
        if not release.is_file():
            where = f" or {release}" if release.name != RELEASE_NAME else ""
            raise UserInputError(f"{folder}: the nearby-effect features need the measured release: no {RELEASE_NAME} "
                                 f"there{where} (set BIOATTN_DATA_ROOT to the data root holding it)")
        table = pd.read_csv(release, sep="\t", dtype={"chrom": str, "element": str})
        head.release = table.rename(columns={"element": "chrom", "position": "pos", "effect_size": "effect",
                                             "confidence": "conf"})
        return head
