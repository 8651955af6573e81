"""Models shipped with bioattn, loadable by name, and a loader that picks the class from the saved config.

A shipped model is a run directory ``bioattn/pretrained/<name>/`` plus ``card.json`` and ``MODEL_CARD.md``; its
name is accepted wherever a run directory is::

    from bioattn.models import load_pretrained
    from bioattn.models.promoter import PromoterClassifier
    model = load_pretrained("gue-prom-core-all")            # any model type, from config.json's model_type
    model = PromoterClassifier.from_pretrained("gue-prom-core-all")      # always a PromoterClassifier
    ensemble = load_pretrained("gue-prom-core-all-ensemble")            # an Ensemble of PromoterClassifiers
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bioattn import plugins
from bioattn.errors import UserInputError

if TYPE_CHECKING:
    from torch import nn

# Reading the shipped cards imports neither torch nor any model.
#: ``model_type`` of an ensemble's config.json (:data:`bioattn.models.ensemble.ENSEMBLE_TYPE`, the same string).
ENSEMBLE_TYPE = "Ensemble"

#: How to obtain ESM-MSA-1b's weights (``bioattn models``, errors, ``--help``).
ESM_MSA_WEIGHTS_HELP = (
    "ESM-MSA-1b weights are not shipped with bioattn and never downloaded by it. Download fair-esm's "
    "esm_msa1b_t12_100M_UR50S.pt and esm_msa1b_t12_100M_UR50S-contact-regression.pt (links in the fair-esm "
    "repository's README, MIT license) into one folder, then give --weights FILE.pt, or convert once with "
    "MSATransformer.from_esm(FILE.pt).save_pretrained(DIR) and give --weights DIR (safetensors, no pickle)."
)
#: Folder of the shipped models (package data).
PRETRAINED_ROOT = Path(__file__).resolve().parent.parent / "pretrained"
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
CARD_NAME = "card.json"


def registered_model_types() -> dict[str, str]:
    """``model_type`` in config.json → ``module:class`` of every registered task (:data:`bioattn.plugins.TASKS`)."""
    return plugins.model_types()


#: ``model_type`` saved in config.json → ``module:class`` (imported only when such a model is loaded).
MODEL_TYPES: dict[str, str] = registered_model_types()


def available_models() -> list[str]:
    """Names of the shipped models, sorted."""
    if not PRETRAINED_ROOT.is_dir():
        return []
    return sorted(p.name for p in PRETRAINED_ROOT.iterdir() if (p / CONFIG_NAME).is_file())


def resolve_model_dir(name_or_path: str | os.PathLike) -> Path:
    """The folder of ``name_or_path``: an existing directory as given, else the shipped model of that name."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if str(name_or_path) in available_models():
        return PRETRAINED_ROOT / str(name_or_path)
    raise UserInputError(f"{name_or_path}: neither a run directory nor a shipped model; shipped models: "
                         f"{', '.join(available_models()) or 'none'} (list them with 'bioattn models')")


def read_config(model_dir: Path) -> dict[str, Any]:
    """The JSON config of the model saved in ``model_dir`` (with its ``model_type``)."""
    config_path = model_dir / CONFIG_NAME
    if not config_path.is_file():
        raise UserInputError(f"{model_dir}: no {CONFIG_NAME}; is this a bioattn run directory?")
    try:
        return json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{config_path}: not valid JSON ({exc})") from exc


