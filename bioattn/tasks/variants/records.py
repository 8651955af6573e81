"""Variants to score: read from a VCF (cyvcf2, through :mod:`bioattn.tasks.variants.vcf`) or a TSV, split per
alternative allele and checked against the reference FASTA (pyfaidx).

Records are named in errors as ``FILE:LINE (CHROM:POS)``. Scored: SNVs, multi-base substitutions and deletions and
insertions of up to :data:`MAX_INDEL` nt beyond the VCF's padding base (:attr:`Variant.kind`); every other allele
is an error, or skipped and kept as a :class:`Skipped` with one of :data:`REASONS`. A TSV has the columns
``chrom pos ref alt`` (aliases in ``_ALIASES``), optionally ``id``, ``effect``, ``conf`` and ``cell_type``; a VCF
gives the last three as the INFO fields ``EFFECT``, ``CONF`` and ``CELL_TYPE``.
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from bioattn.errors import UserInputError
from bioattn.tasks.variants.vcf import _text_opener, vcf_rows

VCF_SUFFIXES = (".vcf", ".vcf.gz", ".vcf.bgz", ".bcf")
_ALIASES = {"chrom": ("chrom", "#chrom", "chr", "chromosome", "element", "contig"), "pos": ("pos", "position"),
            "ref": ("ref",), "alt": ("alt",), "id": ("id", "variant_id"), "effect": ("effect", "effect_size"),
            "conf": ("conf", "confidence"), "cell_type": ("cell_type", "celltype")}
_BASES = frozenset("ACGT")
#: Why an allele is not scored (the keys of :attr:`VariantSet.skipped`).
REASONS = ("indel", "ambiguous", "symbolic", "too_long", "invalid", "duplicate")
#: The longest deletion, insertion or substitution scored, in nt beyond the VCF's padding base.
MAX_INDEL = 20
#: Reasons of :func:`unscorable` that ``skip_indels`` also skips.
INDEL_LIKE = ("symbolic", "too_long")


@dataclass(frozen=True)
class Variant:
    """One alternative allele of one input record: ``pos`` 1-based, ``ref``/``alt`` upper case; ``record`` and
    ``allele``: 0-based indices of the record and of its alternative; ``where``: ``FILE:LINE (CHROM:POS)``."""

    chrom: str
    pos: int
    ref: str
    alt: str
    record: int
    allele: int
    where: str
    effect: float = float("nan")
    conf: float = float("nan")
    vcf_id: str = ""
    cell_type: str = ""

    @property
    def id(self) -> str:
        """The VCF's ID (a TSV's ``id``), else ``chrom:pos:ref:alt``."""
        return self.vcf_id or f"{self.chrom}:{self.pos}:{self.ref}:{self.alt}"

    @property
    def is_snv(self) -> bool:
        return len(self.ref) == 1 and len(self.alt) == 1 and self.ref in _BASES and self.alt in _BASES

    @property
    def is_indel(self) -> bool:
        """Whether the allele changes the length (a deletion or an insertion)."""
        return len(self.ref) != len(self.alt)

    @property
    def kind(self) -> str:
        """``snv``, ``mnv`` (REF and ALT of one length > 1), ``deletion`` (ALT shorter) or ``insertion``."""
        if len(self.ref) == len(self.alt):
            return "snv" if len(self.ref) == 1 else "mnv"
        return "deletion" if len(self.alt) < len(self.ref) else "insertion"


def _symbolic(alt: str) -> str | None:
    """Why ``alt`` is not a sequence of bases (None when it is)."""
    if alt in ("", "."):
        return "ALT . names no alternative allele to score"
    if alt == "*":
        return "ALT * stands for a deletion overlapping this position (score that deletion's own record)"
    if alt.startswith("<"):
        return f"ALT {alt} is a symbolic allele, its sequence not in the VCF"
    if "[" in alt or "]" in alt or alt.startswith(".") or alt.endswith("."):
        return f"ALT {alt} is a breakend (a structural variant's junction), not a sequence to score"
    if not alt.isalpha():
        return f"ALT {alt!r} is not a sequence of bases"
    return None


def changed_length(ref: str, alt: str) -> int:
    """The longer of REF and ALT in nt, less the VCF's padding base."""
    padded = len(ref) != len(alt) and ref[:1] == alt[:1]
    return max(len(ref), len(alt)) - padded


def unscorable(ref: str, alt: str) -> tuple[str, str] | None:
    """``(reason, detail)`` when ``ref>alt`` cannot be scored (``symbolic``, ``ambiguous`` or ``too_long``), else
    None."""
    if len(ref) == 1 and len(alt) == 1 and ref in _BASES and alt in _BASES:
        return None
    symbolic = _symbolic(alt) if ref.isalpha() else f"REF {ref!r} is not a sequence of bases"
    if symbolic is not None:
        return "symbolic", symbolic
    if not (set(ref) <= _BASES and set(alt) <= _BASES):
        if len(ref) == 1 and len(alt) == 1:
            odd = " and ".join(f"{what} {base}" for what, base in (("REF", ref), ("ALT", alt)) if base not in _BASES)
            return "ambiguous", f"{odd} is not a base A, C, G or T (an N or IUPAC ambiguity code cannot be scored)"
        odd = " and ".join(f"{what} {allele}" for what, allele in (("REF", ref), ("ALT", alt))
                           if not set(allele) <= _BASES)
        letters = "".join(sorted(set(ref + alt) - _BASES))
        return "ambiguous", (f"{odd} has a letter that is not a base A, C, G or T ({letters}: an N or IUPAC "
                             "ambiguity code cannot be scored)")
    size = changed_length(ref, alt)
    if size > MAX_INDEL:
        what = ("deletion" if len(alt) < len(ref) else "insertion") if len(ref) != len(alt) else "substitution"
        return "too_long", (f"{ref}>{alt} is a {size}-nt {what}; deletions, insertions and substitutions of up to "
                            f"{MAX_INDEL} nt are scored")
    return None


