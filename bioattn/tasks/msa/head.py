"""The contact head of the MSA task: a logistic regression on named pair features, saved as ``contact_head.json``
(``features``, ``weight``, ``bias``, ``fit_on`` the families it was fitted on, optional ``settings``)."""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.io import write_json
from bioattn.metrics import precision_at
from bioattn.models.msa_contact import fit_contact_head, logistic_contact_probabilities
from bioattn.models.registry import PRETRAINED_ROOT

#: Coevolution maps fed to the contact head per ``--coevolution`` choice.
COEVOLUTION_FEATURES: dict[str, tuple[str, ...]] = {
    "none": (), "gaussian": ("gaussian_dca_apc", "mi_apc"), "potts": ("potts_apc",),
}
COEVOLUTION_MAPS = ("potts_apc", "gaussian_dca_apc", "mi_apc")
#: The contact map of factored attention (:mod:`bioattn.models.factored_attention`), a pair feature of its own.
FACTORED_ATTENTION_MAP = "factored_attention_apc"
#: Folder of the contact heads shipped with bioattn, beside the shipped models (package data).
SHIPPED_HEADS_DIR = PRETRAINED_ROOT / "contact-heads"
#: The MSA Transformer's pair feature (the user's weights): the log-odds of its contact regression.
ESM_MSA_MAP = "esm_msa_logit"
#: The head shipped with bioattn (Potts map only; see its ``fit_on`` and ``settings``).
DEFAULT_HEAD_FILE = SHIPPED_HEADS_DIR / "contact_head.json"
HEAD_FILE_NAME = "contact_head.json"
#: The head shipped for each ``--contact-method`` (``combined``: chosen by :func:`select_head`).
SHIPPED_HEADS = {
    "attention": DEFAULT_HEAD_FILE.with_name("contact_head_attention.json"),
    "potts": DEFAULT_HEAD_FILE,
    "combined": DEFAULT_HEAD_FILE.with_name("contact_head_combined.json"),
}

_ATTENTION_FEATURE = re.compile(r"layer(\d+)_head_rank(\d+)")
_KEYS = {"features", "weight", "bias", "fit_on", "settings"}


def attention_feature_names(layers: int, heads: int) -> list[str]:
    """``layer{l}_head_rank{k}`` for every layer and head rank: the model's attention features, in order."""
    return [f"layer{layer}_head_rank{rank}" for layer in range(layers) for rank in range(heads)]


def feature_names(layers: int, heads: int, extra: Sequence[str]) -> list[str]:
    """Names of a model's pair features: :func:`attention_feature_names`, then the coevolution maps ``extra``."""
    return attention_feature_names(layers, heads) + list(extra)


