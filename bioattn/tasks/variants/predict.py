"""``score_variants`` (the Python API) and ``predict_variants`` (what ``bioattn predict variants`` runs): read the
variants, score them with a DNA model (or a fitted variant-effect head) and write a TSV or an annotated VCF.

TSV: ``chrom pos id ref alt [kind] ref_score alt_score delta`` (:func:`~bioattn.tasks.variants.score.score_table`),
one row per alternative allele in input order. VCF (``.vcf`` / ``.vcf.gz``): the input records with ``BIOATTN_*``
INFO fields and a ``##bioattn_variant_scoring`` header line. Alleles not scored are listed in
:func:`skipped_path`. Under ``torchrun`` each process scores a share and the first writes the output.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.io import STDOUT, atomic_write, format_cell, prepare_output, write_table
from bioattn.tasks.outputs import output_index
from bioattn.tasks.variants.evaluate import header_fields
from bioattn.tasks.variants.head import head_table
from bioattn.tasks.variants.records import (SKIPPED_COLUMNS, VariantSet, is_vcf, read_variants, skipped_rows,
                                            variants_from_table)
from bioattn.tasks.variants.saturation import saturation_variants
from bioattn.tasks.variants.score import (ID_COLUMNS, INDEL_WINDOWS, allele_scores, as_dna_model, how_scored,
                                          score_table)
from bioattn.tasks.variants.vcf import htslib_messages

HEAD_TYPE = "VariantEffectHead"


@dataclass
class VariantPredictions:
    """What ``predict_variants`` did; ``written``: False on the torchrun processes that do not write."""

    variants: int
    records: int
    skipped: dict[str, int]
    how: str
    written: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self, output: str | os.PathLike) -> str:
        skipped = ", ".join(f"{n} {reason}" for reason, n in self.skipped.items() if n)
        figure = f" and {self.extra['figure']}" if "figure" in self.extra else ""
        listed = ""
        if "skipped_file" in self.extra:
            listed = f"; skipped alleles listed in {self.extra['skipped_file']}"
        elif skipped:
            names = [s.id for s in self.extra["variant_set"].skipped_records]
            listed = f"; skipped: {', '.join(names[:10])}{f' and {len(names) - 10} more' if len(names) > 10 else ''}"
        return (f"{self.variants} variant allele{'s' if self.variants != 1 else ''} of {self.records} record"
                f"{'s' if self.records != 1 else ''} scored{f' (skipped: {skipped})' if skipped else ''}; "
                f"{self.how}; wrote {output}{figure}{listed}")


def skipped_path(output: str | os.PathLike) -> Path | None:
    """``<output without its extensions>.skipped.tsv`` beside ``output`` (None for standard output)."""
    if str(output) == STDOUT:
        return None
    path = Path(output)
    name = path.name
    for suffix in (".gz", ".bgz", ".vcf", ".bcf", ".tsv", ".txt", ".csv"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return path.with_name(f"{name}.skipped.tsv")


def check_outputs(output: str | os.PathLike, *more: str | os.PathLike | None) -> None:
    """Refuse an ``output`` (its skipped list, and ``more`` paths such as a figure) that cannot be written."""
    for path in (output, skipped_path(output), *more):
        if path is not None:
            prepare_output(path)


def check_reference(path: Path) -> None:
    """The reference FASTA, checked before it is indexed: present, FASTA, plain or bgzip."""
    if not path.is_file():
        raise UserInputError(f"{path}: reference FASTA not found" if not path.exists() else f"{path}: is not a file")
    with open(path, "rb") as handle:
        head = handle.read(4)
    first = head[:1]
    if head[:2] == b"\x1f\x8b":
        if len(head) < 4 or not head[3] & 0x04:  # the FEXTRA flag: bgzip sets it, plain gzip does not
            raise UserInputError(
                f"{path}: --reference is gzip-compressed; variant scoring reads the windows around each variant "
                f"through a FASTA index, which needs plain or bgzip-compressed FASTA: recompress it with "
                f"'gunzip {path.name} && bgzip {path.stem}' (or give the uncompressed file)")
        with gzip.open(path, "rb") as handle:
            first = handle.read(1)
    if first != b">":
        raise UserInputError(f"{path}: --reference must be a FASTA file (its first line a '>' header)")


def load_scoring_model(model: Any, device: str = "cpu") -> Any:
    """A model object as given, or the shipped model / run directory it names."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    from bioattn.models.registry import load_pretrained
    return load_pretrained(model, map_location=device)


