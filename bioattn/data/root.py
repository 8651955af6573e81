"""Where the datasets live: ``--data-root`` flag, else ``$BIOATTN_DATA_ROOT``, else ``../shared/data``."""
from __future__ import annotations

import os
from pathlib import Path

from bioattn.errors import UserInputError

DATA_ROOT_ENV = "BIOATTN_DATA_ROOT"
EMBEDDED_SAMPLE = "embedded sample"
EMBEDDED_SAMPLE_TASKS = ("prom_core_all",)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_SAMPLE_DIR = Path(__file__).resolve().parent / "sample"


def resolve_data_root(flag: str | os.PathLike | None = None) -> Path:
    """The data root: ``flag``, else ``$BIOATTN_DATA_ROOT``, else ``../shared/data`` beside the cwd or the checkout."""
    if flag is not None:
        candidates = [Path(flag)]
    elif os.environ.get(DATA_ROOT_ENV):
        candidates = [Path(os.environ[DATA_ROOT_ENV])]
    else:
        beside = [Path.cwd().parent / "shared" / "data", _PROJECT_ROOT.parent / "shared" / "data"]
        candidates = list(dict.fromkeys(beside))
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserInputError(f"data root not found (tried {', '.join(str(c) for c in candidates)}); pass --data-root DIR "
                         f"or set {DATA_ROOT_ENV} (download the data with 'bioattn data fetch NAME')")


def embedded_sample_dir(task: str) -> Path:
    """The folder of the GUE ``task`` sample shipped with the package (only :data:`EMBEDDED_SAMPLE_TASKS`)."""
    if task not in EMBEDDED_SAMPLE_TASKS:
        raise UserInputError(f"no embedded sample of {task!r}; samples exist for {', '.join(EMBEDDED_SAMPLE_TASKS)}")
    return _SAMPLE_DIR / task
