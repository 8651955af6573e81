"""A model's outputs by name: ``--output-name`` of ``bioattn predict activity|variants`` (one output of a model of
several, e.g. one per cell type) and the match between a cell type and an output (``bioattn train variants``).

A name *matches* an output when the two are equal once lower-cased and stripped of every character that is not a
letter or a digit (``HepG2`` ↔ ``hepg2``, ``WTC-11`` ↔ ``wtc11``); an exact spelling is always preferred.
"""
from __future__ import annotations

import re
from typing import Sequence

from bioattn.errors import UserInputError


def normalised(name: str) -> str:
    """``name`` lower-cased with every character other than a letter or a digit removed."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def matching_output(name: str | None, outputs: Sequence[str]) -> int | None:
    """The index of the output ``name`` names (the exact spelling first, else the only output equal to it once
    :func:`normalised`); ``None`` when there is no such output, or ``name`` is empty."""
    if name is None or not str(name).strip():
        return None
    outputs = [str(o) for o in outputs]
    if name in outputs:
        return outputs.index(name)
    key = normalised(name)
    found = [k for k, output in enumerate(outputs) if key and normalised(output) == key]
    return found[0] if len(found) == 1 else None


def output_index(name: str, outputs: Sequence[str], flag: str = "--output-name") -> int:
    """The index of the output ``name`` (:func:`matching_output`); one :class:`UserInputError` listing the model's
    outputs when it has none of that name."""
    k = matching_output(name, outputs)
    if k is None:
        raise UserInputError(f"{flag} {name!r}: the model has no output of that name; its outputs are "
                             f"{', '.join(map(str, outputs))}")
    return k