def is_head(model: Any) -> bool:
    return type(model).__name__ == HEAD_TYPE


@contextmanager
def open_reference(reference: Any) -> Iterator[Any]:
    """A :class:`pyfaidx.Fasta` of ``reference`` (a path; an open Fasta is passed through)."""
    if not isinstance(reference, (str, os.PathLike)):
        yield reference
        return
    from bioattn.tasks.promoter.scan import open_indexed_fasta
    check_reference(Path(reference))
    with tempfile.TemporaryDirectory(prefix="bioattn-faidx-") as folder:
        fasta = open_indexed_fasta(Path(reference), folder)
        try:
            yield fasta
        finally:
            fasta.close()


def gene_strands(reference: Any) -> dict[str, str]:
    """``gene_strand=+|-`` of each FASTA header that has one."""
    return {name: fields["gene_strand"] for name, fields in header_fields(reference).items() if "gene_strand" in fields}


def _variant_set(variants: Any, fasta: Any, skip_indels: bool, skip_invalid: bool) -> VariantSet:
    if isinstance(variants, VariantSet):
        return variants
    if isinstance(variants, (str, os.PathLike)):
        return read_variants(variants, fasta, skip_indels=skip_indels, skip_invalid=skip_invalid)
    if hasattr(variants, "columns"):  # a DataFrame with chrom, pos, ref, alt
        missing = [c for c in ("chrom", "pos", "ref", "alt") if c not in variants.columns]
        if missing:
            raise UserInputError(f"the variants table has no column {missing[0]!r} (needs chrom, pos, ref, alt)")
        rows = list(zip(variants["chrom"], variants["pos"], variants["ref"], variants["alt"]))
        return variants_from_table(rows, fasta)
    return variants_from_table(list(variants), fasta)


def _shares(n: int) -> tuple[slice, int, int]:
    from bioattn import distributed
    distributed.init_distributed()
    ranks, rank = distributed.world_size(), distributed.rank()
    bounds = np.linspace(0, n, ranks + 1).astype(int)
    return slice(bounds[rank], bounds[rank + 1]), ranks, rank


def _gather_rows(table: Any, ranks: int) -> Any:
    """Every process's rows of ``table`` on the first process, in rank order (None on the others)."""
    if ranks == 1:
        return table
    import pandas as pd

    from bioattn import distributed
    payload = table.to_csv(sep="\t", index=False, float_format="%.17g").encode()
    parts = distributed.gather_bytes(payload)
    if parts is None:
        return None
    table = pd.concat([pd.read_csv(io.BytesIO(p), sep="\t", dtype={"chrom": str, "id": str}) for p in parts],
                      ignore_index=True)
    if "matched_output" in table.columns:  # a head's: empty where an element matched no output
        table["matched_output"] = table["matched_output"].fillna("").astype(str)
    return table


def score_variants(model: Any, reference: Any, variants: Any, *, offsets: Sequence[int] | None = None,
                   strands: str = "auto", gene_orientation: bool = False, skip_indels: bool = False,
                   skip_invalid: bool = False, device: str = "cpu", progress: bool = False,
                   output_name: str | None = None) -> Any:
    """The table ``bioattn predict variants`` writes, of ``variants`` (a VCF/TSV path, a DataFrame with ``chrom pos
    ref alt`` or ``(chrom, pos, ref, alt)`` tuples) on ``reference`` (a FASTA path or an open ``pyfaidx.Fasta``)."""
    return _score(model, reference, variants, offsets=offsets, strands=strands, gene_orientation=gene_orientation,
                  skip_indels=skip_indels, skip_invalid=skip_invalid, device=device, progress=progress,
                  output_name=output_name)[0]


def saturation_map(model: Any, reference: Any, region: str | None = None, *, offsets: Sequence[int] | None = None,
                   strands: str = "auto", gene_orientation: bool = False, device: str = "cpu",
                   progress: bool = False, output_name: str | None = None) -> Any:
    """Every possible SNV of ``region`` (``chrom:start-end``; default every record) scored like
    :func:`score_variants` (draw it with :func:`bioattn.tasks.variants.saturation.draw_saturation`)."""
    with open_reference(reference) as fasta:
        return score_variants(model, fasta, saturation_variants(fasta, region), offsets=offsets, strands=strands,
                              gene_orientation=gene_orientation, device=device, progress=progress,
                              output_name=output_name)


