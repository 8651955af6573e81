"""Variants to score: read from a VCF (cyvcf2) or a TSV, split per alternative allele and checked against the
reference FASTA (pyfaidx).

Every record is named in errors as ``FILE:LINE`` (the line of the file, 1-based, header lines included) and
``CHROM:POS``. A multi-allelic record becomes one :class:`Variant` per alternative allele. Indels (REF or ALT longer
than one base, symbolic ``<DEL>``, ``*``) are refused by name, or counted and skipped with ``skip_indels``. A REF
that differs from the reference, a contig missing from the FASTA or a position outside it is an error naming the
record, or counted and skipped with ``skip_invalid``.

TSV input: a header with the columns ``chrom pos ref alt`` (also accepted: ``#CHROM``/``element``,
``POS``/``position``, ``REF``, ``ALT``; positions 1-based; ``alt`` may list alleles separated by commas); other
columns are ignored (``effect`` / ``effect_size`` and ``conf`` / ``confidence`` are kept as measured labels).
"""
from __future__ import annotations

import csv
import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from bioattn.errors import UserInputError

VCF_SUFFIXES = (".vcf", ".vcf.gz", ".vcf.bgz", ".bcf")
_ALIASES = {
    "chrom": ("chrom", "#chrom", "chr", "chromosome", "element", "contig"),
    "pos": ("pos", "position"),
    "ref": ("ref",),
    "alt": ("alt",),
    "effect": ("effect", "effect_size"),
    "conf": ("conf", "confidence"),
}
_BASES = frozenset("ACGT")


@dataclass(frozen=True)
class Variant:
    """One alternative allele of one input record: ``pos`` is 1-based, ``ref``/``alt`` upper case; ``record``:
    index of the input record (0-based, in file order; several variants share it when multi-allelic); ``allele``:
    which alternative of that record (0-based); ``where``: ``FILE:LINE (CHROM:POS)`` for messages."""

    chrom: str
    pos: int
    ref: str
    alt: str
    record: int
    allele: int
    where: str
    effect: float = float("nan")
    conf: float = float("nan")

    @property
    def is_snv(self) -> bool:
        return len(self.ref) == 1 and len(self.alt) == 1 and self.ref in _BASES and self.alt in _BASES


@dataclass
class VariantSet:
    """The variants read from one file, and what was skipped (by reason: ``indel``, ``invalid``)."""

    variants: list[Variant]
    source: str
    records: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {"indel": 0, "invalid": 0})

    def __len__(self) -> int:
        return len(self.variants)


