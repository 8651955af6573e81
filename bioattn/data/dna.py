"""DNA input: a single-nucleotide tokenizer (IUPAC ambiguity codes become ``N``) and streaming FASTA / CSV readers."""
from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, Sequence

import numpy as np
import torch
from Bio import SeqIO
from Bio.Data.IUPACData import ambiguous_dna_letters
from torch import Tensor

from bioattn.errors import UserInputError

VOCAB: tuple[str, ...] = ("[PAD]", "[CLS]", "[MASK]", "A", "C", "G", "T", "N")
PAD_ID, CLS_ID, MASK_ID, A_ID, C_ID, G_ID, T_ID, N_ID = range(len(VOCAB))
VOCAB_SIZE = len(VOCAB)
FASTA_SUFFIXES = frozenset({".fa", ".fasta", ".fna", ".fas", ".ffn", ".seq"})
CSV_SUFFIXES = frozenset({".csv", ".tsv"})
_GZIP_MAGIC = b"\x1f\x8b"
_AMBIGUITY_CODES = "".join(sorted(set(ambiguous_dna_letters) - set("ACGT")))
_FASTA_LABEL = re.compile(r"(?:^|\s)label=(\S*)")
_INTEGER = re.compile(r"[+-]?\d+")


def _build_encode_table() -> np.ndarray:
    table = np.full(256, -1, dtype=np.int64)
    for letter, token in (("A", A_ID), ("C", C_ID), ("G", G_ID), ("T", T_ID)):
        table[ord(letter)] = table[ord(letter.lower())] = token
    for letter in _AMBIGUITY_CODES:
        table[ord(letter)] = table[ord(letter.lower())] = N_ID
    return table


_ENCODE_TABLE = _build_encode_table()
_COMPLEMENT = torch.tensor([PAD_ID, CLS_ID, MASK_ID, T_ID, G_ID, C_ID, A_ID, N_ID])


def _where(record: str, source: str | os.PathLike | None) -> str:
    return f"{source}: {record}" if source is not None else record


def encode(sequence: str, *, record: str = "sequence", source: str | os.PathLike | None = None,
           offset: int = 0) -> np.ndarray:
    """Token ids ``(L,)`` int64 of one DNA sequence (no [CLS]); ``record``, ``source``, ``offset`` name it in errors."""
    if not isinstance(sequence, str):
        raise UserInputError(f"{_where(record, source)}: sequence must be text, got {type(sequence).__name__}")
    if not sequence:
        raise UserInputError(f"{_where(record, source)}: empty sequence")
    try:
        raw = sequence.encode("ascii")
    except UnicodeEncodeError as exc:
        _raise_bad_character(sequence, exc.start, record, source, offset)
    ids = _ENCODE_TABLE[np.frombuffer(raw, dtype=np.uint8)]
    bad = np.flatnonzero(ids < 0)
    if bad.size:
        _raise_bad_character(sequence, int(bad[0]), record, source, offset)
    return ids


def encode_sequences(sequences: str | Sequence[str], *, max_len: int | None = None) -> list[np.ndarray]:
    """Token ids of each DNA string of ``sequences``; longer than ``max_len`` is an error."""
    if isinstance(sequences, str):
        sequences = [sequences]
    if isinstance(sequences, (bytes, np.ndarray)) or not isinstance(sequences, Sequence):
        raise UserInputError(f"expected a DNA string or a list of them, got {type(sequences).__name__}")
    if len(sequences) == 0:
        raise UserInputError("no sequences given")
    tokens = []
    for index, sequence in enumerate(sequences):
        ids = encode(sequence, record=f"sequence {index}")
        if max_len is not None and len(ids) > max_len:
            raise UserInputError(f"sequence {index}: {len(ids)} nt long; this model accepts at most {max_len} nt "
                                 "(its training length); score longer sequences in windows, as a genome scan")
        tokens.append(ids)
    return tokens


def _raise_bad_character(sequence: str, index: int, record: str, source: str | os.PathLike | None, offset: int) -> None:
    raise UserInputError(f"{_where(record, source)}: invalid character {sequence[index]!r} at position "
                         f"{offset + index + 1}; expected A, C, G, T or an IUPAC ambiguity code "
                         f"({' '.join(_AMBIGUITY_CODES)}), any case")


def decode(ids: Sequence[int] | Tensor | np.ndarray) -> str:
    """Inverse of :func:`encode` for nucleotide tokens; special tokens are skipped."""
    return "".join(VOCAB[int(i)] for i in ids if int(i) >= A_ID)


