"""The ``bioattn train|predict variants`` commands: their options, each field one flag
(:func:`bioattn.options.flag`), and what each runs."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bioattn.options import flag, values
from bioattn.tasks.flags import device_flag, model_flag

STRANDS = ("auto", "forward", "both")


def _offsets(text: str) -> list[int]:
    """``--offsets O1,O2,...``."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"expected comma-separated integers, got {text!r}") from None


@dataclass(frozen=True, kw_only=True)
class TrainVariants:
    """Fit a variant-effect head on measured variant effects (the CAGI5 supervised protocol), cross-validated.

        bioattn train variants --activity-model NAME_OR_DIR --reference elements.fa --input train_release.vcf --out runs/cagi5

    Features of each measured variant come from the activity model (allele differences over window placements and
    strands, in-silico mutagenesis around the variant, embedding differences, the reference activity; a deletion,
    insertion or multi-base substitution of up to 20 nt is scored in the windows 'bioattn predict variants' cuts for
    it, its in-silico mutagenesis read from the SNVs at its POS) plus the mean
    measured effect of other release variants nearby (leaving out the variant's own block of positions). A sparse
    linear model (ElasticNetCV) is cross-validated within the release, folds grouped by blocks of positions within
    each element, beside same-run baselines: the nearby effects alone, the activity model's raw allele difference and
    a k-mer ridge's (--kmer-train FILES, e.g. the activity model's training files). Pearson and Spearman per element,
    on all and on confident variants (CONF >= 0.1), and their means over promoters and enhancers are written to
    OUT/metrics.json and OUT/summary.md; out-of-fold predictions to OUT/out_of_fold.tsv, the features to
    OUT/features.tsv. OUT is a run directory that 'bioattn predict variants --model OUT' accepts (it stores the activity model's weights and the release).
    Contigs whose FASTA header says gene_strand=- are scored in reverse complement (gene orientation), as an
    oriented MPRA reads them (--no-gene-orientation to turn off).

    Cell types: an activity model of several outputs (one per cell type, e.g. hepg2 and wtc11) gives every feature
    per output (_<output> suffixes), and each element's cell type picks its matched output: the features
    <feature>_matched (delta_matched, abs_delta_matched, ism_here_matched, ...) are that output's for the variants of
    an element whose cell type matches an output (equal ignoring case and characters other than letters and digits:
    HepG2 matches hepg2) and 0 for the others. An element's cell type comes from --cell-types FILE, else the
    input's CELL_TYPE INFO field (a TSV's cell_type column), else its FASTA header's cell_type=. The head stores the
    map, so that 'bioattn predict variants --model OUT' on the same elements uses it (a cell type in the prediction
    input overrides it); metrics.json and summary.md say which element matched which output.
    """

    activity_model: str = flag("--activity-model", required=True, metavar="NAME_OR_DIR",
                               help="DNA activity model: a shipped model's name or a run directory (default: none)")
    activity_name: str | None = flag("--activity-name", default=None, metavar="NAME",
                                     help="name the head records for its activity model (default: --activity-model "
                                          "as given)")
    reference: Path = flag("--reference", required=True, metavar="FASTA",
                           help="sequences of the elements the variants lie on (default: none)")
    input: Path = flag("--input", required=True, metavar="VCF_OR_TSV",
                       help="measured variants: VCF with EFFECT (and CONF) INFO fields, or TSV with effect columns "
                            "(default: none)")
    out: Path = flag("--out", required=True, help="run directory to create (default: none)")
    overwrite: bool = flag("--overwrite", default=False, help="replace an existing --out (default: off)")
    kmer_train: tuple[Path, ...] = flag("--kmer-train", default=(), nargs="+", metavar="FILE",
                                        help="sequence/value tables to fit the k-mer ridge baseline on (default: no "
                                             "k-mer baseline)")
    folds: int = flag("--folds", default=5, help="cross-validation folds (default: %(default)s)")
    block: int = flag("--block", default=16, help="positions per block; folds never split a block (default: "
                                                  "%(default)s)")
    radius: int = flag("--radius", default=24, help="nearby-effect features read measured variants within this many "
                                                    "nt (default: %(default)s)")
    bandwidth: float = flag("--bandwidth", default=6.0,
                            help="Gaussian bandwidth (nt) of the nearby-effect weights (default: %(default)s)")
    ism_radius: int = flag("--ism-radius", default=4,
                           help="in-silico mutagenesis features cover this many nt either side (default: %(default)s)")
    strands: str = flag("--strands", default="auto", choices=STRANDS,
                        help="strands of the activity model's windows (default: %(default)s: as the model was "
                             "trained)")
    gene_orientation: bool = flag("--gene-orientation", default=True, action="boolean",
                                  help="score contigs whose FASTA header says gene_strand=- in reverse complement; "
                                       "--no-gene-orientation: every contig on its given strand (default: %(default)s)")
    cell_types: Path | None = flag("--cell-types", default=None, metavar="FILE",
                                   help="TSV with columns chrom (the element, a --reference record) and cell_type: "
                                        "the cell type each element was measured in, over the input's CELL_TYPE "
                                        "INFO field / cell_type column and the FASTA headers' cell_type= (default: "
                                        "those fields)")
    seed: int = flag("--seed", default=0, help="seed of the fold assignment (default: %(default)s)")
    device: str = device_flag()

    def run(self) -> int:
        from bioattn.tasks.variants.task import TASK
        from bioattn.tasks.variants.train import VariantTrainOptions, result_lines
        metrics = TASK.run(VariantTrainOptions(**values(self)))
        print(result_lines(metrics, self.out), file=sys.stderr)
        return 0


