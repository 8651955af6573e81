"""Load activity models (a run directory, an ensemble run directory or a shipped name) and predict files."""
from __future__ import annotations

import csv
import os
import re
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from bioattn.data.dna import read_records
from bioattn.errors import UserInputError
from bioattn.io import write_table
from bioattn.models.activity import ActivityRegressor
from bioattn.models.ensemble import ENSEMBLE_TYPE
from bioattn.models.registry import read_config, resolve_model_dir
from bioattn.distributed import resolve_device
from bioattn.tasks.activity.data import _open
from bioattn.tasks.outputs import output_index

#: A prediction further than this many training standard deviations from the training mean is flagged.
FAR_SD = 5.0
_BASES = re.compile(r"[ACGTN]+", re.IGNORECASE)


def load_activity_models(source: str | os.PathLike, device: str = "cpu") -> list[ActivityRegressor]:
    """The model(s) of ``source``: ``[model]`` or an ensemble's members (each an ActivityRegressor)."""
    folder = resolve_model_dir(source)
    config = read_config(folder)
    if config.get("model_type") == ENSEMBLE_TYPE:
        if config.get("member_type") != "ActivityRegressor":
            raise UserInputError(f"{folder}: holds an ensemble of {config.get('member_type')}, not of ActivityRegressor")
        return [ActivityRegressor.from_pretrained(folder / name, map_location=device) for name in config["members"]]
    return [ActivityRegressor.from_pretrained(folder, map_location=device)]


def predict_values(models: Sequence[ActivityRegressor], sequences: Sequence[str], *, records: Sequence[str] | None = None,
                   strand: str | None = None, batch_size: int = 256) -> np.ndarray:
    """``(N, T)``: the mean over ``models`` of :meth:`ActivityRegressor.predict`."""
    return np.mean([m.predict(sequences, records=records, strand=strand, batch_size=batch_size) for m in models], axis=0)


def read_sequences(path: Path) -> tuple[list[str], list[str]]:
    """``(ids, sequences)`` of a FASTA or CSV/TSV file (value columns ignored)."""
    ids, sequences = [], []
    source = Path(path)
    if source.suffix.lower() in (".tsv", ".csv") or source.name.lower().endswith((".tsv.gz", ".csv.gz")):
        with _open(source) as handle:
            first = handle.readline()
            delimiter = "\t" if "\t" in first else ","
            rows = list(csv.reader([first, *handle], delimiter=delimiter))
        header = [c.strip().lower() for c in rows[0]]
        column = next((header.index(n) for n in ("sequence", "seq") if n in header), None)
        if column is None:
            raise UserInputError(f"{source}: no 'sequence' (or 'seq') column in the header: {','.join(rows[0])}")
        id_column = header.index("id") if "id" in header else None
        for n, row in enumerate(r for r in rows[1:] if any(c.strip() for c in r)):
            ids.append(row[id_column].strip() if id_column is not None else str(n + 1))
            sequences.append(row[column].strip() if column < len(row) else "")
            if not sequences[-1]:
                raise UserInputError(f"{source}: record {ids[-1]!r}: empty sequence")
        return ids, sequences
    records = list(read_records(source))
    return [r.id for r in records], [r.sequence for r in records]


def check_bases(source: str | os.PathLike, ids: Sequence[str], sequences: Sequence[str]) -> None:
    """A base other than A/C/G/T/N (any case) is a :class:`UserInputError` naming the record and position."""
    for name, sequence in zip(ids, sequences):
        if not _BASES.fullmatch(sequence):
            bad = next(i for i, c in enumerate(sequence) if c.upper() not in "ACGTN")
            raise UserInputError(f"{source}: record {name!r}: invalid base {sequence[bad]!r} at position {bad + 1}; "
                                 "expected A, C, G, T or N")


def far_predictions(models: Sequence[ActivityRegressor], values: np.ndarray, limit: float = FAR_SD,
                    columns: Sequence[int] | None = None) -> np.ndarray:
    """Rows predicted more than ``limit`` training sd from the training mean; ``columns``: the targets of ``values``."""
    mean, sd = models[0].target_mean.double().numpy(), models[0].target_sd.double().numpy()
    if columns is not None:
        mean, sd = mean[list(columns)], sd[list(columns)]
    return np.flatnonzero((np.abs(np.asarray(values) - mean) / sd > limit).any(axis=1))


def predict_activity(source: str | os.PathLike, input_path: str | os.PathLike, output: str | os.PathLike, *,
                     strand: str | None = None, batch_size: int = 256, device: str = "auto",
                     output_name: str | None = None) -> int:
    """Write ``output`` (id, one column per target; ``-``: TSV on stdout) for ``input_path``; returns the row count."""
    models = load_activity_models(source, device=str(resolve_device(device)))
    names = [str(n) for n in models[0].target_names]
    chosen = list(range(len(names)))
    if output_name is not None:
        chosen = [output_index(output_name, names)]
    ids, sequences = read_sequences(Path(input_path))
    check_bases(input_path, ids, sequences)
    records = [f"{input_path}: record {name!r}" for name in ids]
    values = predict_values(models, sequences, records=records, strand=strand, batch_size=batch_size)[:, chosen]
    write_table(output, ["id", *(names[k] for k in chosen)], ([name, *row] for name, row in zip(ids, values.tolist())),
                delimiter="\t" if str(output) == "-" else None)
    far = far_predictions(models, values, columns=chosen)
    if len(far):
        shown = ", ".join(repr(ids[i]) for i in far[:10]) + (f" and {len(far) - 10} more" if len(far) > 10 else "")
        print(f"warning: {len(far)} of {len(ids)} predictions lie beyond {FAR_SD:g} standard deviations of the "
              f"training values ({shown}): the model extrapolates there; do not trust those rows", file=sys.stderr)
    return len(ids)
