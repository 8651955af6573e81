"""Activity data: DNA sequences with measured values from CSV/TSV or FASTA, checked, flank-aware, grouped splits."""
from __future__ import annotations

import csv
import gzip
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from bioattn.data.dna import reverse_complement
from bioattn.errors import UserInputError

SEQUENCE_COLUMNS = ("sequence", "seq")
ID_COLUMNS = ("id", "name", "record")
FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fas")
#: Shortest prefix / suffix shared by every training sequence that counts as a constant flank.
MIN_FLANK = 6
_BASES = re.compile(r"[ACGTN]+")
_KEY_VALUE = re.compile(r"^([^=\s]+)=(\S*)$")
_SET = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)=(.+)$")
MISSING = ("", "na", "nan", "n/a")


@dataclass
class ActivitySplit:
    """Sequences with ``values (N, T)`` float64; ``file_index``: the input file of each row."""

    records: list[str]
    sequences: list[str]
    values: np.ndarray
    target_names: list[str]
    source: str = ""
    file_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.sequences)

    def subset(self, index: Sequence[int] | np.ndarray) -> "ActivitySplit":
        index = np.asarray(index, dtype=np.int64)
        files = self.file_index[index] if len(self.file_index) else np.zeros(len(index), dtype=np.int64)
        return ActivitySplit([self.records[i] for i in index], [self.sequences[i] for i in index],
                             self.values[index], list(self.target_names), self.source, files)

    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.sequences], dtype=np.int64)


