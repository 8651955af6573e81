"""The cell type of each element of a variant release, and the activity model's output it matches.

An activity model of several outputs (one per cell type, e.g. ``hepg2`` and ``wtc11``) predicts every element in
every cell type; a measured variant effect was measured in one. Each element's cell type, when known, comes from
(first found):

1. ``--cell-types FILE`` (``bioattn train variants``): a TSV with the columns ``chrom`` (the element, a record of
   the reference FASTA) and ``cell_type`` (:func:`read_cell_types_file`);
2. the variants' own field: a VCF's ``CELL_TYPE`` INFO field, a TSV's ``cell_type`` column (one value per element,
   :func:`input_cell_types`);
3. the reference FASTA header's ``cell_type=`` (``>F9 type=promoter cell_type=HepG2``).

A cell type matches an output when they are equal ignoring case and every character that is not a letter or a digit
(:func:`bioattn.tasks.outputs.matching_output`). The *matched features* (:func:`matched_features`): for every feature
family the head computes per output (``delta``, ``abs_delta``, ``ism_here``, ...), ``<family>_matched`` is that
family's value of the element's matched output for the variants of a matched element, 0 for the others; the
per-output features stay features beside them. A saved head (:class:`~bioattn.models.variant_head.VariantEffectHead`)
stores the map; at prediction time (:func:`prediction_cell_types`) a cell type in the input overrides it and the
FASTA headers fill in elements it does not name.
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
    """``{element: cell type}`` of a ``--cell-types`` TSV (columns ``chrom`` and ``cell_type``; ``element`` or
    ``contig`` for ``chrom``); an element not among ``elements`` (the reference's records) or given two cell types,
    or a file without those columns, is one :class:`UserInputError` naming the file and line."""
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
    """``{element: cell type}`` from the variants' own field (``CELL_TYPE`` / ``cell_type``); two records of one
    element with different cell types is one :class:`UserInputError` naming both."""
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
    """``{element: cell type}`` of the FASTA headers' ``cell_type=`` (:func:`~bioattn.tasks.variants.evaluate.header_fields`)."""
    return {name: value for name, fields in headers.items()
            if (value := _known(fields.get(HEADER_FIELD))) is not None}


def training_cell_types(variants: Sequence[Variant], headers: Mapping[str, Mapping[str, str]],
                        from_file: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """``{element: (cell type, source)}`` of every element with a known cell type (``source``: ``--cell-types``,
    ``input`` or ``fasta header``), the first of the file, the variants' field, the FASTA header."""
    out: dict[str, tuple[str, str]] = {}
    for source, found in (("fasta header", header_cell_types(headers)), ("input", input_cell_types(variants)),
                          ("--cell-types", dict(from_file or {}))):
        out.update({element: (cell_type, source) for element, cell_type in found.items()})
    return out


def prediction_cell_types(variants: Sequence[Variant], stored: Mapping[str, str],
                          headers: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{element: cell type}`` at prediction time: the input's field, else the head's ``stored`` map, else the FASTA
    header's ``cell_type=``."""
    out = header_cell_types(headers)
    out.update(stored)
    out.update(input_cell_types(variants))
    return out


def matched_outputs(cell_types: Mapping[str, str], outputs: Sequence[str]) -> dict[str, str | None]:
    """``{element: the output its cell type matches, or None}``."""
    out = {}
    for element, cell_type in cell_types.items():
        k = matching_output(cell_type, outputs)
        out[element] = None if k is None else str(outputs[k])
    return out


def output_families(names: Sequence[str], outputs: Sequence[str]) -> list[str]:
    """The feature families computed per output (``names`` holding ``<family>_<output>`` for every output), in
    ``names`` order."""
    if len(outputs) < 2:
        return []
    suffix = f"_{outputs[0]}"
    present = set(names)
    return [name[: -len(suffix)] for name in names
            if name.endswith(suffix) and all(f"{name[: -len(suffix)]}_{o}" in present for o in outputs)]


def matched_features(names: Sequence[str], features: np.ndarray, outputs: Sequence[str],
                     row_outputs: Sequence[str | None]) -> tuple[list[str], np.ndarray]:
    """``(["<family>_matched", ...], (N, F') matrix)``: for each per-output family of ``names`` / ``features``
    (``(N, F)``), the value of the row's matched output (``row_outputs[i]``, one of ``outputs``), 0 where it has
    none."""
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
    """What ``metrics.json`` says of the cell types: the model's ``outputs``; per element its ``cell_type``,
    ``source`` and matched ``output`` (None where unknown or unmatched); ``matched`` (output → elements) and
    ``unmatched`` (elements without a matching output, their cell type known or not)."""
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
