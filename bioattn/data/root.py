"""Where the datasets live: ``--data-root`` flag, else ``$BIOATTN_DATA_ROOT``, else ``../shared/data``.

Without any of them, smoke tests (``--quick``) can use the small sample shipped inside the package
(:func:`embedded_sample_dir`); ``bioattn data fetch NAME`` downloads the full datasets into a data root.
"""
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
    """Return the data root folder.

    Order: the explicit ``flag``; the ``BIOATTN_DATA_ROOT`` environment variable; ``../shared/data``
    beside the current directory or beside the project checkout, whichever exists first.
    """
    if flag is not None:
        candidates = [Path(flag)]
    elif os.environ.get(DATA_ROOT_ENV):
        candidates = [Path(os.environ[DATA_ROOT_ENV])]
    else:
        # the same folder once when the current directory is the project root
        beside = [Path.cwd().parent / "shared" / "data", _PROJECT_ROOT.parent / "shared" / "data"]
        candidates = list(dict.fromkeys(beside))
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserInputError(
        f"data root not found (tried {', '.join(str(c) for c in candidates)}); "
        f"pass --data-root DIR or set {DATA_ROOT_ENV} (download the data with 'bioattn data fetch NAME')"
    )


def embedded_sample_dir(task: str) -> Path:
    """The folder of the sample of GUE ``task`` shipped with the package (``train.csv.gz``, ``dev.csv.gz``:
    2,000 and 500 sequences; see its ``README.md``). Only :data:`EMBEDDED_SAMPLE_TASKS` have one."""
    if task not in EMBEDDED_SAMPLE_TASKS:
        raise UserInputError(f"no embedded sample of {task!r}; samples exist for {', '.join(EMBEDDED_SAMPLE_TASKS)}")
    return _SAMPLE_DIR / task