def _is_fasta(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in FASTA_SUFFIXES:
        return True
    with _open(path) as handle:
        return handle.read(1) == ">"


def _open(path: Path):
    if not path.is_file():
        raise UserInputError(f"{path}: file not found")
    with open(path, "rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8", newline="") if gz else open(path, encoding="utf-8", newline="")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _check_sequence(path: Path, record: str, sequence: str) -> str:
    sequence = sequence.strip().upper()
    if not sequence:
        raise UserInputError(f"{path}: {record}: empty sequence")
    if not _BASES.fullmatch(sequence):
        bad = next(i for i, c in enumerate(sequence) if c not in "ACGTN")
        raise UserInputError(f"{path}: {record}: invalid base {sequence[bad]!r} at position {bad + 1}; expected A, C, "
                             "G, T or N")
    return sequence


def _read_table(path: Path, targets: Sequence[str] | None, sequence_column: str | None) -> ActivitySplit:
    try:
        with _open(path) as handle:
            first = handle.readline()
            delimiter = "\t" if path.name.lower().endswith((".tsv", ".tsv.gz")) or "\t" in first else ","
            rows = list(csv.reader([first, *handle], delimiter=delimiter))
    except UnicodeDecodeError as exc:
        raise UserInputError(f"{path}: not a text file") from exc
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise UserInputError(f"{path}: file is empty (no header, no records)")
    header = [cell.strip() for cell in rows[0]]
    lower = [name.lower() for name in header]
    wanted = [sequence_column.lower()] if sequence_column else list(SEQUENCE_COLUMNS)
    seq_col = next((lower.index(name) for name in wanted if name in lower), None)
    if seq_col is None:
        raise UserInputError(f"{path}: no sequence column ({' or '.join(wanted)}) in the header: {','.join(header)}")
    id_col = next((lower.index(name) for name in ID_COLUMNS if name in lower), None)
    data = rows[1:]
    if not data:
        raise UserInputError(f"{path}: a header but no records")
    if targets:
        missing = [name for name in targets if name not in header]
        if missing:
            raise UserInputError(f"{path}: target column {missing[0]!r} not in the header: {','.join(header)}")
        target_cols = [header.index(name) for name in targets]
    else:
        def first_value(column: int) -> str:  # a value column may leave its first rows unmeasured
            cells = (row[column].strip() for row in data if column < len(row))
            return next((cell for cell in cells if cell.lower() not in MISSING), "")

        target_cols = [i for i in range(len(header)) if i not in (seq_col, id_col) and _number(first_value(i)) is not None]
        if not target_cols:
            raise UserInputError(f"{path}: no numeric value column besides the sequence (header: {','.join(header)}); "
                                 "name the value columns with --target")
    several = len(target_cols) > 1
    records, sequences, values = [], [], np.empty((len(data), len(target_cols)))
    for n, row in enumerate(data):
        name = row[id_col].strip() if id_col is not None and id_col < len(row) else str(n + 1)
        record = f"record {name!r} (data row {n + 1})"
        sequences.append(_check_sequence(path, record, row[seq_col] if seq_col < len(row) else ""))
        for j, col in enumerate(target_cols):
            cell = row[col].strip() if col < len(row) else ""
            value = _number(cell)
            if value is None and several and cell.lower() in MISSING:
                value = float("nan")
            if value is None:
                problem = "missing value" if not cell else f"value {cell!r} is not a number"
                raise UserInputError(f"{path}: {record}: column {header[col]!r}: {problem}")
            values[n, j] = value
        if several and not np.isfinite(values[n]).any():
            raise UserInputError(f"{path}: {record}: no measured value in any of the columns "
                                 f"{', '.join(header[c] for c in target_cols)}")
        records.append(name)
    return ActivitySplit(records, sequences, values, [header[c] for c in target_cols], str(path))


def _read_fasta(path: Path, targets: Sequence[str] | None) -> ActivitySplit:
    from Bio import SeqIO
    records, sequences, rows, names = [], [], [], None
    with _open(path) as handle:
        try:
            parsed = list(SeqIO.parse(handle, "fasta"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise UserInputError(f"{path}: not valid FASTA ({str(exc).splitlines()[0]})") from exc
    if not parsed:
        raise UserInputError(f"{path}: no FASTA records (no line starting with '>')")
    for n, entry in enumerate(parsed, start=1):
        record = f"record {entry.id!r} (#{n})"
        pairs: dict[str, str] = {}
        for item in entry.description.split()[1:]:
            match = _KEY_VALUE.match(item)
            if match:
                pairs[match.group(1)] = match.group(2)
            elif _number(item) is not None and "value" not in pairs:
                pairs["value"] = item
        found = [key for key in pairs if _number(pairs[key]) is not None] if not targets else list(targets)
        if not found:
            raise UserInputError(f"{path}: {record}: no value in the header (expected e.g. '>{entry.id} value=1.3' "
                                 f"or '>{entry.id} 1.3')")
        names = found if names is None else names
        row = []
        for key in names:
            if key not in pairs:
                raise UserInputError(f"{path}: {record}: no '{key}=' value in the header (the first record has "
                                     f"{', '.join(names)})")
            value = _number(pairs[key])
            if value is None:
                raise UserInputError(f"{path}: {record}: value {pairs[key]!r} of {key!r} is not a number")
            row.append(value)
        sequences.append(_check_sequence(path, record, str(entry.seq)))
        records.append(entry.id)
        rows.append(row)
    return ActivitySplit(records, sequences, np.array(rows, dtype=np.float64), list(names or []), str(path))


def read_activity_file(path: str | os.PathLike, *, targets: Sequence[str] | None = None,
                       sequence_column: str | None = None) -> ActivitySplit:
    """Read one CSV/TSV or FASTA file of sequences with values (see the module docstring)."""
    path = Path(path)
    split = _read_fasta(path, targets) if _is_fasta(path) else _read_table(path, targets, sequence_column)
    split.file_index = np.zeros(len(split), dtype=np.int64)
    return split


def read_activity_files(paths: Sequence[str | os.PathLike], *, targets: Sequence[str] | None = None,
                        sequence_column: str | None = None) -> ActivitySplit:
    """The rows of several files, in order; every file must have the targets of the first."""
    parts = []
    for index, path in enumerate(paths):
        part = read_activity_file(path, targets=targets or (parts[0].target_names if parts else None),
                                  sequence_column=sequence_column)
        part.file_index = np.full(len(part), index, dtype=np.int64)
        parts.append(part)
    return ActivitySplit([r for p in parts for r in p.records], [s for p in parts for s in p.sequences],
                         np.concatenate([p.values for p in parts]), list(parts[0].target_names),
                         ", ".join(str(p) for p in paths), np.concatenate([p.file_index for p in parts]))


def parse_set(text: str | os.PathLike) -> tuple[str | None, Path]:
    """``"hepg2=a.tsv"`` → ``("hepg2", Path("a.tsv"))``; a plain (or existing) file → ``(None, path)``."""
    text = str(text)
    match = _SET.match(text)
    if match is None or Path(text).exists():
        return None, Path(text)
    return match.group(1), Path(match.group(2))


def read_activity_sets(specs: Sequence[str | os.PathLike], *, targets: Sequence[str] | None = None,
                       sequence_column: str | None = None) -> ActivitySplit:
    """The rows of ``NAME=FILE`` sets: one output per NAME, NaN where a row's set did not measure it."""
    parsed = [parse_set(spec) for spec in specs]
    if all(name is None for name, _ in parsed):
        return read_activity_files([path for _, path in parsed], targets=targets, sequence_column=sequence_column)
    if any(name is None for name, _ in parsed):
        plain = next(str(path) for name, path in parsed if name is None)
        raise UserInputError(f"{plain}: name every --train set (NAME=FILE, e.g. hepg2=a.tsv) or none of them")
    if targets is not None and len(targets) > 1:
        raise UserInputError("with NAME=FILE sets give at most one --target (the value column read in every file)")
    names = list(dict.fromkeys(name for name, _ in parsed))
    seen: dict[str, int] = {}
    records, sequences, blocks, folds = [], [], [], []
    for name, path in parsed:
        part = read_activity_file(path, targets=targets or None, sequence_column=sequence_column)
        if part.values.shape[1] != 1:
            raise UserInputError(f"{path}: {part.values.shape[1]} value columns ({', '.join(part.target_names)}) in the "
                                 f"set {name!r}; name the one to read with --target COL")
        block = np.full((len(part), len(names)), np.nan)
        block[:, names.index(name)] = part.values[:, 0]
        records += [f"{name}:{r}" for r in part.records]
        sequences += part.sequences
        blocks.append(block)
        folds.append(np.full(len(part), seen.get(name, 0), dtype=np.int64))
        seen[name] = seen.get(name, 0) + 1
    return ActivitySplit(records, sequences, np.concatenate(blocks), names,
                         ", ".join(f"{n}={p}" for n, p in parsed), np.concatenate(folds))


def detect_flanks(sequences: Sequence[str], minimum: int = MIN_FLANK) -> tuple[str, str]:
    """The longest shared prefix and suffix (``""`` if under ``minimum`` nt); the element keeps at least 1 nt."""
    if len(sequences) < 2:
        return "", ""
    prefix = os.path.commonprefix(list(sequences))
    suffix = os.path.commonprefix([s[::-1] for s in sequences])[::-1]
    shortest = min(len(s) for s in sequences)
    prefix = prefix if len(prefix) >= minimum else ""
    suffix = suffix if len(suffix) >= minimum else ""
    return prefix, ("" if len(prefix) + len(suffix) >= shortest else suffix)


def strip_all(split: ActivitySplit, flanks: tuple[str, str]) -> ActivitySplit:
    """``split`` with the flanks removed from every sequence that carries them."""
    from bioattn.models.activity import strip_flanks
    sequences = [strip_flanks(s, flanks) for s in split.sequences]
    empty = [i for i, s in enumerate(sequences) if not s]
    if empty:
        raise UserInputError(f"{split.source}: record {split.records[empty[0]]!r}: nothing is left after removing the "
                             f"flanks {flanks[0]!r} / {flanks[1]!r}")
    return ActivitySplit(list(split.records), sequences, split.values, list(split.target_names), split.source,
                         split.file_index)


def element_groups(sequences: Sequence[str]) -> np.ndarray:
    """Group id per sequence, shared by its copies and its reverse complement."""
    ids: dict[str, int] = {}
    return np.array([ids.setdefault(min(s, reverse_complement(s)), len(ids)) for s in sequences], dtype=np.int64)


def group_folds(groups: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` ``(train_index, held_out_index)`` pairs; every group in one fold; groups shuffled by ``seed``."""
    unique = np.unique(groups)
    if len(unique) < k:
        raise UserInputError(f"{len(unique)} distinct elements are too few for {k} folds")
    order = np.random.default_rng(seed).permutation(unique)
    fold_of_group = {g: i % k for i, g in enumerate(order)}
    fold = np.array([fold_of_group[g] for g in groups])
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(k)]


def file_folds(file_index: np.ndarray, groups: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """One fold per ``file_index`` value; with ``groups``, training rows sharing an element with it are dropped."""
    out = []
    for f in np.unique(file_index):
        held = file_index == f
        train = ~held if groups is None else ~held & ~np.isin(groups, groups[held])
        out.append((np.flatnonzero(train), np.flatnonzero(held)))
    return out


def validation_split(split: ActivitySplit, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(fit_index, validation_index)``: about ``fraction`` of the elements (at least 2) held out."""
    groups = element_groups(split.sequences)
    unique = np.random.default_rng(seed).permutation(np.unique(groups))
    if len(unique) < 5:
        raise UserInputError(f"{split.source}: {len(unique)} distinct elements are too few to train on (at least 5: "
                             "some are kept aside to decide when to stop training)")
    take = max(2, int(round(fraction * len(unique))))
    held = np.isin(groups, unique[:take])
    return np.flatnonzero(~held), np.flatnonzero(held)
