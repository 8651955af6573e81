"""Save/load for bioattn models: ``config.json`` + ``model.safetensors`` in a run directory (or in a model
shipped with bioattn, loaded by name: see :mod:`bioattn.models.registry`).

Loading constructs the model from the JSON config and reads tensors with safetensors, so no pickle
is ever executed when a user opens a model someone else trained.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors, write_json
from bioattn.models.ensemble import ENSEMBLE_TYPE, Ensemble
from bioattn.models.registry import CONFIG_NAME, WEIGHTS_NAME, read_config, resolve_model_dir

__all__ = ["CONFIG_NAME", "WEIGHTS_NAME", "PretrainedModel"]

M = TypeVar("M", bound="PretrainedModel")


class PretrainedModel(nn.Module):
    """Base class: subclasses store their constructor arguments in ``self.config`` (JSON-serialisable)."""

    config: dict[str, Any]

    def save_pretrained(self, run_dir: str | os.PathLike) -> None:
        """Write ``config.json`` (with the class name) and ``model.safetensors`` into ``run_dir``."""
        run_dir = Path(run_dir)
        save_tensors(run_dir / WEIGHTS_NAME, self.state_dict())
        write_json(run_dir / CONFIG_NAME, {"model_type": type(self).__name__, **self.config})

    @classmethod
    def from_pretrained(cls: type[M], run_dir: str | os.PathLike, map_location: str | torch.device = "cpu") -> M | Ensemble:
        """Rebuild the model from ``run_dir/config.json`` and load ``run_dir/model.safetensors``.

        ``run_dir`` is a run directory or, when no such folder exists, the name of a shipped model
        (:func:`~bioattn.models.registry.available_models`); an unknown name is an error listing them.
        ``map_location``: the device the model ends on; a CUDA device where PyTorch sees no GPU is an error.
        An ensemble run directory (``--seeds`` / ``--cv``) of this class loads as an
        :class:`~bioattn.models.ensemble.Ensemble`, which predicts like one model.
        """
        if torch.device(map_location).type == "cuda" and not torch.cuda.is_available():
            raise UserInputError(f"cannot load {run_dir} onto {map_location}: PyTorch sees no CUDA GPU here")
        run_dir = resolve_model_dir(run_dir)
        config = read_config(run_dir)
        model_type = config.pop("model_type", cls.__name__)
        if model_type == ENSEMBLE_TYPE and config.get("member_type") == cls.__name__:
            return Ensemble.load(run_dir, config, cls, map_location)
        if model_type == ENSEMBLE_TYPE:
            raise UserInputError(f"{run_dir / CONFIG_NAME}: holds an ensemble of {config.get('member_type')}, "
                                 f"not a {cls.__name__}")
        if model_type != cls.__name__:
            raise UserInputError(f"{run_dir / CONFIG_NAME}: holds a {model_type}, not a {cls.__name__}")
        model = cls(**config)
        state = load_tensors(run_dir / WEIGHTS_NAME)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise UserInputError(
                f"{run_dir / WEIGHTS_NAME}: weights do not match the config "
                f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
            )
        return model.to(map_location).eval()
