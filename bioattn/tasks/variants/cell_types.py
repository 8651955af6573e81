"""The cell type of each element of a variant release, and the activity model's output it matches.

An element's cell type comes from ``--cell-types FILE``, else the variants' own field (``CELL_TYPE`` / ``cell_type``),
else the FASTA header's ``cell_type=``; it matches an output as :func:`bioattn.tasks.outputs.matching_output` says.
``<family>_matched`` features (:func:`matched_features`) are the matched output's value, 0 where none matches.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.tasks.outputs import matching_output
from bioattn.tasks.variants.records import Variant

#: The suffix of a matched feature.
MATCHED = "_matched"
#: The FASTA header field of an element's cell type.
HEADER_FIELD = "cell_type"
_MISSING = ("", ".", "na", "nan", "none")


def _known(value: Any) -> str | None:
    text = "" if value is None else str(value).strip()
    return None if text.lower() in _MISSING else text


def read_cell_types_file(path: str | Path, elements: Sequence[str]) -> dict[str, str]:
    """``{element: cell type}`` of a ``--cell-types`` TSV (columns ``chrom`` and ``cell_type``), checked against
    ``elements`` (the reference's records)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: --cell-types file not found" if not path.exists() else f"{path}: is not a file")
    known = set(elements)
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    with open(path, newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        header = [h.strip().lower() for h in next(rows, [])]
        chrom = next((header.index(n) for n in ("chrom", "#chrom", "element", "contig") if n in header), None)
        column = next((header.index(n) for n in ("cell_type", "celltype") if n in header), None)
        if chrom is None or column is None:
            raise UserInputError(f"{path}: line 1: --cell-types needs a tab-separated header with the columns chrom "
                                 f"and cell_type (found {', '.join(header) or 'nothing'})")
        for line, row in enumerate(rows, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) <= max(chrom, column):
                raise UserInputError(f"{path}:{line}: {len(row)} columns, the header has {len(header)}")
            element, cell_type = row[chrom].strip(), _known(row[column])
            if element not in known:
                names = list(elements)
                raise UserInputError(f"{path}:{line}: element {element!r} is not a record of the reference FASTA "
                                     f"(it has {', '.join(names[:5])}{', ...' if len(names) > 5 else ''})")
            if cell_type is None:
                continue
            if element in out and out[element] != cell_type:
                raise UserInputError(f"{path}:{line}: element {element!r} has cell type {cell_type!r} here and "
                                     f"{out[element]!r} on line {first[element]}; an element has one cell type")
            out[element] = cell_type
            first.setdefault(element, line)
    return out


def input_cell_types(variants: Sequence[Variant]) -> dict[str, str]:
    """``{element: cell type}`` from the variants' own field (``CELL_TYPE`` / ``cell_type``)."""
    out: dict[str, tuple[str, str]] = {}
    for v in variants:
        cell_type = _known(v.cell_type)
        if cell_type is None:
            continue
        seen = out.get(v.chrom)
        if seen is None:
            out[v.chrom] = (cell_type, v.where)
        elif seen[0] != cell_type:
            raise UserInputError(f"{v.where}: cell type {cell_type!r} differs from {seen[0]!r} given for element "
                                 f"{v.chrom} at {seen[1]}; an element has one cell type")
    return {element: cell_type for element, (cell_type, _) in out.items()}


def header_cell_types(headers: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{element: cell type}`` of the FASTA headers' ``cell_type=``."""
    return {name: value for name, fields in headers.items()
            if (value := _known(fields.get(HEADER_FIELD))) is not None}


def training_cell_types(variants: Sequence[Variant], headers: Mapping[str, Mapping[str, str]],
                        from_file: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """``{element: (cell type, source)}``, ``source`` the first of ``--cell-types``, ``input``, ``fasta header``."""
    out: dict[str, tuple[str, str]] = {}
    for source, found in (("fasta header", header_cell_types(headers)), ("input", input_cell_types(variants)),
                          ("--cell-types", dict(from_file or {}))):
        out.update({element: (cell_type, source) for element, cell_type in found.items()})
    return out


def prediction_cell_types(variants: Sequence[Variant], stored: Mapping[str, str],
                          headers: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{element: cell type}`` at prediction time: the input's, else the head's ``stored`` map, else the header's."""
    out = header_cell_types(headers)
    out.update(stored)
    out.update(input_cell_types(variants))
    return out


def matched_outputs(cell_types: Mapping[str, str], outputs: Sequence[str]) -> dict[str, str | None]:
    """``{element: the output its cell type matches, or None}``."""
    out = {}
    for element, cell_type in cell_types.items():
        out[element] = None if (k := matching_output(cell_type, outputs)) is None else str(outputs[k])
    return out


def output_families(names: Sequence[str], outputs: Sequence[str]) -> list[str]:
    """The families ``f`` of ``names`` that hold ``<f>_<output>`` for every output, in ``names`` order."""
    if len(outputs) < 2:
        return []
    suffix = f"_{outputs[0]}"
    present = set(names)
    return [name[: -len(suffix)] for name in names
            if name.endswith(suffix) and all(f"{name[: -len(suffix)]}_{o}" in present for o in outputs)]


def matched_features(names: Sequence[str], features: np.ndarray, outputs: Sequence[str],
                     row_outputs: Sequence[str | None]) -> tuple[list[str], np.ndarray]:
    """``(["<family>_matched", ...], (N, F'))``: each family's value at the row's matched output, 0 where none."""
    index = {name: k for k, name in enumerate(names)}
    families = output_families(names, outputs)
    matrix = np.zeros((features.shape[0], len(families)))
    for output in dict.fromkeys(o for o in row_outputs if o is not None):
        rows = np.array([o == output for o in row_outputs])
        for j, family in enumerate(families):
            matrix[rows, j] = features[rows, index[f"{family}_{output}"]]
    return [family + MATCHED for family in families], matrix


def describe_matches(elements: Sequence[str], cell_types: Mapping[str, tuple[str, str]],
                     outputs: Sequence[str]) -> dict[str, Any]:
    """What ``metrics.json`` says of the cell types: ``outputs``, per element its ``cell_type``, ``source`` and
    ``output``, ``matched`` (output → elements) and ``unmatched``."""
    matched = matched_outputs({e: c for e, (c, _) in cell_types.items()}, outputs)
    per = {}
    for element in dict.fromkeys(elements):
        cell_type, source = cell_types.get(element, (None, None))
        per[element] = {"cell_type": cell_type, "source": source, "output": matched.get(element)}
    return {"outputs": list(outputs), "elements": per,
            "matched": {o: [e for e, row in per.items() if row["output"] == o] for o in outputs},
            "unmatched": [e for e, row in per.items() if row["output"] is None]}


def summary_lines(described: Mapping[str, Any]) -> list[str]:
    """``summary.md``'s section on the cell types (:func:`describe_matches`)."""
    lines = ["", f"Cell types (activity model outputs: {', '.join(described['outputs'])}); the <feature>_matched "
             "features read each element's matched output:", "", "| element | cell type | source | matched output |",
             "|---|---|---|---|"]
    for element, row in described["elements"].items():
        lines.append(f"| {element} | {row['cell_type'] or '—'} | {row['source'] or '—'} | "
                     f"{row['output'] or 'none (matched features 0)'} |")
    unmatched = described["unmatched"]
    lines += ["", "No matching output: " + (", ".join(unmatched) if unmatched else "none") + "."]
    return lines
