"""``score_variants`` (the Python API) and ``predict_variants`` (what ``bioattn predict variants`` runs): read the
variants, score them with a DNA model (or a fitted variant-effect head) and write a TSV or an annotated VCF.

TSV output: ``chrom pos ref alt ref_score alt_score delta`` (``_<output>`` suffixes when the model has several
outputs; for a variant-effect head ``delta`` is its predicted effect and ``activity_delta`` the activity model's
difference), one row per alternative allele, in input order. VCF
output (``.vcf`` / ``.vcf.gz``): the input records unchanged, with INFO fields ``BIOATTN_REF``, ``BIOATTN_ALT``
(Number=A) and ``BIOATTN_DELTA`` (Number=A) per output (suffix ``_<output>`` with several), ``.`` for alleles
skipped, and a ``##bioattn_variant_scoring`` header line saying how windows were placed.

Under ``torchrun`` each process scores a contiguous share of the variants and the first process writes the output
(the same file as one process writes).
"""
from __future__ import annotations

import io
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.io import STDOUT, atomic_write, write_table
from bioattn.tasks.variants.records import VariantSet, is_vcf, read_variants, variants_from_table
from bioattn.tasks.variants.score import allele_scores, as_dna_model, how_scored, score_table

HEAD_TYPE = "VariantEffectHead"


@dataclass
class VariantPredictions:
    """What ``predict_variants`` did: ``variants`` scored, ``records`` read, ``skipped`` by reason, ``how`` the
    windows were placed, ``written``: False on the torchrun processes that do not write."""

    variants: int
    records: int
    skipped: dict[str, int]
    how: str
    written: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self, output: str | os.PathLike) -> str:
        skipped = ", ".join(f"{n} {reason}" for reason, n in self.skipped.items() if n)
        figure = f" and {self.extra['figure']}" if "figure" in self.extra else ""
        return (f"{self.variants} variant allele{'s' if self.variants != 1 else ''} of {self.records} record"
                f"{'s' if self.records != 1 else ''} scored{f' (skipped: {skipped})' if skipped else ''}; "
                f"{self.how}; wrote {output}{figure}")


def load_scoring_model(model: Any, device: str = "cpu") -> Any:
    """A model object as given, or the shipped model / run directory it names (a DNA model or a
    :class:`~bioattn.models.variant_head.VariantEffectHead`)."""
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

    with tempfile.TemporaryDirectory(prefix="bioattn-faidx-") as folder:
        fasta = open_indexed_fasta(Path(reference), folder)
        try:
            yield fasta
        finally:
            fasta.close()


def gene_strands(reference: Any) -> dict[str, str]:
    """``gene_strand=+|-`` of each FASTA header that has one (e.g. CAGI5's ``elements.fa``)."""
    from bioattn.tasks.variants.evaluate import header_fields

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
    return pd.concat([pd.read_csv(io.BytesIO(p), sep="\t", dtype={"chrom": str}) for p in parts], ignore_index=True)


def score_variants(model: Any, reference: Any, variants: Any, *, offsets: Sequence[int] | None = None,
                   strands: str = "auto", gene_orientation: bool = False, skip_indels: bool = False,
                   skip_invalid: bool = False, device: str = "cpu", progress: bool = False) -> Any:
    """Score ``variants`` (a VCF/TSV path, a DataFrame with ``chrom pos ref alt`` or ``(chrom, pos, ref, alt)``
    tuples; ``pos`` 1-based) against ``reference`` (a FASTA path or an open :class:`pyfaidx.Fasta`) with ``model`` (a
    DNA model object, a shipped model's name or a run directory) → a :class:`pandas.DataFrame`, the table
    ``bioattn predict variants`` writes."""
    table, _ = _score(model, reference, variants, offsets=offsets, strands=strands, gene_orientation=gene_orientation,
                      skip_indels=skip_indels, skip_invalid=skip_invalid, device=device, progress=progress)
    return table


def saturation_map(model: Any, reference: Any, region: str | None = None, *, offsets: Sequence[int] | None = None,
                   strands: str = "auto", gene_orientation: bool = False, device: str = "cpu",
                   progress: bool = False) -> Any:
    """Every possible SNV of ``region`` (``chrom:start-end``, 1-based inclusive; default every record of
    ``reference``) scored like :func:`score_variants`: the table ``bioattn predict variants --saturation`` writes
    (draw it with :func:`bioattn.tasks.variants.saturation.draw_saturation`)."""
    from bioattn.tasks.variants.saturation import saturation_variants

    with open_reference(reference) as fasta:
        return score_variants(model, fasta, saturation_variants(fasta, region), offsets=offsets, strands=strands,
                              gene_orientation=gene_orientation, device=device, progress=progress)