@dataclass(frozen=True, kw_only=True)
class PredictVariants:
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
    alt_score delta (id: the VCF's ID, else chrom:pos:ref:alt; _<output> suffixes for several outputs, none for the
    one --output-name NAME keeps). ref_score is the reference allele scored in the same windows as that variant's
    alt_score, so it moves with the variant's position; delta = alt_score - ref_score. A .vcf output copies the input VCF and adds BIOATTN_REF/ALT/DELTA INFO
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

    model: str | None = model_flag(trained_by="bioattn train activity, promoter or variants")
    device: str = device_flag()
    reference: Path = flag("--reference", required=True, metavar="FASTA",
                           help="reference sequences (FASTA, plain or bgzip; the variants' contigs) (default: none)")
    input: Path | None = flag("--input", default=None, metavar="VCF_OR_TSV",
                              help="variants: VCF (.vcf, .vcf.gz) or TSV with chrom, pos, ref, alt columns (default: "
                                   "none; required unless --saturation)")
    output: Path = flag("--output", required=True,
                        help="scores: .tsv ('-': standard output) or .vcf / .vcf.gz (annotated copy of a VCF input); "
                             "columns chrom pos id ref alt ref_score alt_score delta, ref_score being the reference "
                             "allele in the variant's own windows; with indels or multi-base substitutions in the "
                             "input, a kind column after alt (snv, mnv, deletion, insertion: their alternative window "
                             "keeps the model's length, the flank after REF read further for a deletion, cut short "
                             "for an insertion) (default: none)")
    offsets: list[int] | None = flag("--offsets", default=None, type=_offsets, metavar="O1,O2,...",
                                     help="0-based offsets of the variant in the model's window, one placement each "
                                          "(default: the centre and a quarter window either side)")
    strands: str = flag("--strands", default="auto", choices=STRANDS,
                        help="average both strands, forward only, or as the model was trained (default: %(default)s)")
    gene_orientation: bool = flag("--gene-orientation", default=False,
                                  help="score contigs whose FASTA header says gene_strand=- in reverse complement "
                                       "(default: off)")
    skip_indels: bool = flag("--skip-indels", default=False,
                             help="skip deletions and insertions (scored by default) and symbolic or too long "
                                  "alleles, listed in OUTPUT.skipped.tsv (default: off)")
    skip_invalid: bool = flag("--skip-invalid", default=False,
                              help="skip records whose REF, contig or position does not fit the reference, N / IUPAC "
                                   "alleles, symbolic alleles (<DEL>, *, .), breakends and alleles of more than 20 nt, "
                                   "listed in OUTPUT.skipped.tsv (default: off)")
    saturation: bool = flag("--saturation", default=False, group="saturation mutagenesis",
                            help="score every possible SNV of --region (or of every FASTA record) (default: off)")
    region: str | None = flag("--region", default=None, metavar="CHROM:START-END", group="saturation mutagenesis",
                              help="1-based inclusive region of the saturation map (default: every record of "
                                   "--reference)")
    figure: Path | None = flag("--figure", default=None, metavar="PNG", group="saturation mutagenesis",
                               help="heatmap of the saturation map (default: the output's name with .png)")
    output_name: str | None = flag("--output-name", default=None, metavar="NAME",
                                   help="of a model of several outputs (e.g. one per cell type), score only the "
                                        "output NAME and write its columns under the standard names ref_score "
                                        "alt_score delta (delta_sd; BIOATTN_DELTA in a .vcf output), without the "
                                        "_<output> suffixes; NAME matches ignoring case and characters other than "
                                        "letters and digits; an unknown NAME is an error listing the model's outputs "
                                        "(default: every output, suffixed columns)")

    def run(self) -> int:
        from bioattn.tasks.variants.run import run_predict_variants
        keywords = values(self, "offsets", "strands", "gene_orientation", "skip_indels", "skip_invalid",
                          "saturation", "region", "figure", "device", "output_name")
        result = run_predict_variants(self.model, self.reference, self.input, self.output, **keywords)
        if result.written:
            print(result.describe(self.output), file=sys.stderr)
        return 0
