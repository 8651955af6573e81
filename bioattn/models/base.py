"""Save/load for bioattn models: ``config.json`` + ``model.safetensors`` in a run directory or a shipped model
(:mod:`bioattn.models.registry`); no pickle is ever read."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors, write_json
from bioattn.models.ensemble import ENSEMBLE_TYPE
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
    def from_pretrained(cls: type[M], run_dir: str | os.PathLike, map_location: str | torch.device = "cpu") -> M:
        """The ``cls`` saved in ``run_dir`` (or a shipped model's name), on ``map_location``; ensembles load with
        :func:`~bioattn.models.registry.load_pretrained`."""
        if torch.device(map_location).type == "cuda" and not torch.cuda.is_available():
            raise UserInputError(f"cannot load {run_dir} onto {map_location}: PyTorch sees no CUDA GPU here")
        name, run_dir = run_dir, resolve_model_dir(run_dir)
        config = read_config(run_dir)
        model_type = config.pop("model_type", cls.__name__)
        if model_type == ENSEMBLE_TYPE:
            member_type = config.get("member_type")
            hint = ("" if member_type != cls.__name__ else
                    f"; load it with bioattn.models.load_pretrained({str(name)!r}), which returns the Ensemble (one "
                    f"member alone: {cls.__name__}.from_pretrained of one of its member folders "
                    f"{', '.join(map(str, config.get('members', [])))})")
            single = "a single " if member_type == cls.__name__ else "a "
            raise UserInputError(f"{run_dir / CONFIG_NAME}: holds an ensemble of {member_type}, not {single}"
                                 f"{cls.__name__}{hint}")
        if model_type != cls.__name__:
            raise UserInputError(f"{run_dir / CONFIG_NAME}: holds a {model_type}, not a {cls.__name__}")
        try:
            model = cls(**config)
        except TypeError as exc:
            renamed = "; bioattn 0.5.0 names it embed_dim (rename the key)" if "d_model" in config else ""
            raise UserInputError(f"{run_dir / CONFIG_NAME}: does not fit {cls.__name__} ({exc}){renamed}") from exc
        state = load_tensors(run_dir / WEIGHTS_NAME)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise UserInputError(f"{run_dir / WEIGHTS_NAME}: weights do not match the config "
                                 f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})")
        return model.to(map_location).eval()