def _score(model: Any, reference: Any, variants: Any, *, offsets: Sequence[int] | None, strands: str,
           gene_orientation: bool, skip_indels: bool, skip_invalid: bool, device: str, progress: bool,
           shard: bool = False) -> tuple[Any, VariantPredictions]:
    model = load_scoring_model(model, device)
    with open_reference(reference) as fasta:
        found = _variant_set(variants, fasta, skip_indels, skip_invalid)
        reversed_contigs = ([name for name, s in gene_strands(fasta).items() if s == "-"] if gene_orientation else [])
        reverse = set(reversed_contigs).__contains__
        share, ranks = (_shares(len(found))[:2] if shard else (slice(None), 1))
        mine = found.variants[share]
        if is_head(model):
            from bioattn.tasks.variants.head import head_table

            table = head_table(model, fasta, mine, progress=progress)
            scorer = model.activity_model
            offsets, strands, reverse_used = model.offsets, model.strands, model.reversed_contigs
            how = how_scored(scorer, offsets, strands, reverse_used) + "; effect predicted by the variant-effect head"
        else:
            scores = allele_scores(model, fasta, mine, offsets=offsets, strands=strands, reverse=reverse,
                                   progress=progress)
            table = score_table(mine, scores, as_dna_model(model).target_names)
            how = how_scored(model, offsets, strands, reversed_contigs)
    table = _gather_rows(table, ranks)
    summary = VariantPredictions(len(found), found.records, dict(found.skipped), how, written=table is not None)
    summary.extra["variant_set"] = found
    return table, summary


def predict_variants(model: Any, reference: Any, input: Any, output: str | os.PathLike, *,
                     offsets: Sequence[int] | None = None, strands: str = "auto", gene_orientation: bool = False,
                     skip_indels: bool = False, skip_invalid: bool = False, device: str = "cpu") -> VariantPredictions:
    """Score the variants of ``input`` and write ``output`` (TSV, ``-`` for standard output, or VCF)."""
    vcf_out = is_vcf(output)
    if vcf_out and not is_vcf(input):
        raise UserInputError(f"{output}: a VCF output annotates a VCF input; {input} is not a VCF (write a .tsv)")
    table, summary = _score(model, reference, input, offsets=offsets, strands=strands,
                            gene_orientation=gene_orientation, skip_indels=skip_indels, skip_invalid=skip_invalid,
                            device=device, progress=True, shard=True)
    if table is None:
        return summary
    summary.extra["table"] = table
    if vcf_out:
        write_annotated_vcf(Path(input), Path(output), table, summary.extra["variant_set"], summary.how)
    else:
        write_table(output, list(table.columns), table.itertuples(index=False, name=None))
    return summary


_INFO = (("ref_score", "BIOATTN_REF", "1", "model score of the reference allele"),
         ("alt_score", "BIOATTN_ALT", "A", "model score of each alternative allele"),
         ("delta", "BIOATTN_DELTA", "A", "alternative minus reference score (a variant-effect head: its predicted effect)"),
         ("activity_delta", "BIOATTN_ACTIVITY_DELTA", "A", "alternative minus reference score of the head's activity model"))


def _info_fields(table: Any) -> list[tuple[str, str, str, str]]:
    """``(INFO id, column, Number, description)`` of the score columns."""
    import re

    fields = []
    for column in table.columns[4:]:
        for prefix, base, number, what in _INFO:
            if column == prefix or column.startswith(prefix + "_"):
                suffix = re.sub(r"[^A-Za-z0-9_.]", "_", column[len(prefix) + 1:])
                fields.append((f"{base}_{suffix}" if suffix else base, column, number,
                               what + (f" (output {column[len(prefix) + 1:]})" if suffix else "")))
    return fields


def write_annotated_vcf(source: Path, output: Path, table: Any, found: VariantSet, how: str) -> None:
    """Copy the VCF ``source`` to ``output`` with the scores of ``table`` (rows = ``found.variants``) in INFO."""
    from cyvcf2 import VCF, Writer

    from bioattn.io import format_cell

    by_record: dict[int, dict[int, int]] = {}
    for row, v in enumerate(found.variants):
        by_record.setdefault(v.record, {})[v.allele] = row
    fields = _info_fields(table)
    values = {column: table[column].to_numpy() for _, column, _, _ in fields}
    reader = VCF(str(source))
    for ident, _, number, what in fields:
        reader.add_info_to_header({"ID": ident, "Number": number, "Type": "Float", "Description": what})
    reader.add_to_header(f"##bioattn_variant_scoring={how}")
    with tempfile.TemporaryDirectory(prefix="bioattn-vcf-") as folder:
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
                writer.write_record(record)
        finally:
            writer.close()
            reader.close()
        with open(temporary, "rb") as src, atomic_write(output, "wb") as dst:
            shutil.copyfileobj(src, dst)
