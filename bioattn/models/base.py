"""Save/load for bioattn models: ``config.json`` + ``model.safetensors`` in a run directory.

Loading constructs the model from the JSON config and reads tensors with safetensors, so no pickle
is ever executed when a user opens a model someone else trained.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from torch import nn

from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors, write_json

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

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
    def from_pretrained(cls: type[M], run_dir: str | os.PathLike, map_location: str = "cpu") -> M:
        """Rebuild the model from ``run_dir/config.json`` and load ``run_dir/model.safetensors``."""
        run_dir = Path(run_dir)
        config_path = run_dir / CONFIG_NAME
        if not config_path.is_file():
            raise UserInputError(f"{run_dir}: no {CONFIG_NAME}; is this a bioattn run directory?")
        try:
            config = json.loads(config_path.read_text())
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{config_path}: not valid JSON ({exc})") from exc
        model_type = config.pop("model_type", cls.__name__)
        if model_type != cls.__name__:
            raise UserInputError(f"{config_path}: holds a {model_type}, not a {cls.__name__}")
        model = cls(**config)
        state = load_tensors(run_dir / WEIGHTS_NAME)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise UserInputError(
                f"{run_dir / WEIGHTS_NAME}: weights do not match the config "
                f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
            )
        return model.to(map_location).eval()
