"""Multiple sequence alignments: readers (A3M, A2M, FASTA, Stockholm, Clustal, PSICOV), tokenizer, weights."""
from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from Bio import AlignIO
from Bio.SeqIO.FastaIO import SimpleFastaParser

from bioattn.errors import UserInputError

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
GAP = "-"
UNKNOWN = "X"
ALPHABET = AMINO_ACIDS + GAP + UNKNOWN
AMBIGUOUS = "BZJUO"
FORMATS = ("a3m", "a2m", "fasta", "stockholm", "clustal", "psicov")
_EXTENSIONS = {"a3m": "a3m", "a2m": "a2m", "fasta": "fasta", "fa": "fasta", "fas": "fasta", "afa": "fasta",
               "faa": "fasta", "mfa": "fasta", "sto": "stockholm", "stk": "stockholm", "sth": "stockholm",
               "stockholm": "stockholm", "clustal": "clustal", "clw": "clustal", "psicov": "psicov"}
_ALLOWED = set(ALPHABET + AMBIGUOUS)


@dataclass(frozen=True)
class MSA:
    """An alignment: upper-case ``sequences`` over :data:`ALPHABET` (+ ambiguity codes), all of length L."""
    ids: tuple[str, ...]
    sequences: tuple[str, ...]
    source: str = "<memory>"

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.sequences):
            raise ValueError(f"{self.source}: {len(self.ids)} ids for {len(self.sequences)} sequences")

    @classmethod
    def from_sequences(cls, sequences: Sequence[str], ids: Sequence[str] | None = None, source: str = "<memory>") -> "MSA":
        """Build and validate an alignment from aligned strings (upper-cased, ``.`` read as gap)."""
        ids = list(ids) if ids is not None else [f"seq{i}" for i in range(len(sequences))]
        records = [_Record(name, seq.upper().replace(".", GAP), None) for name, seq in zip(ids, sequences)]
        return _validated(records, source)

    @property
    def depth(self) -> int:
        """N, the number of sequences."""
        return len(self.sequences)

    @property
    def length(self) -> int:
        """L, the number of columns."""
        return len(self.sequences[0])

    def select(self, rows: Iterable[int]) -> "MSA":
        """The alignment restricted to ``rows`` (in that order)."""
        rows = [int(r) for r in rows]
        return MSA(tuple(self.ids[r] for r in rows), tuple(self.sequences[r] for r in rows), self.source)

    def select_columns(self, columns: Sequence[int]) -> "MSA":
        """The alignment restricted to ``columns`` (in that order)."""
        cols = np.asarray(columns, dtype=np.int64)
        grid = np.frombuffer("".join(self.sequences).encode("ascii"), dtype=np.uint8).reshape(self.depth, self.length)
        kept = grid[:, cols]
        return MSA(self.ids, tuple(row.tobytes().decode("ascii") for row in kept), self.source)

    def with_query_first(self, row: int) -> "MSA":
        """Move ``row`` to index 0 (the query position of MSA models), keeping the others in order."""
        order = [row] + [r for r in range(self.depth) if r != row]
        return self.select(order)

    def find_row(self, sequence: str) -> int | None:
        """Index of the first row whose ungapped sequence equals ``sequence`` (case-insensitive), or None."""
        target = sequence.upper()
        return next((index for index, row in enumerate(self.sequences) if row.replace(GAP, "") == target), None)


@dataclass
class _Record:
    name: str
    sequence: str
    line: int | None  # 1-based line of the record in its file (header line for FASTA)
    hint: str = ""  # appended to a ragged-row message


def detect_format(path: str | os.PathLike) -> str:
    """Alignment format from the file name (``.gz`` ignored), sniffing ``.aln`` (Clustal or PSICOV) and unknown ones."""
    name = Path(path).name.lower().removesuffix(".gz")
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    first = _first_line(path)
    if first.startswith("# STOCKHOLM"):
        return "stockholm"
    if first.split(" ")[0] in ("CLUSTAL", "MUSCLE", "PROBCONS"):
        return "clustal"
    if first.startswith(">"):
        return "fasta"
    return "psicov"


def read_msa(path: str | os.PathLike, fmt: str | None = None) -> MSA:
    """Read an alignment file into an :class:`MSA`; ``fmt``: one of :data:`FORMATS` or None (detect)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: alignment file not found")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise UserInputError(f"{path}: unknown alignment format {fmt!r}; expected one of {', '.join(FORMATS)}")
    text = read_text(path)
    if fmt in ("a3m", "a2m", "fasta"):
        records = _parse_fasta(text, drop_insertions=fmt != "fasta")
    elif fmt == "psicov":
        records = _parse_psicov(text)
    else:
        records = _parse_interleaved(text, fmt, path)
    return _validated(records, str(path))


def read_text(path: Path, what: str = "alignment", encoding: str | None = "ascii") -> str:
    """The text of ``path``, gunzipped if it is gzip; an unreadable file is a :class:`UserInputError`."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rt", encoding=encoding) if gzipped else open(path, encoding=encoding)) as handle:
            return handle.read()
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise UserInputError(f"{path}: not a readable text {what} ({exc})") from exc