def is_vcf(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(VCF_SUFFIXES)


def _raw_records(path: Path) -> Iterator[tuple[int, str, int, str, list[str], dict[str, Any]]]:
    """``(line, chrom, pos, ref, alts, labels)`` of every record of a VCF (cyvcf2) or TSV."""
    if is_vcf(path):
        yield from _vcf_records(path)
    else:
        yield from _tsv_records(path)


def _opener(path: Path) -> Any:
    with open(path, "rb") as handle:
        return gzip.open if handle.read(2) == b"\x1f\x8b" else open


def _header_lines(path: Path) -> int:
    opener = _opener(path)
    count = 0
    with opener(path, "rt") as handle:
        for line in handle:
            if not line.startswith("#"):
                break
            count += 1
    return count


def _vcf_records(path: Path) -> Iterator[tuple[int, str, int, str, list[str], dict[str, Any]]]:
    from cyvcf2 import VCF

    first_line = _header_lines(path) + 1
    try:
        reader = VCF(str(path), lazy=True)
    except (OSError, Exception) as exc:  # cyvcf2 raises OSError / Exception for unreadable files
        raise UserInputError(f"{path}: not a readable VCF ({exc})") from exc
    try:
        known = {line.info().get("ID") for line in reader.header_iter() if line.type == "INFO"}
        for index, record in enumerate(reader):
            labels = {}
            for key, name in (("EFFECT", "effect"), ("CONF", "conf")):
                if key in known:
                    value = record.INFO.get(key)
                    labels[name] = float(value) if value is not None else float("nan")
            yield first_line + index, record.CHROM, int(record.POS), str(record.REF), list(record.ALT), labels
    finally:
        reader.close()


def _column(header: list[str], name: str, path: Path, required: bool = True) -> int | None:
    lowered = [h.strip().lower() for h in header]
    for alias in _ALIASES[name]:
        if alias in lowered:
            return lowered.index(alias)
    if required:
        raise UserInputError(f"{path}: line 1: no {name!r} column (a variant table needs chrom, pos, ref and alt "
                             f"columns; found {', '.join(header)})")
    return None


def _tsv_records(path: Path) -> Iterator[tuple[int, str, int, str, list[str], dict[str, Any]]]:
    with _opener(path)(path, "rt", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        header = next(rows, None)
        if header is None:
            raise UserInputError(f"{path}: empty file; expected a VCF or a TSV with chrom, pos, ref, alt columns")
        cols = {name: _column(header, name, path, required=name in ("chrom", "pos", "ref", "alt")) for name in _ALIASES}
        for line, row in enumerate(rows, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) < len(header):
                raise UserInputError(f"{path}:{line}: {len(row)} columns, the header has {len(header)}")
            try:
                pos = int(row[cols["pos"]])
            except ValueError:
                raise UserInputError(f"{path}:{line}: position {row[cols['pos']]!r} is not an integer") from None
            labels = {}
            for name in ("effect", "conf"):
                if cols[name] is not None:
                    try:
                        labels[name] = float(row[cols[name]])
                    except ValueError:
                        raise UserInputError(f"{path}:{line}: {header[cols[name]]} {row[cols[name]]!r} is not a number") from None
            yield line, row[cols["chrom"]], pos, row[cols["ref"]], row[cols["alt"]].split(","), labels


def read_variants(path: str | os.PathLike, reference: Any, *, skip_indels: bool = False,
                  skip_invalid: bool = False) -> VariantSet:
    """The variants of ``path`` (VCF or TSV), checked against ``reference`` (a :class:`pyfaidx.Fasta`)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    lengths = {name: len(reference[name]) for name in reference.keys()}
    out = VariantSet([], str(path))
    for index, (line, chrom, pos, ref, alts, labels) in enumerate(_raw_records(path)):
        out.records += 1
        where = f"{path.name}:{line} ({chrom}:{pos})"
        ref = ref.upper()
        problem = check_position(chrom, pos, ref, lengths, reference)
        if problem is not None:
            if skip_invalid:
                out.skipped["invalid"] += len(alts)
                continue
            raise UserInputError(f"{where}: {problem}; pass --skip-invalid to count and skip such records")
        for allele, alt in enumerate(alts):
            variant = Variant(chrom, pos, ref, str(alt).upper(), index, allele, where, **labels)
            if not variant.is_snv:
                if skip_indels:
                    out.skipped["indel"] += 1
                    continue
                raise UserInputError(f"{where}: {ref}>{alt} is not a single-nucleotide variant (indels and symbolic "
                                     "alleles are not scored); pass --skip-indels to count and skip them")
            out.variants.append(variant)
    if out.records == 0:
        raise UserInputError(f"{path}: no variant records")
    return out


def check_position(chrom: str, pos: int, ref: str, lengths: dict[str, int], reference: Any) -> str | None:
    """Why ``chrom:pos`` with ``ref`` does not fit the reference (``None`` when it does)."""
    if chrom not in lengths:
        names = list(lengths)
        return (f"contig {chrom!r} is not in the reference FASTA (it has {', '.join(names[:5])}"
                f"{', ...' if len(names) > 5 else ''})")
    if not 1 <= pos <= lengths[chrom] - len(ref) + 1:
        return f"position {pos} is outside {chrom} (1-{lengths[chrom]})"
    found = str(reference[chrom][pos - 1 : pos - 1 + len(ref)]).upper()
    if found != ref:
        return f"REF {ref} does not match the reference base {found} at {chrom}:{pos}"
    return None


def variants_from_table(rows: Sequence[tuple[str, int, str, str]], reference: Any) -> VariantSet:
    """Variants from ``(chrom, pos, ref, alt)`` tuples (the Python API), checked like a file's records."""
    lengths = {name: len(reference[name]) for name in reference.keys()}
    out = VariantSet([], "<table>")
    for index, (chrom, pos, ref, alt) in enumerate(rows):
        out.records += 1
        where = f"variant {index} ({chrom}:{pos})"
        problem = check_position(str(chrom), int(pos), str(ref).upper(), lengths, reference)
        if problem is not None:
            raise UserInputError(f"{where}: {problem}")
        for allele, one in enumerate(str(alt).split(",")):
            variant = Variant(str(chrom), int(pos), str(ref).upper(), one.upper(), index, allele, where)
            if not variant.is_snv:
                raise UserInputError(f"{where}: {ref}>{one} is not a single-nucleotide variant")
            out.variants.append(variant)
    return out


def labels_of(variants: Sequence[Variant]) -> tuple[np.ndarray, np.ndarray]:
    """Measured ``(effect, conf)`` arrays of ``variants`` (NaN where not given)."""
    return (np.array([v.effect for v in variants], dtype=np.float64),
            np.array([v.conf for v in variants], dtype=np.float64))