@dataclass(frozen=True)
class Skipped:
    """An allele not scored: ``reason`` one of :data:`REASONS`, ``detail`` in words, the rest as in
    :class:`Variant`."""

    chrom: str
    pos: int
    ref: str
    alt: str
    reason: str
    detail: str
    where: str
    record: int
    allele: int
    vcf_id: str = ""

    @property
    def id(self) -> str:
        return self.vcf_id or f"{self.chrom}:{self.pos}:{self.ref}:{self.alt}"


#: Columns of a skipped-records table (:func:`skipped_rows`).
SKIPPED_COLUMNS = ("id", "chrom", "pos", "ref", "alt", "reason", "detail", "record")


@dataclass
class VariantSet:
    """The variants read from one file; ``skipped``: counts by reason, ``skipped_records``: each :class:`Skipped`."""

    variants: list[Variant]
    source: str
    records: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    skipped_records: list[Skipped] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.variants)

    def skip(self, item: Skipped) -> None:
        self.skipped[item.reason] = self.skipped.get(item.reason, 0) + 1
        self.skipped_records.append(item)


def skipped_rows(found: VariantSet) -> list[tuple[Any, ...]]:
    """One row per skipped allele, the columns of :data:`SKIPPED_COLUMNS`."""
    return [(s.id, s.chrom, s.pos, s.ref, s.alt, s.reason, s.detail, s.where) for s in found.skipped_records]


def is_vcf(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(VCF_SUFFIXES)


def _vcf_records(path: Path) -> Iterator[tuple[int, str, int, str, list[str], dict[str, Any], str]]:
    known: set[str] = set()
    on_open = lambda reader: known.update(line.info().get("ID") for line in reader.header_iter() if line.type == "INFO")
    for line, record in vcf_rows(path, on_open):
        labels = {}
        for key, name in (("EFFECT", "effect"), ("CONF", "conf")):
            if key in known:
                value = record.INFO.get(key)
                labels[name] = float(value) if value is not None else float("nan")
        if "CELL_TYPE" in known:
            value = record.INFO.get("CELL_TYPE")
            if value is not None and str(value).strip() not in ("", "."):
                labels["cell_type"] = str(value).strip()
        yield line, record.CHROM, int(record.POS), str(record.REF), list(record.ALT), labels, record.ID or ""


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
    with _text_opener(path)(path, "rt", newline="") as handle:
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
            if cols["cell_type"] is not None and row[cols["cell_type"]].strip() not in ("", ".", "NA"):
                labels["cell_type"] = row[cols["cell_type"]].strip()
            name = row[cols["id"]].strip() if cols["id"] is not None else ""
            yield line, row[cols["chrom"]], pos, row[cols["ref"]], row[cols["alt"]].split(","), labels, name


def read_variants(path: str | os.PathLike, reference: Any, *, skip_indels: bool = False,
                  skip_invalid: bool = False, keep_duplicates: bool = False) -> VariantSet:
    """The variants of ``path`` (VCF or TSV), checked against ``reference`` (a :class:`pyfaidx.Fasta`); a repeated
    variant is kept once unless ``keep_duplicates``."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    lengths = {name: len(reference[name]) for name in reference.keys()}
    out = VariantSet([], str(path))
    first: dict[tuple[str, int, str, str], str] = {}
    records = _vcf_records(path) if is_vcf(path) else _tsv_records(path)
    for index, (line, chrom, pos, ref, alts, labels, name) in enumerate(records):
        out.records += 1
        where = f"{path.name}:{line} ({chrom}:{pos})"
        ref = ref.upper()
        problem = check_position(chrom, pos, ref, lengths, reference)
        if problem is not None:
            if skip_invalid:
                for allele, alt in enumerate(alts):
                    out.skip(Skipped(chrom, pos, ref, str(alt).upper(), "invalid", problem, where, index, allele, name))
                continue
            raise UserInputError(f"{where}: {problem}; pass --skip-invalid to count and skip such records")
        for allele, alt in enumerate(alts or ["."]):  # cyvcf2 reads ALT . as no alleles
            variant = Variant(chrom, pos, ref, str(alt).upper(), index, allele, where, **labels, vcf_id=name)
            why = unscorable(variant.ref, variant.alt)
            if why is None and skip_indels and variant.is_indel:
                why = ("indel", f"{variant.ref}>{variant.alt} is an indel (--skip-indels skips them)")
            if why is not None:
                reason, detail = why
                if reason == "indel" or skip_invalid or (skip_indels and reason in INDEL_LIKE):
                    out.skip(Skipped(chrom, pos, ref, variant.alt, reason, detail, where, index, allele, name))
                    continue
                raise UserInputError(f"{where}: {detail}; pass --skip-invalid to count and skip such records")
            key = (chrom, pos, variant.ref, variant.alt)
            if key in first and not keep_duplicates:
                out.skip(Skipped(chrom, pos, ref, variant.alt, "duplicate", f"the same variant as {first[key]} "
                                 "(scored once)", where, index, allele, name))
                continue
            first.setdefault(key, where)
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
            why = unscorable(variant.ref, variant.alt)
            if why is not None:
                raise UserInputError(f"{where}: {why[1]}")
            out.variants.append(variant)
    return out