def model_class(model_type: str, source: Path) -> "type[nn.Module]":
    """The class registered for ``model_type`` (``source`` names the config in errors)."""
    if model_type not in MODEL_TYPES:
        raise UserInputError(f"{source}: unknown model_type {model_type!r}; known: {', '.join(MODEL_TYPES)}")
    module_name, class_name = MODEL_TYPES[model_type].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def load_pretrained(name_or_path: str | os.PathLike, map_location: str = "cpu",
                    expect: "type[nn.Module] | None" = None) -> "nn.Module":
    """Load a shipped model (by name) or a run directory as the class its config.json names, in eval mode; an
    ensemble as an :class:`~bioattn.models.ensemble.Ensemble`. ``expect``: the model class the caller needs."""
    model_dir = resolve_model_dir(name_or_path)
    config = read_config(model_dir)
    ensemble = config.get("model_type") == ENSEMBLE_TYPE
    model_type = config.get("member_type") if ensemble else config.get("model_type")
    if model_type is None:
        raise UserInputError(f"{model_dir / CONFIG_NAME}: no model_type; load it with the model's class instead")
    import torch
    from bioattn.models.ensemble import Ensemble
    cls = model_class(model_type, model_dir / CONFIG_NAME)
    if expect is not None and not issubclass(cls, expect):
        held = f"an ensemble of {model_type}" if ensemble else f"a {model_type}"
        raise UserInputError(f"{model_dir / CONFIG_NAME}: holds {held}, not a {expect.__name__}")
    if ensemble:
        if torch.device(map_location).type == "cuda" and not torch.cuda.is_available():
            raise UserInputError(f"cannot load {name_or_path} onto {map_location}: PyTorch sees no CUDA GPU here")
        model = Ensemble.load(model_dir, config, cls, map_location)
        attach = getattr(cls, "attach_run_settings", None)
        if attach is not None:
            attach(model, model_dir)
        return model
    return cls.from_pretrained(model_dir, map_location=map_location)  # type: ignore[attr-defined]


class AutoModel:
    """Hugging Face-style entry point: ``AutoModel.from_pretrained(name_or_path)`` = :func:`load_pretrained`."""

    from_pretrained = staticmethod(load_pretrained)


@dataclass(frozen=True)
class ModelCard:
    """What ``card.json`` of a shipped model says (the whole card as ``data``); ``size_bytes``: the folder's size;
    ``members``: how many models an ensemble averages; ``builds_on``: the shipped model it loads by name."""

    name: str
    model_type: str
    task: str
    metric: str
    value: float
    sd: float | None
    size_bytes: int
    data: dict[str, Any]
    members: int = 1
    builds_on: str | None = None

    def headline(self) -> str:
        """``"dev_mcc = 0.6984"`` or ``"cv_mcc = 0.7710 ± 0.0120"``."""
        return f"{self.metric} = {self.value:.4f}" + (f" ± {self.sd:.4f}" if self.sd is not None else "")


def model_card(name: str) -> ModelCard:
    """The :class:`ModelCard` of the shipped model ``name``."""
    model_dir = resolve_model_dir(name)
    card_path = model_dir / CARD_NAME
    try:
        card = json.loads(card_path.read_text())
        headline = card["headline"]
        config = read_config(model_dir)
        model_type = config["member_type"] if config["model_type"] == ENSEMBLE_TYPE else config["model_type"]
        return ModelCard(name=model_dir.name, model_type=model_type, task=card["task"],
                         metric=headline["metric"], value=float(headline["value"]), sd=headline.get("sd"),
                         size_bytes=sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file()), data=card,
                         members=len(config.get("members", [])) or 1, builds_on=card.get("builds_on"))
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        raise UserInputError(f"{card_path}: unreadable model card ({exc!r})") from exc


#: The columns of :func:`model_table` (``bioattn models``).
MODEL_TABLE_HEADER = ["name", "model type", "task", "headline metric", "size"]


def model_table() -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the shipped models, as ``bioattn models`` prints them."""
    rows = []
    for name in available_models():
        card = model_card(name)
        kind = card.model_type if card.members == 1 else f"ensemble of {card.members} {card.model_type}"
        size = _size(card.size_bytes)
        if card.builds_on:
            size += f", builds on {card.builds_on}" + (f" ({_size(model_card(card.builds_on).size_bytes)})"
                                                       if card.builds_on in available_models() else "")
        rows.append([name, kind, card.task, card.headline(), size])
    return MODEL_TABLE_HEADER, rows


def _size(size_bytes: int) -> str:
    """``"5.7 MB"``; under 0.1 MB in kB (``"8 kB"``), not ``"0.0 MB"``."""
    return f"{size_bytes / 1e6:.1f} MB" if size_bytes >= 1e5 else f"{max(size_bytes / 1e3, 1):.0f} kB"