def _first_line(path: str | os.PathLike) -> str:
    return next((line.strip() for line in read_text(Path(path)).splitlines() if line.strip()), "")


def _parse_fasta(text: str, drop_insertions: bool) -> list[_Record]:
    header_lines = [n for n, line in enumerate(text.splitlines(), start=1) if line.startswith(">")]
    records = []
    for (title, seq), line in zip(SimpleFastaParser(io.StringIO(text)), header_lines):
        hint = ""
        if drop_insertions:
            seq = "".join(c for c in seq if not (c.islower() or c == "."))
        elif any(c.islower() for c in seq):
            hint = "; if this is an A3M file, name it *.a3m so lower-case insertions are dropped"
        records.append(_Record(title.split(None, 1)[0] if title else f"line{line}", seq.upper().replace(".", GAP), line, hint))
    if not records and text.strip():
        raise UserInputError("no '>' header found: not a FASTA/A2M/A3M alignment")
    return records


def _parse_psicov(text: str) -> list[_Record]:
    return [_Record(f"row{index}", line.strip().upper().replace(".", GAP), number) for index,
            (number, line) in enumerate((n, l) for n, l in enumerate(text.splitlines(), start=1) if l.strip())]


def _parse_interleaved(text: str, fmt: str, path: Path) -> list[_Record]:
    """Stockholm / Clustal through Biopython's AlignIO; on a parse failure, find the ragged record by line."""
    try:
        alignment = AlignIO.read(io.StringIO(text), fmt)
    except (ValueError, AssertionError) as exc:
        ragged = _ragged_interleaved_record(text)
        if ragged:
            raise UserInputError(f"{path}, {ragged}") from exc
        raise UserInputError(f"{path}: not a valid {fmt} alignment ({exc or type(exc).__name__})") from exc
    first_lines = _first_line_of_ids(text)
    names = [record.id for record in alignment]
    rows = [str(record.seq) for record in alignment]
    if fmt == "stockholm" and rows:
        rows = _drop_stockholm_inserts(rows, alignment.column_annotations.get("reference_annotation"))
    return [_Record(name, row.upper().replace(".", GAP), first_lines.get(name)) for name, row in zip(names, rows)]


def _drop_stockholm_inserts(rows: list[str], reference: str | None) -> list[str]:
    grid = np.array([list(row) for row in rows])
    keep = np.array([c not in ".-" for c in reference]) if reference is not None else ~np.char.islower(grid).any(axis=0)
    return ["".join(row) for row in grid[:, keep]]


