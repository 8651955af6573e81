"""The saved run configuration (``run_config.json``); the run directory's creation rules are in :mod:`bioattn.run_dir`."""
from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from bioattn.io import write_json
from bioattn.run_dir import check_run_dir, prepare_run_dir
from bioattn.training.config import TrainConfig
from bioattn.distributed import world_size

RUN_CONFIG_NAME = "run_config.json"
_VERSIONED_PACKAGES = ("bioattn", "torch", "numpy", "monai", "biopython", "scikit-learn", "safetensors")


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that determine a run's numbers."""
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in _VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def write_run_config(run_dir: str | os.PathLike, config: TrainConfig, run_info: dict[str, Any] | None = None) -> None:
    """Write ``run_dir/run_config.json``: resolved training config, recipe options, command, versions."""
    recipe = {k: str(v) if isinstance(v, Path) else v for k, v in (run_info or {}).items()}
    write_json(Path(run_dir) / RUN_CONFIG_NAME, {"training": config.to_dict(), "recipe": recipe, "command": sys.argv,
                                                 "world_size": world_size(), "versions": package_versions()})
