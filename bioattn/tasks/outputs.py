"""A model's outputs by name (``--output-name``), matched ignoring case and punctuation."""
from __future__ import annotations

import re
from typing import Sequence

from bioattn.errors import UserInputError


def normalised(name: str) -> str:
    """``name`` lower-cased with every character other than a letter or a digit removed."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def matching_output(name: str | None, outputs: Sequence[str]) -> int | None:
    """The index of the output ``name`` names (exact, else the only :func:`normalised` match), else ``None``."""
    if name is None or not str(name).strip():
        return None
    outputs = [str(o) for o in outputs]
    if name in outputs:
        return outputs.index(name)
    key = normalised(name)
    found = [k for k, output in enumerate(outputs) if key and normalised(output) == key]
    return found[0] if len(found) == 1 else None


def output_index(name: str, outputs: Sequence[str], flag: str = "--output-name") -> int:
    """The index of the output ``name`` (:func:`matching_output`), else a :class:`UserInputError`."""
    k = matching_output(name, outputs)
    if k is None:
        raise UserInputError(f"{flag} {name!r}: the model has no output of that name; its outputs are "
                             f"{', '.join(map(str, outputs))}")
    return k