def collate_tokens(token_arrays: Sequence[np.ndarray | Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad token id arrays into ``ids (B, L_max)`` long and ``padding_mask (B, L_max)`` bool (True = PAD)."""
    if len(token_arrays) == 0:
        raise ValueError("collate_tokens needs at least one sequence")
    lengths = torch.tensor([len(t) for t in token_arrays])
    ids = torch.full((len(token_arrays), int(lengths.max())), PAD_ID, dtype=torch.long)
    for row, tokens in enumerate(token_arrays):
        ids[row, : len(tokens)] = torch.as_tensor(tokens, dtype=torch.long)
    padding_mask = torch.arange(ids.shape[1])[None, :] >= lengths[:, None]
    return ids, padding_mask


def reverse_padded(values: Tensor, padding_mask: Tensor | None = None) -> Tensor:
    """Reverse each right-padded row of ``values (B, L)`` within its length (``padding_mask`` True = PAD, or None)."""
    if padding_mask is None:
        return values.flip(-1)
    lengths = (~padding_mask).sum(-1, keepdim=True)
    positions = torch.arange(values.shape[-1], device=values.device).expand_as(values)
    return values.gather(-1, torch.where(positions < lengths, lengths - 1 - positions, positions))


def reverse_complement_ids(ids: Tensor, padding_mask: Tensor | None = None) -> Tensor:
    """Reverse complement of right-padded token ids ``(B, L)``; padding stays at the right."""
    return reverse_padded(_COMPLEMENT.to(ids.device)[ids], padding_mask)


def strand_average(score: Callable[[Tensor], Tensor], ids: Tensor, padding_mask: Tensor | None = None, *,
                   per_position: bool = False, back: Callable[[Tensor], Tensor] | None = None) -> Tensor:
    """``(score(ids) + score(reverse complement)) / 2``; ``per_position`` / ``back`` map the reverse output back."""
    forward = score(ids)
    reverse = score(reverse_complement_ids(ids, padding_mask))
    if back is not None:
        reverse = back(reverse)
    elif per_position:
        reverse = reverse_padded(reverse, padding_mask)
    return (forward + reverse) / 2


def reverse_complement(sequence: str) -> str:
    """Reverse complement of a DNA string (Biopython's IUPAC-aware complement)."""
    from Bio.Seq import reverse_complement as bio_reverse_complement
    return bio_reverse_complement(sequence)


def gc_content(sequences: Sequence[str]) -> np.ndarray:
    """``(N,)`` fraction of G or C among the A/C/G/T letters of each sequence (0.5 without any)."""
    counts = [(s.count("G") + s.count("C"), s.count("A") + s.count("T")) for s in map(str.upper, sequences)]
    return np.array([gc / (gc + at) if gc + at else 0.5 for gc, at in counts], dtype=np.float64)


@dataclass(frozen=True)
class DNARecord:
    """One input sequence: ``id``, ``sequence`` (as read), optional ``label`` (int or text), ``where`` (for errors)."""
    id: str
    sequence: str
    label: int | str | None = None
    where: str = ""

    def describe(self) -> str:
        """Record name for error messages, e.g. ``record 'seq7' (line 8)``."""
        return f"record {self.id!r} ({self.where})" if self.where else f"record {self.id!r}"

    def tokens(self, source: str | os.PathLike | None = None) -> np.ndarray:
        """Token ids ``(L,)`` of this record (see :func:`encode`)."""
        return encode(self.sequence, record=self.describe(), source=source)


def _open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise UserInputError(f"{path}: file not found")
    if path.is_dir():
        raise UserInputError(f"{path}: is a folder, expected a FASTA or CSV file")
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
        return gzip.open(path, "rb") if magic == _GZIP_MAGIC else open(path, "rb")
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _open_text(path: Path, newline: str | None = None) -> IO[str]:
    return io.TextIOWrapper(_open_binary(path), encoding="utf-8", newline=newline)


_READ_ERRORS: tuple[type[BaseException], ...] = (UnicodeDecodeError, EOFError, zlib.error, OSError, csv.Error)


def _describe_read_error(path: Path, exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not a text file (byte {exc.start} is not UTF-8)"
    if isinstance(exc, EOFError):
        return f"{path}: truncated gzip file (compressed data ended early)"
    if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        return f"{path}: corrupt gzip file ({exc})"
    if isinstance(exc, csv.Error):
        return f"{path}: malformed CSV ({exc})"
    return f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})"


def _first_character(path: Path) -> str:
    try:
        with _open_text(path) as handle:
            while chunk := handle.read(65536):
                stripped = chunk.lstrip()
                if stripped:
                    return stripped[0]
    except _READ_ERRORS as exc:
        raise UserInputError(_describe_read_error(path, exc)) from exc
    return ""


def _format_of(path: Path, first: str) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix in CSV_SUFFIXES:
        return "csv"
    if suffix in FASTA_SUFFIXES or first == ">":
        return "fasta"
    return "sniffed-csv"


def read_records(path: str | os.PathLike, *, labels: bool = False) -> Iterator[DNARecord]:
    """Stream the records of a FASTA or CSV file (plain or gzip); ``labels``: every record needs one."""
    path = Path(path)
    first = _first_character(path)
    if not first:
        raise UserInputError(f"{path}: file is empty (no records)")
    kind = _format_of(path, first)
    reader = _fasta_records(path, labels) if kind == "fasta" else _csv_records(path, labels, sniffed=kind == "sniffed-csv")
    try:
        yield from reader
    except _READ_ERRORS as exc:
        raise UserInputError(_describe_read_error(path, exc)) from exc


def _skip_blank_lines(handle: IO[str]) -> None:
    """Move ``handle`` to its first non-blank line (Biopython rejects blank lines before the first header)."""
    while True:
        position = handle.tell()
        line = handle.readline()
        if not line or line.strip():
            handle.seek(position)
            return


def _fasta_records(path: Path, labels: bool) -> Iterator[DNARecord]:
    with _open_text(path) as handle:
        _skip_blank_lines(handle)
        index = 0
        try:
            for index, record in enumerate(SeqIO.parse(handle, "fasta"), start=1):
                entry = DNARecord(id=record.id or f"#{index}", sequence=str(record.seq), where=f"#{index}")
                if not entry.sequence:
                    raise UserInputError(f"{path}: {entry.describe()}: empty sequence")
                if labels:
                    entry = DNARecord(entry.id, entry.sequence, _fasta_label(path, entry, record.description), entry.where)
                yield entry
        except (UserInputError, UnicodeDecodeError):
            raise
        except ValueError as exc:  # Biopython: text before the first header
            problem = f"after record #{index}: {str(exc).splitlines()[0]}" if index else "text before the first '>' header line"
            raise UserInputError(f"{path}: not valid FASTA: {problem}") from exc
        if index == 0:
            raise UserInputError(f"{path}: no FASTA records (no line starting with '>')")


def _csv_records(path: Path, labels: bool, sniffed: bool) -> Iterator[DNARecord]:
    delimiter = "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","
    with _open_text(path, newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        header = [name.strip().lower() for name in next(reader, [])]
        if "sequence" not in header:
            shown = ",".join(header)[:80]
            problem = "neither FASTA (no '>' header line) nor CSV with" if sniffed else "CSV without"
            raise UserInputError(f"{path}: {problem} a 'sequence' column (first line: {shown!r})")
        seq_col = header.index("sequence")
        id_col = header.index("id") if "id" in header else None
        if labels and "label" not in header:
            raise UserInputError(f"{path}: CSV has no 'label' column (header: {','.join(header)})")
        label_col = header.index("label") if labels else None
        count = 0
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            count += 1
            record_id = row[id_col].strip() if id_col is not None and id_col < len(row) else str(count)
            sequence = row[seq_col].strip() if seq_col < len(row) else ""
            entry = DNARecord(id=record_id, sequence=sequence, where=f"line {reader.line_num}")
            if not sequence:
                raise UserInputError(f"{path}: {entry.describe()}: empty sequence")
            label = _parse_label(path, entry, row, label_col) if label_col is not None else None
            yield DNARecord(entry.id, entry.sequence, label, entry.where)
        if count == 0:
            raise UserInputError(f"{path}: CSV has a header but no records")


def _parse_label(path: Path, entry: DNARecord, row: list[str], column: int) -> int | str:
    text = row[column].strip() if column < len(row) else ""
    if not text:
        raise UserInputError(f"{path}: {entry.describe()}: missing label (empty 'label' cell)")
    return _label_value(text)


def _fasta_label(path: Path, entry: DNARecord, description: str) -> int | str:
    after_id = description.split(None, 1)[1:]
    found = _FASTA_LABEL.findall(after_id[0] if after_id else "")
    if len(found) != 1 or not found[0]:
        problem = "no 'label=VALUE' field" if not found else "an empty label" if len(found) == 1 else "several 'label=' fields"
        raise UserInputError(f"{path}: {entry.describe()}: {problem} in the FASTA description "
                             f"(expected e.g. '>{entry.id} label=1')")
    return _label_value(found[0])


def _label_value(text: str) -> int | str:
    return int(text) if _INTEGER.fullmatch(text) else text

