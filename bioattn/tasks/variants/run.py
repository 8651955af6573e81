"""What ``bioattn predict variants`` runs: scores of the variants of a file, or a saturation mutagenesis map
(table + heatmap) of a region."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from bioattn.errors import UserInputError
from bioattn.io import STDOUT
from bioattn.tasks.variants.predict import (VariantPredictions, check_outputs, check_reference, is_vcf,
                                            load_scoring_model, open_reference, predict_variants)
from bioattn.tasks.variants.saturation import draw_saturation, saturation_variants


def run_predict_variants(model: Any, reference: Any, input: Any, output: str | os.PathLike, *,
                         offsets: Sequence[int] | None = None, strands: str = "auto", gene_orientation: bool = False,
                         skip_indels: bool = False, skip_invalid: bool = False, saturation: bool = False,
                         region: str | None = None, figure: str | os.PathLike | None = None,
                         device: str = "cpu", output_name: str | None = None) -> VariantPredictions:
    """:func:`~bioattn.tasks.variants.predict.predict_variants` for ``input``, or with ``saturation`` every SNV of
    ``region`` (else of every record) written to ``output`` and drawn into ``figure`` (default: ``output``.png)."""
    from bioattn.distributed import resolve_device
    if saturation == (input is not None):
        raise UserInputError("give --input VCF_OR_TSV, or --saturation (with an optional --region), not both"
                             if saturation else "--input VCF_OR_TSV is required (or --saturation)")
    if region is not None and not saturation:
        raise UserInputError("--region selects the region of a saturation map; add --saturation")
    if saturation and str(output) == STDOUT and figure is None:
        raise UserInputError("a saturation map written to standard output needs --figure PNG for its heatmap")
    if saturation:
        figure = Path(figure) if figure is not None else Path(output).with_suffix(".png")
    if not saturation and is_vcf(output) and not is_vcf(input):
        raise UserInputError(f"{output}: a VCF output annotates a VCF input; {input} is not a VCF (write a .tsv)")
    check_outputs(output, figure)  # before the model is loaded or anything scored
    if isinstance(reference, (str, os.PathLike)):
        check_reference(Path(reference))
    if input is not None and isinstance(input, (str, os.PathLike)) and not Path(input).is_file():
        raise UserInputError(f"{input}: file not found" if not Path(input).exists() else f"{input}: is not a file")
    loaded = load_scoring_model(model, str(resolve_device(device)))
    if not saturation:
        return predict_variants(loaded, reference, input, output, offsets=offsets, strands=strands,
                                gene_orientation=gene_orientation, skip_indels=skip_indels, skip_invalid=skip_invalid,
                                output_name=output_name)
    with open_reference(reference) as fasta:
        found = saturation_variants(fasta, region)
        result = predict_variants(loaded, fasta, found, output, offsets=offsets, strands=strands,
                                  gene_orientation=gene_orientation, output_name=output_name)
        if result.written:
            table = result.extra["table"]
            deltas = [c for c in table.columns if c.startswith("delta_") and not c.startswith("delta_sd")]
            column = "delta" if "delta" in table.columns else deltas[0]
            draw_saturation(table, figure, column=column)
            result.extra["figure"] = figure
    return result
