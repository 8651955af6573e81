"""The ``bioattn explain promoter`` command: its options and its run (no training code imported)."""
from __future__ import annotations

from dataclasses import dataclass

from bioattn.data.motif_db import DEFAULT_DB, DEFAULT_Q
from bioattn.explain.motifs import DEFAULT_ATTRIBUTION, DEFAULT_USE, MOTIF_ATTRIBUTIONS, MOTIF_USES
from bioattn.options import flag, values
from bioattn.tasks.flags import (device_flag, explain_input_flag, explain_out_flag, explain_overwrite_flag,
                                 faithfulness_steps_flag, head_fusion_flag, method_flag, method_options, model_flag,
                                 skip_faithfulness_flag, start_layer_flag)
from bioattn.tasks.promoter.attribution import PROMOTER_METHODS

_MOTIFS = "motifs"


@dataclass(frozen=True, kw_only=True)
class ExplainPromoter:
    """Per-nucleotide influence of a trained promoter classifier (PNG + TSV): attention rollout or a gradient method.

    Writes, under ``--out``: ``predictions.tsv`` (id, length, probability of the positive class or ``p_<class>``
    per class of a multi-class model, predicted label); ``influence.tsv`` (one row per nucleotide: id, position,
    relative position, nucleotide, influence); ``tracks/`` (one PNG per sequence for the first
    ``--plot-sequences``); ``influence_profile.tsv``/``.png`` (mean, sd and s.e.m. band per position over all
    sequences, and the mean per predicted class); ``heads_layer{l}.png`` and ``head_diversity_layer{l}.png``;
    ``summary.json`` (motif enrichment, head similarities, head sharpness, settings, and ``faithfulness``: each
    method's deletion/insertion AUC on the first ``--faithfulness-sequences`` records, nucleotides replaced by N);
    ``faithfulness.png`` and ``head_sharpness.png``.

    ``--method`` chooses the map (rollout, gradient-weighted relevance, Captum Integrated Gradients or gradient ×
    input on the embeddings, random); ``auto`` measures the deletion/insertion faithfulness of the methods fast enough
    for the input on its first 16 records, takes the most faithful there and says which, with the AUCs, on stderr.
    Figures and tables name the method used. An ensemble's map is the mean of its members' maps.

    Works for two-class and multi-class models alike: the rollout follows the [CLS] token, which every class's
    logit reads, so one influence track explains the predicted class whichever it is (the gradient methods explain
    the predicted class's log-odds). Rollout treats attention as the only path between tokens: a hypothesis
    generator, not causal attribution.
    """

    model: str | None = model_flag(trained_by="bioattn train promoter")
    device: str = device_flag()
    input: str = explain_input_flag(help="FASTA or CSV (column 'sequence', optional 'id'), plain or gzip")
    out: str = explain_out_flag()
    overwrite: bool = explain_overwrite_flag()
    head_fusion: str = head_fusion_flag()
    start_layer: int = start_layer_flag()
    max_rows: int = flag("--max-rows", default=1000, help="explain at most this many records (default: 1000)")
    plot_sequences: int = flag("--plot-sequences", default=6,
                               help="write a track PNG for the first N records (default: 6)")
    batch_size: int = flag("--batch-size", default=64, help="sequences per forward pass (default: %(default)s)")
    tss_index: int | None = flag("--tss-index", default=None,
                                 help="0-based index of the TSS in every sequence; positions are then reported "
                                      "relative to it (TSS = 0). GUE prom_core_* (70 bp): 34, see the explain docs")
    motif: str = flag("--motif", default="TATAWAWR", help="IUPAC motif whose influence is compared with the sequence "
                      "mean (default: TATAWAWR, the TATA box); '' to skip")
    mark: tuple[str, ...] = flag("--mark", default=(), action="append", absent=[], metavar="LABEL=START..END",
                                 help="shade a range on the profile plot, in reported coordinates, e.g. 'TATA "
                                      "box=-31..-24'; repeat for several (default: none)")
    strand: str = flag("--strand", default="model", choices=("model", "both", "forward"), help="rollout of the "
                       "forward strand, of both strands averaged, or as the model predicts (default)")
    method: str = method_flag(methods=PROMOTER_METHODS)
    skip_faithfulness: bool = skip_faithfulness_flag(unit="nucleotides")
    faithfulness_steps: int | None = faithfulness_steps_flag()
    faithfulness_sequences: int = flag("--faithfulness-sequences", default=200,
                                       help="measure faithfulness on the first N records (default: %(default)s)")
    motifs: bool = flag("--motifs", default=False, group=_MOTIFS, help="also discover the motifs the model uses "
                        "(hypothetical contributions of --motif-attribution + TF-MoDISco over all records, which must "
                        "share one length), match them against --motif-db with TOMTOM and measure which attention head "
                        "reads each; writes motifs.html, motifs.tsv, logos/, positions/, head_motifs.tsv, "
                        "motif_spacings.tsv and motif_scan_spacings.tsv (spacers between patterns from seqlets and "
                        "from scans of every sequence) (default: off)")
    motif_db: str = flag("--motif-db", default=DEFAULT_DB, metavar="DB", group=_MOTIFS,
                         help="known motifs for --motifs: jaspar (JASPAR2026 CORE vertebrates, shipped with pyjaspar), "
                              "jaspar:COLLECTION:TAX_GROUP (e.g. jaspar:CORE:insects, jaspar:CORE:all), a MEME-format "
                              "file, or none (default: %(default)s)")
    motif_target: str = flag("--motif-target", default="positive", choices=("positive", "predicted"), group=_MOTIFS,
                             help="what --motifs explains: the log-odds of the positive class in every sequence "
                                  "(two-class models), or of each sequence's predicted class (default: %(default)s)")
    motif_attribution: str = flag(
        "--motif-attribution", default=DEFAULT_ATTRIBUTION, choices=MOTIF_ATTRIBUTIONS, group=_MOTIFS,
        help="hypothetical contributions --motifs clusters, independent of --method: integrated_gradients (Integrated "
             "Gradients path gradients read for every base; an ensemble's mean) or ism (every substitution scored by "
             "the model) (default: %(default)s)")
    motif_sequences: str = flag("--motif-sequences", default=DEFAULT_USE, choices=MOTIF_USES, group=_MOTIFS,
                                help="which records --motifs explains and clusters: all, or predicted_positive "
                                     "(two-class models: the records predicted positive) (default: %(default)s)")
    motif_q: float = flag("--motif-q", default=DEFAULT_Q, group=_MOTIFS, help="TOMTOM q-value below which a pattern "
                          "is reported as matching a known motif (default: %(default)s)")
    motif_background: bool = flag(
        "--no-motif-background", default=True, action="store_false", group=_MOTIFS, help="skip the composition "
        "control of --motifs (by default the same pipeline also runs on a dinucleotide shuffle of every record, and "
        "patterns it yields too are flagged as composition, not listed as findings; it about doubles the time) "
        "(default: motif_background=%(default)s)")
    known_motifs: int = flag(
        "--known-motifs", default=0, metavar="N", group=_MOTIFS, help="plant the JASPAR consensus of core-promoter "
        "factors (TBP, SP1, NF-Y, ETS: ELK1 and GABPA, NRF1, YY1, CREB1, ZNF143, E2F1; CTCF as a control) centred at "
        "-30, -20, -10, 0, +10 and +20 nt from --tss-index into dinucleotide shuffles of the first N records, and 3 "
        "shuffles of each motif's letters at the same place; writes known_motifs.tsv with the change of the "
        "positive-class log-odds, motif minus shuffles (default: 0, off)")

    def run(self) -> int:
        from bioattn.tasks.promoter.explain import describe, explain_promoter
        result = explain_promoter(self.model, self.input, marks=self.mark, **values(
            self, "strand", "head_fusion", "start_layer", "max_rows", "batch_size", "tss_index", "motif",
            "plot_sequences", "faithfulness_sequences", "motifs", "motif_db", "motif_target", "motif_q",
            "motif_attribution", "motif_sequences", "motif_background", "known_motifs", "device", "out", "overwrite",
        ), **method_options(self))
        print(describe(result))
        return 0