def _score(model: Any, reference: Any, variants: Any, *, offsets: Sequence[int] | None, strands: str,
           gene_orientation: bool, skip_indels: bool, skip_invalid: bool, device: str, progress: bool,
           shard: bool = False, output_name: str | None = None) -> tuple[Any, VariantPredictions]:
    model = load_scoring_model(model, device)
    outputs = list(as_dna_model(model.activity_model if is_head(model) else model).target_names)
    if output_name is not None:  # before anything is read or scored
        output_name = outputs[output_index(output_name, outputs)]
    with open_reference(reference) as fasta:
        found = _variant_set(variants, fasta, skip_indels, skip_invalid)
        reversed_contigs = ([name for name, s in gene_strands(fasta).items() if s == "-"] if gene_orientation else [])
        reverse = set(reversed_contigs).__contains__
        share, ranks = (_shares(len(found))[:2] if shard else (slice(None), 1))
        mine = found.variants[share]
        if is_head(model):
            table = head_table(model, fasta, mine, progress=progress, output=output_name)
            scorer = model.activity_model
            offsets, strands = model.offsets, model.strands
            present = set(fasta.keys())
            reverse_used = [name for name in model.reversed_contigs if name in present]
            how = how_scored(scorer, offsets, strands, reverse_used) + "; effect predicted by the variant-effect head"
        else:
            scores = allele_scores(model, fasta, mine, offsets=offsets, strands=strands, reverse=reverse,
                                   progress=progress)
            table = score_table(mine, scores, outputs, output=output_name)
            how = how_scored(model, offsets, strands, reversed_contigs)
        if output_name is not None and len(outputs) > 1:
            how += f"; scores of output {output_name} (of {', '.join(outputs)})"
        kinds = not all(v.is_snv for v in found.variants)  # the same columns on every torchrun process
        if kinds:
            table.insert(list(table.columns).index("alt") + 1, "kind", [v.kind for v in mine])
            how += "; " + INDEL_WINDOWS
    table = _gather_rows(table, ranks)
    summary = VariantPredictions(len(found), found.records, dict(found.skipped), how, written=table is not None)
    summary.extra["variant_set"] = found
    return table, summary


def predict_variants(model: Any, reference: Any, input: Any, output: str | os.PathLike, *,
                     offsets: Sequence[int] | None = None, strands: str = "auto", gene_orientation: bool = False,
                     skip_indels: bool = False, skip_invalid: bool = False, device: str = "cpu",
                     output_name: str | None = None) -> VariantPredictions:
    """Score the variants of ``input`` and write ``output`` (TSV, ``-`` for standard output, or VCF) and
    :func:`skipped_path`; ``output_name``: one output of several, under the standard names."""
    vcf_out = is_vcf(output)
    if vcf_out and not is_vcf(input):
        raise UserInputError(f"{output}: a VCF output annotates a VCF input; {input} is not a VCF (write a .tsv)")
    check_outputs(output)
    table, summary = _score(model, reference, input, offsets=offsets, strands=strands,
                            gene_orientation=gene_orientation, skip_indels=skip_indels, skip_invalid=skip_invalid,
                            device=device, progress=True, shard=True, output_name=output_name)
    if table is None:
        return summary
    summary.extra["table"] = table
    found = summary.extra["variant_set"]
    if vcf_out:
        write_annotated_vcf(Path(input), Path(output), table, found, summary.how)
    else:
        write_table(output, list(table.columns), table.itertuples(index=False, name=None))
    listing = skipped_path(output)
    if found.skipped_records and listing is not None:
        write_table(listing, list(SKIPPED_COLUMNS), skipped_rows(found))
        summary.extra["skipped_file"] = listing
    return summary


_INFO = (("ref_score", "BIOATTN_REF", "1", "model score of the reference allele in the variant's own windows"),
         ("alt_score", "BIOATTN_ALT", "A", "model score of each alternative allele"),
         ("delta_sd", "BIOATTN_DELTA_SD", "A", "sample sd of the ensemble members' deltas"),
         ("delta", "BIOATTN_DELTA", "A", "alternative minus reference score (a variant-effect head: its predicted effect)"),
         ("activity_delta", "BIOATTN_ACTIVITY_DELTA", "A", "alternative minus reference score of the head's activity model"))