@dataclass(frozen=True)
class ContactHead:
    """A fitted contact head: ``features (F,)`` names, ``weight (F,)``, ``bias``, ``fit_on`` families, ``settings``."""

    features: tuple[str, ...]
    weight: tuple[float, ...]
    bias: float
    fit_on: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, source: str | os.PathLike = "contact head") -> None:
        """Raise :class:`UserInputError` naming ``source`` when a field is malformed or a feature unknown."""
        if not self.features or any(not isinstance(name, str) for name in self.features):
            raise UserInputError(f"{source}: 'features' must be a non-empty list of names")
        if len(set(self.features)) != len(self.features):
            raise UserInputError(f"{source}: 'features' lists a name twice")
        known = (*COEVOLUTION_MAPS, FACTORED_ATTENTION_MAP, ESM_MSA_MAP)
        unknown = [name for name in self.features if name not in known and not _ATTENTION_FEATURE.fullmatch(name)]
        if unknown:
            raise UserInputError(f"{source}: unknown feature {unknown[0]!r}; known: layer<l>_head_rank<k>, {', '.join(known)}")
        if len(self.weight) != len(self.features):
            raise UserInputError(f"{source}: {len(self.weight)} weights for {len(self.features)} features")
        numbers = [*self.weight, self.bias]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in numbers):
            raise UserInputError(f"{source}: 'weight' and 'bias' must be finite numbers")
        if any(not isinstance(name, str) for name in self.fit_on):
            raise UserInputError(f"{source}: 'fit_on' must be a list of family names")
        if not isinstance(self.settings, Mapping):
            raise UserInputError(f"{source}: 'settings' must be a mapping")
        if self.coevolution is None:
            raise UserInputError(f"{source}: no --coevolution computes the maps {', '.join(self.coevolution_features)} together")
        shape = self.attention_shape()
        if shape and set(self.attention_features) != set(attention_feature_names(*shape)):
            raise UserInputError(f"{source}: the attention features must be every layer<l>_head_rank<k> of a "
                                 f"{shape[0]}-layer, {shape[1]}-head model")

    def attention_shape(self) -> tuple[int, int] | None:
        """``(layers, heads)`` of the smallest model whose attention features include the head's; None if it reads none."""
        indices = [tuple(int(v) for v in m.groups()) for m in map(_ATTENTION_FEATURE.fullmatch, self.features) if m]
        if not indices:
            return None
        return max(layer for layer, _ in indices) + 1, max(rank for _, rank in indices) + 1

    @property
    def attention_features(self) -> tuple[str, ...]:
        """The attention features the head reads (all of a model's, or none)."""
        return tuple(name for name in self.features if _ATTENTION_FEATURE.fullmatch(name))

    @property
    def reads_factored_attention(self) -> bool:
        """Whether the head reads the factored-attention map (then a factored-attention model is fitted)."""
        return FACTORED_ATTENTION_MAP in self.features

    @property
    def reads_esm_msa(self) -> bool:
        """Whether the head reads the MSA Transformer's map (then the user's weights must be given)."""
        return ESM_MSA_MAP in self.features

    @property
    def coevolution_features(self) -> tuple[str, ...]:
        """The coevolution maps the head reads."""
        return tuple(name for name in self.features if name in COEVOLUTION_MAPS)

    def flags(self) -> str:
        """The ``bioattn train msa`` flags of a run that computes this head's features."""
        shape = self.attention_shape()
        parts = [f"--layers {shape[0]} --heads {shape[1]}"] if shape else []
        parts += ["--weights ESM_MSA_WEIGHTS"] if self.reads_esm_msa else []
        return " ".join(parts + [f"--coevolution {self.coevolution}"])

    @property
    def coevolution(self) -> str | None:
        """The first ``--coevolution`` choice whose maps include the head's, or None."""
        needed = set(self.coevolution_features)
        return next((choice for choice, names in COEVOLUTION_FEATURES.items() if needed <= set(names)), None)

    def require(self, available: Sequence[str], source: str | os.PathLike, what: str) -> None:
        """Raise :class:`UserInputError` unless ``available`` (the features of ``what``) holds the head's features."""
        missing = [name for name in self.features if name not in available]
        other_model = bool(self.attention_features) and set(self.attention_features) != {
            name for name in available if _ATTENTION_FEATURE.fullmatch(name)}
        if missing or other_model:
            raise UserInputError(
                f"{source}: fitted on other features than {what} (the head reads {len(self.features)}: "
                f"{describe_features(self.features)}; {what}: {describe_features(available)}); use {self.flags()}"
            )

    def weights_for(self, names: Sequence[str]) -> np.ndarray:
        """The head's weights ``(len(names),)`` over the features ``names`` (0 where the head does not read one)."""
        lookup = dict(zip(self.features, self.weight))
        if set(lookup) - set(names):
            raise ValueError(f"features {sorted(set(lookup) - set(names))} missing from {list(names)}")
        return np.array([lookup.get(name, 0.0) for name in names], dtype=np.float32)

    def probabilities(self, features: Mapping[str, Tensor]) -> Tensor:
        """Contact probabilities ``(L, L)`` from named ``(L, L)`` pair features (those the head reads)."""
        stacked = torch.stack([features[name].float() for name in self.features], dim=-1)
        return logistic_contact_probabilities(stacked, torch.tensor(self.weight), self.bias)

    def to_dict(self) -> dict[str, Any]:
        """The ``contact_head.json`` content."""
        return {"features": list(self.features), "weight": [float(w) for w in self.weight], "bias": float(self.bias),
                "fit_on": list(self.fit_on), "settings": dict(self.settings)}

    def save(self, path: str | os.PathLike) -> None:
        """Write ``contact_head.json`` atomically."""
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ContactHead":
        """Read and validate a ``contact_head.json`` (a :class:`UserInputError` naming ``path`` otherwise)."""
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise UserInputError(f"{path}: contact head file not found") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserInputError(f"{path}: not a readable contact_head.json ({exc})") from exc
        if not isinstance(data, dict):
            raise UserInputError(f"{path}: expected a JSON object with {', '.join(sorted(_KEYS))}")
        missing, unknown = {"features", "weight", "bias"} - set(data), set(data) - _KEYS
        if missing or unknown:
            problem = f"missing {', '.join(sorted(missing))}" if missing else f"unknown key {sorted(unknown)[0]!r}"
            raise UserInputError(f"{path}: not a contact_head.json ({problem})")
        if not all(isinstance(data.get(key, []), list) for key in ("features", "weight", "fit_on")):
            raise UserInputError(f"{path}: 'features', 'weight' and 'fit_on' must be lists")
        head = cls(features=tuple(data["features"]), weight=tuple(data["weight"]), bias=data["bias"],
                   fit_on=tuple(data.get("fit_on", ())), settings=data.get("settings", {}))
        head.validate(path)
        return head


