"""Where the datasets live: ``--data-root`` flag, else ``$BIOATTN_DATA_ROOT``, else ``../shared/data``."""
from __future__ import annotations

import os
from pathlib import Path

from bioattn.errors import UserInputError

DATA_ROOT_ENV = "BIOATTN_DATA_ROOT"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
        candidates = [Path.cwd().parent / "shared" / "data", _PROJECT_ROOT.parent / "shared" / "data"]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserInputError(
        f"data root not found (tried {', '.join(str(c) for c in candidates)}); "
        f"pass --data-root DIR or set {DATA_ROOT_ENV}"
    )