def _info_fields(table: Any) -> list[tuple[str, str, str, str]]:
    """``(INFO id, column, Number, description)`` of the score columns."""
    fields = []
    columns = set(table.columns)
    for column in table.columns:
        if column in ID_COLUMNS:
            continue
        for prefix, base, number, what in _INFO:
            if column == prefix or column.startswith(prefix + "_"):
                if prefix == "delta" and column.startswith("delta_sd") and "ref_score" + column[5:] not in columns:
                    continue  # an ensemble's delta_sd[_<output>], not the delta of an output named sd...
                suffix = re.sub(r"[^A-Za-z0-9_.]", "_", column[len(prefix) + 1:])
                fields.append((f"{base}_{suffix}" if suffix else base, column, number,
                               what + (f" (output {column[len(prefix) + 1:]})" if suffix else "")))
                break
    return fields


def _header_gaps(source: Path) -> list[str]:
    """The header lines htslib adds while reading ``source`` (tags and contigs its header does not define)."""
    from cyvcf2 import VCF
    reader = VCF(str(source), lazy=True)
    try:
        before = set(reader.raw_header.splitlines())
        for _ in reader:
            pass
        added = [line for line in reader.raw_header.splitlines() if line.startswith("##") and line not in before]
    finally:
        reader.close()
    return [line.replace('Description="Dummy"', 'Description="not defined in the input VCF\'s header"')
            for line in added]


#: The INFO field of the alleles not scored: their reason (:data:`~bioattn.tasks.variants.records.REASONS`).
SKIPPED_INFO = "BIOATTN_SKIPPED"


def write_annotated_vcf(source: Path, output: Path, table: Any, found: VariantSet, how: str) -> None:
    """Copy the VCF ``source`` to ``output`` with the scores of ``table`` (rows = ``found.variants``) and the reason
    of each allele not scored in INFO."""
    from cyvcf2 import VCF, Writer
    by_record: dict[int, dict[int, int]] = {}
    for row, v in enumerate(found.variants):
        by_record.setdefault(v.record, {})[v.allele] = row
    reasons: dict[int, dict[int, str]] = {}
    for item in found.skipped_records:
        reasons.setdefault(item.record, {})[item.allele] = item.reason
    fields = _info_fields(table)
    values = {column: table[column].to_numpy() for _, column, _, _ in fields}
    with tempfile.TemporaryDirectory(prefix="bioattn-vcf-") as folder, htslib_messages():
        reader = VCF(str(source))
        for line in _header_gaps(source):  # htslib cannot write a record whose contig or tag the header lacks
            reader.add_to_header(line)
        for ident, _, number, what in fields:
            reader.add_info_to_header({"ID": ident, "Number": number, "Type": "Float", "Description": what})
        reader.add_info_to_header({"ID": SKIPPED_INFO, "Number": "A", "Type": "String", "Description": (
            "why bioattn did not score this allele (indel, ambiguous, symbolic, too_long, invalid, duplicate; details "
            "in the .skipped.tsv beside this file); . for alleles scored")})
        reader.add_to_header(f"##bioattn_variant_scoring={how}")
        temporary = Path(folder) / ("out.vcf.gz" if str(output).endswith((".gz", ".bgz")) else "out.vcf")
        writer = Writer(str(temporary), reader, mode="wz" if temporary.suffix == ".gz" else "w")
        try:
            for index, record in enumerate(reader):
                rows = by_record.get(index)
                if rows:
                    for ident, column, number, _ in fields:
                        if number == "1":
                            record.INFO[ident] = str(format_cell(values[column][next(iter(rows.values()))]))
                        else:
                            record.INFO[ident] = ",".join(
                                str(format_cell(values[column][rows[a]])) if a in rows else "."
                                for a in range(len(record.ALT)))
                why = reasons.get(index)
                if why:
                    record.INFO[SKIPPED_INFO] = ",".join(why.get(a, ".") for a in range(len(record.ALT)))
                writer.write_record(record)
        finally:
            writer.close()
            reader.close()
        with open(temporary, "rb") as src, atomic_write(output, "wb") as dst:
            shutil.copyfileobj(src, dst)
