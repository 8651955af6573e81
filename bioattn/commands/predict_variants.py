"""Score variants (VCF or TSV: SNVs, multi-base substitutions, deletions and insertions of up to 20 nt) with a DNA
model: reference vs alternative allele, or a saturation mutagenesis map of a region.

    bioattn predict variants --model NAME_OR_DIR --reference genome.fa --input calls.vcf.gz --output scores.tsv
    bioattn predict variants --model NAME_OR_DIR --reference genome.fa --input calls.vcf --output annotated.vcf
    bioattn predict variants --model NAME_OR_DIR --reference genome.fa --saturation --region chr1:1000-1200 --output map.tsv

--model: a DNA activity model (any run directory of 'bioattn train activity': one model, or the fold / seed
models of a --cv / --seeds run, scored as their mean with delta_sd, the sample sd of the members' deltas), a
promoter classifier (scored as its probability, output p_promoter) or a variant-effect head of 'bioattn train
variants' (its predicted effect is the delta column; the activity model's own difference is activity_delta).
Windows of the model's length are cut from --reference (plain or bgzip FASTA, indexed with pyfaidx) around each
variant, with the variant at several offsets (--offsets; windows shifted to fit inside short contigs), and
averaged; both strands where the model was trained so (--strands). The TSV has chrom pos id ref alt ref_score
alt_score delta (id: the VCF's ID, else chrom:pos:ref:alt; _<output> suffixes for several outputs). ref_score is
the reference allele scored in the same windows as that variant's alt_score, so it moves with the variant's
position; delta = alt_score - ref_score. A .vcf output copies the input VCF and adds BIOATTN_REF/ALT/DELTA INFO
fields. Multi-allelic records are split. A deletion, insertion or multi-base substitution (REF and ALT of one
length) is scored with POS at the offsets like an SNV; its alternative window keeps the model's length and the
reference window's bases up to the variant: the flank after REF (the right flank; for a contig scored in gene
orientation, the left one, 3' in that orientation) is read further by a deletion's length and cut short by an
insertion's (where the contig ends, the window is shifted back inside it). Such records get a kind column after
alt (snv, mnv, deletion, insertion); --skip-indels skips deletions and insertions instead. A symbolic allele
(<DEL>, *, .), a breakend, an allele of more than 20 nt beyond the VCF's padding base, an N or IUPAC allele (G>R),
a REF that differs from the reference, a contig not in it or a position outside it stops the command with one
'error:' line naming the record (--skip-invalid skips them); a repeated record is scored once. Every
allele not scored is listed with its reason in OUTPUT.skipped.tsv beside the output (scores.tsv:
scores.skipped.tsv) and, in a .vcf output, in its BIOATTN_SKIPPED INFO field. The output paths are checked
before anything is scored. --gene-orientation scores contigs whose FASTA header says gene_strand=- in reverse
complement (for oriented assays, e.g. MPRA promoters).

--saturation scores every possible SNV of --region (or of every FASTA record) and also draws the map as a
heatmap (position x alternative base, reference logo above) into --figure (default: the output with .png).
Under torchrun each process scores its share and the first writes the output.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.commands.common import add_model_and_device_arguments, model_source

__all__ = ["add_arguments", "run"]


def _offsets(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_and_device_arguments(parser, trained_by="bioattn train activity, promoter or variants")
    parser.add_argument("--reference", type=Path, required=True, metavar="FASTA",
                        help="reference sequences (FASTA, plain or bgzip; the variants' contigs) (default: none)")
    parser.add_argument("--input", type=Path, default=None, metavar="VCF_OR_TSV",
                        help="variants: VCF (.vcf, .vcf.gz) or TSV with chrom, pos, ref, alt columns (default: none; "
                             "required unless --saturation)")
    parser.add_argument("--output", type=Path, required=True,
                        help="scores: .tsv ('-': standard output) or .vcf / .vcf.gz (annotated copy of a VCF input); "
                             "columns chrom pos id ref alt ref_score alt_score delta, ref_score being the reference "
                             "allele in the variant's own windows; with indels or multi-base substitutions in the "
                             "input, a kind column after alt (snv, mnv, deletion, insertion: their alternative window "
                             "keeps the model's length, the flank after REF read further for a deletion, cut short "
                             "for an insertion) (default: none)")
    parser.add_argument("--offsets", type=_offsets, default=None, metavar="O1,O2,...",
                        help="0-based offsets of the variant in the model's window, one placement each (default: the "
                             "centre and a quarter window either side)")
    parser.add_argument("--strands", choices=("auto", "forward", "both"), default="auto",
                        help="average both strands, forward only, or as the model was trained (default: %(default)s)")
    parser.add_argument("--gene-orientation", action="store_true",
                        help="score contigs whose FASTA header says gene_strand=- in reverse complement (default: off)")
    parser.add_argument("--skip-indels", action="store_true",
                        help="skip deletions and insertions (scored by default) and symbolic or too long alleles, "
                             "listed in OUTPUT.skipped.tsv (default: off)")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="skip records whose REF, contig or position does not fit the reference, N / IUPAC "
                             "alleles, symbolic alleles (<DEL>, *, .), breakends and alleles of more than 20 nt, "
                             "listed in OUTPUT.skipped.tsv (default: off)")
    saturation = parser.add_argument_group("saturation mutagenesis")
    saturation.add_argument("--saturation", action="store_true",
                            help="score every possible SNV of --region (or of every FASTA record) (default: off)")
    saturation.add_argument("--region", default=None, metavar="CHROM:START-END",
                            help="1-based inclusive region of the saturation map (default: every record of --reference)")
    saturation.add_argument("--figure", type=Path, default=None, metavar="PNG",
                            help="heatmap of the saturation map (default: the output's name with .png)")


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.variants.run import run_predict_variants

    result = run_predict_variants(model_source(args), args.reference, args.input, args.output, offsets=args.offsets,
                                  strands=args.strands, gene_orientation=args.gene_orientation,
                                  skip_indels=args.skip_indels, skip_invalid=args.skip_invalid,
                                  saturation=args.saturation, region=args.region, figure=args.figure,
                                  device=args.device)
    if result.written:
        print(result.describe(args.output), file=sys.stderr)
    return 0