def _interleaved_rows(text: str) -> Iterable[tuple[int, str, str]]:
    """(line number, id, sequence chunk) of the sequence lines of a Stockholm/Clustal file."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line[0] in "#/ \t" or line.startswith(("CLUSTAL", "MUSCLE", "PROBCONS")):
            continue
        fields = line.split()
        if len(fields) >= 2:
            yield number, fields[0], fields[1]


def _first_line_of_ids(text: str) -> dict[str, int]:
    return {name: number for number, name, _ in reversed(list(_interleaved_rows(text)))}


def _ragged_interleaved_record(text: str) -> str | None:
    lengths: dict[str, int] = {}
    last_line: dict[str, int] = {}
    for number, name, chunk in _interleaved_rows(text):
        lengths[name] = lengths.get(name, 0) + len(chunk)
        last_line[name] = number
    if not lengths:
        return None
    expected = next(iter(lengths.values()))
    for name, length in lengths.items():
        if length != expected:
            return (f"line {last_line[name]} (record {name!r}): {length} aligned columns, but the first record has "
                    f"{expected} (ragged alignment)")
    return None


def _where(source: str, record: _Record) -> str:
    line = f", line {record.line}" if record.line is not None else ""
    return f"{source}{line} (record {record.name!r})"


def _validated(records: list[_Record], source: str) -> MSA:
    if not records:
        raise UserInputError(f"{source}: no sequences (empty alignment)")
    expected = len(records[0].sequence)
    for record in records:
        if not record.sequence:
            raise UserInputError(f"{_where(source, record)}: empty sequence")
        bad = next((c for c in record.sequence if c not in _ALLOWED), None)
        if bad is not None:
            column = record.sequence.index(bad) + 1
            raise UserInputError(f"{_where(source, record)}: character {bad!r} at aligned column {column} is not an "
                                 f"amino acid; allowed: {AMINO_ACIDS}, '-' gap, X and {AMBIGUOUS} (read as unknown)")
        if len(record.sequence) != expected:
            raise UserInputError(f"{_where(source, record)}: {len(record.sequence)} aligned columns, but the first "
                                 f"record has {expected} (ragged alignment){record.hint}")
    return MSA(tuple(r.name for r in records), tuple(r.sequence for r in records), source)


class MSATokenizer:
    """Aligned rows ↔ ``(N, L)`` int64 token ids: :data:`ALPHABET` (0..21), then ``pad``, ``mask`` (decoded ``#``)."""
    alphabet = ALPHABET
    gap_id = ALPHABET.index(GAP)
    unknown_id = ALPHABET.index(UNKNOWN)
    pad_id = len(ALPHABET)
    mask_id = len(ALPHABET) + 1
    vocab_size = len(ALPHABET) + 2

    def __init__(self) -> None:
        table = np.full(256, 255, dtype=np.uint8)
        for index, letter in enumerate(ALPHABET):
            table[ord(letter)] = table[ord(letter.lower())] = index
        for letter in AMBIGUOUS:
            table[ord(letter)] = table[ord(letter.lower())] = self.unknown_id
        table[ord(".")] = self.gap_id
        self._table = table

    def encode(self, msa: MSA | Sequence[str]) -> torch.Tensor:
        """Token ids ``(N, L)`` of an :class:`MSA` or of equal-length aligned strings."""
        sequences = msa.sequences if isinstance(msa, MSA) else list(msa)
        source = msa.source if isinstance(msa, MSA) else "<sequences>"
        if not sequences:
            raise UserInputError(f"{source}: no sequences to encode (empty alignment)")
        length = len(sequences[0])
        for index, seq in enumerate(sequences):
            if len(seq) != length:
                raise UserInputError(f"{source}, record {index}: length {len(seq)} != {length} (ragged alignment)")
        try:
            raw = np.frombuffer("".join(sequences).encode("ascii"), dtype=np.uint8)
        except UnicodeEncodeError as exc:
            raise UserInputError(f"{source}: non-ASCII character in the alignment") from exc
        ids = self._table[raw]
        if (ids == 255).any():
            flat = int(np.argmax(ids == 255))
            row, col = divmod(flat, length)
            raise UserInputError(f"{source}, record {row}: character {chr(raw[flat])!r} at column {col + 1} is not in "
                                 f"the alphabet {ALPHABET}")
        return torch.from_numpy(ids.reshape(len(sequences), length).astype(np.int64))

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """Strings from token ids ``(N, L)``."""
        symbols = np.array(list(ALPHABET) + ["", "#"])
        return ["".join(symbols[row]) for row in tokens.detach().cpu().numpy()]


def one_hot(tokens: torch.Tensor, num_states: int = len(ALPHABET)) -> torch.Tensor:
    """``(N, L)`` token ids → ``(N, L * num_states)`` float32 one-hot rows (ids ≥ num_states are all-zero)."""
    n, length = tokens.shape
    eye = torch.eye(num_states + 1, dtype=torch.float32)[:, :num_states]
    return eye[tokens.clamp(max=num_states)].reshape(n, length * num_states)


def sequence_weights(tokens: torch.Tensor, identity: float = 0.8, chunk_size: int = 2048) -> torch.Tensor:
    """``(N,)`` weights: 1 / number of rows (itself included) at ≥ ``identity`` fractional identity (gaps count)."""
    if not 0.0 < identity <= 1.0:
        raise ValueError(f"identity must be in (0, 1], got {identity}")
    distinct, inverse, copies = torch.unique(tokens, dim=0, return_inverse=True, return_counts=True)
    threshold = identity * tokens.shape[1] - 1e-4
    neighbours = torch.zeros(len(distinct))
    right = one_hot(distinct).T
    for start, block in zip(range(0, len(distinct), chunk_size), distinct.split(chunk_size)):
        neighbours[start:start + len(block)] = ((one_hot(block) @ right) >= threshold).float() @ copies.float()
    return 1.0 / neighbours[inverse]


def subsample(tokens: torch.Tensor, num: int, method: str = "random", *, seed: int = 0,
              keep_first: bool = True) -> torch.Tensor:
    """Row indices ``(min(num, N),)`` of ``tokens (N, L)``: ``"random"`` or greedy ``"diversity"`` (Hamming)."""
    if method not in ("random", "diversity"):
        raise ValueError(f"method must be 'random' or 'diversity', got {method!r}")
    if num < 1:
        raise ValueError(f"num must be ≥ 1, got {num}")
    n = tokens.shape[0]
    if num >= n:
        return torch.arange(n)
    if method == "random":
        generator = torch.Generator().manual_seed(seed)
        if keep_first:
            return torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(n - 1, generator=generator)[: num - 1]])
        return torch.randperm(n, generator=generator)[:num]
    chosen = [0]
    distance_sum = (tokens != tokens[0]).sum(dim=1).float()
    distance_sum[0] = -1.0
    for _ in range(num - 1):
        nxt = int(torch.argmax(distance_sum))
        chosen.append(nxt)
        distance_sum += (tokens != tokens[nxt]).sum(dim=1).float()
        distance_sum[chosen] = -1.0
    return torch.tensor(chosen)