def describe_features(names: Sequence[str]) -> str:
    """``"16 attention features + potts_apc"``: a short description of the feature names ``names``."""
    attention = sum(1 for name in names if _ATTENTION_FEATURE.fullmatch(name))
    parts = ([f"{attention} attention features"] if attention else [])
    parts += [n for n in names if n in COEVOLUTION_MAPS or n in (FACTORED_ATTENTION_MAP, ESM_MSA_MAP)]
    return " + ".join(parts) or "none"


def default_head() -> ContactHead:
    """The contact head shipped with bioattn (``bioattn/pretrained/contact-heads/contact_head.json``)."""
    return ContactHead.load(DEFAULT_HEAD_FILE)


def shipped_head(method: str) -> ContactHead:
    """The head shipped with bioattn for ``bioattn predict msa --contact-method`` ``method`` (see :data:`SHIPPED_HEADS`)."""
    if method not in SHIPPED_HEADS:
        raise UserInputError(f"--contact-method must be one of {', '.join(SHIPPED_HEADS)}, got {method!r}")
    return ContactHead.load(SHIPPED_HEADS[method])


def fit_head(features: Mapping[str, Mapping[str, Tensor]], distances: Mapping[str, np.ndarray], names: Sequence[str],
             settings: Mapping[str, Any] | None = None) -> ContactHead:
    """Fit a head on the features ``names`` of every family in ``features`` (family → name → ``(L, L)``)."""
    families = list(features)
    stacked = [torch.stack([features[family][name].float() for name in names], dim=-1) for family in families]
    weight, bias = fit_contact_head(stacked, [distances[family] for family in families])
    return ContactHead(tuple(names), tuple(float(w) for w in weight), bias, tuple(families), dict(settings or {}))


def leave_one_out_heads(features: Mapping[str, Mapping[str, Tensor]], distances: Mapping[str, np.ndarray],
                        names: Sequence[str]) -> dict[str, ContactHead]:
    """For each family of ``features``, a head on ``names`` fitted on the other families only."""
    return {held_out: fit_head({f: v for f, v in features.items() if f != held_out}, distances, names)
            for held_out in features}


def head_precision(head: ContactHead, features: Mapping[str, Tensor], distances: np.ndarray) -> float:
    """Long-range P@L/5 of ``head``'s probabilities on one family."""
    return precision_at(head.probabilities(features).numpy(), distances)["P@L/5"]


def select_head(features: Mapping[str, Mapping[str, Tensor]], distances: Mapping[str, np.ndarray], names: Sequence[str],
                settings: Mapping[str, Any] | None = None) -> ContactHead:
    """The head, among one per feature of ``names`` and one on all, with the best mean leave-one-family-out
    P@L/5 (ties: the earlier), refitted on every family; the means go to ``settings["selection"]``."""
    if len(features) < 2:
        raise ValueError(f"choosing a head leave-one-family-out needs two families or more, got {len(features)}")
    candidates = [[name] for name in names] + ([list(names)] if len(names) > 1 else [])
    scores = {}
    for candidate in candidates:
        heads = leave_one_out_heads(features, distances, candidate)
        scores["+".join(candidate)] = float(np.mean([head_precision(heads[f], features[f], distances[f]) for f in features]))
    best = max(range(len(candidates)), key=lambda k: (scores["+".join(candidates[k])], -k))
    return fit_head(features, distances, candidates[best], {**(settings or {}), "selection": scores})
