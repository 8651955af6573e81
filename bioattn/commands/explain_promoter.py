"""Per-nucleotide attention-rollout influence of a trained promoter classifier (PNG + TSV).

Writes, under ``--out``: ``predictions.tsv`` (id, length, probability of the positive class or ``p_<class>``
per class of a multi-class model, predicted label); ``influence.tsv`` (one row per nucleotide: id, position,
relative position, nucleotide, influence); ``tracks/`` (one PNG per sequence for the first
``--plot-sequences``); ``influence_profile.tsv``/``.png`` (mean, sd and s.e.m. band per position over all
sequences, and the mean per predicted class); ``heads_layer{l}.png`` and ``head_diversity_layer{l}.png``;
``summary.json`` (motif enrichment, head similarities, head sharpness, settings, and ``faithfulness``: each
method's deletion/insertion AUC on the first ``--faithfulness-sequences`` records, nucleotides replaced by N);
``faithfulness.png`` and ``head_sharpness.png``.

``--method`` chooses the map (rollout, gradient-weighted relevance, Captum Integrated Gradients or gradient ×
input on the embeddings, random); ``auto`` takes the most faithful that is fast enough and says which on stderr.
An ensemble's map is the mean of its members' maps.

Works for two-class and multi-class models alike: the rollout follows the [CLS] token, which every class's
logit reads, so one influence track explains the predicted class whichever it is (the gradient methods explain
the predicted class's log-odds). Rollout treats attention as the only path between tokens: a hypothesis
generator, not causal attribution.
"""
from __future__ import annotations

import argparse
import re
import time

import numpy as np
import torch
from Bio.Data.IUPACData import ambiguous_dna_letters

from bioattn.commands.common import add_device_argument, add_model_arguments, device_from_args, model_dir, model_label
from bioattn.errors import UserInputError
from bioattn.explain.motif_db import DEFAULT_DB, DEFAULT_Q
from bioattn.explain.attribution import PROMOTER_METHODS
from bioattn.explain.outputs import (
    add_common_arguments, add_method_arguments, faithfulness_table, prepare_out_dir, resolve_method, write_faithfulness,
    write_layer_figures,
)
from bioattn.io import write_json, write_table
from bioattn.progress import progress_bar

#: Methods from most to least faithful on GUE prom_core_all dev (README, "Explaining predictions").
FAITHFULNESS_ORDER = ("integrated_gradients", "gradient_x_input", "relevance", "rollout")

_MARK = re.compile(r"^(?P<label>[^=]+)=(?P<start>-?\d+)\.\.(?P<end>-?\d+)$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, trained_by="bioattn train promoter")
    add_device_argument(parser)
    add_common_arguments(parser, input_help="FASTA or CSV (column 'sequence', optional 'id'), plain or gzip")
    parser.add_argument("--max-sequences", type=int, default=1000, help="explain at most this many records (default: 1000)")
    parser.add_argument("--plot-sequences", type=int, default=6, help="write a track PNG for the first N records (default: 6)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass (default: %(default)s)")
    parser.add_argument("--tss-index", type=int, default=None,
                        help="0-based index of the TSS in every sequence; positions are then reported relative to it "
                             "(TSS = 0). GUE prom_core_* (70 bp): 34, see the explain docs")
    parser.add_argument("--motif", default="TATAWAWR",
                        help="IUPAC motif whose influence is compared with the sequence mean (default: TATAWAWR, "
                             "the TATA box); '' to skip")
    parser.add_argument("--mark", action="append", default=[], metavar="LABEL=START..END",
                        help="shade a range on the profile plot, in reported coordinates, e.g. 'TATA box=-31..-24'; "
                             "repeat for several (default: none)")
    parser.add_argument("--strand", choices=("model", "both", "forward"), default="model",
                        help="rollout of the forward strand, of both strands averaged, or as the model predicts (default)")
    add_method_arguments(parser, unit="nucleotides", methods=PROMOTER_METHODS)
    parser.add_argument("--faithfulness-sequences", type=int, default=200,
                        help="measure faithfulness on the first N records (default: %(default)s)")
    parser.add_argument("--motifs", action="store_true",
                        help="also discover the motifs the model uses (in-silico mutagenesis + TF-MoDISco over all "
                             "records, which must share one length), match them against --motif-db with TOMTOM and "
                             "measure which attention head reads each; writes motifs.html, motifs.tsv, logos/, "
                             "positions/, head_motifs.tsv (default: off)")
    parser.add_argument("--motif-db", default=DEFAULT_DB, metavar="DB",
                        help="known motifs for --motifs: jaspar (JASPAR2026 CORE vertebrates, shipped with pyjaspar), "
                             "jaspar:COLLECTION:TAX_GROUP (e.g. jaspar:CORE:insects, jaspar:CORE:all), a MEME-format "
                             "file, or none (default: %(default)s)")
    parser.add_argument("--motif-target", choices=("positive", "predicted"), default="positive",
                        help="what --motifs explains: the log-odds of the positive class in every sequence (two-class "
                             "models), or of each sequence's predicted class (default: %(default)s)")
    parser.add_argument("--motif-q", type=float, default=DEFAULT_Q,
                        help="TOMTOM q-value below which a pattern is reported as matching a known motif "
                             "(default: %(default)s)")


def _parse_marks(marks: list[str]) -> dict[str, tuple[int, int]]:
    spans = {}
    for mark in marks:
        match = _MARK.match(mark)
        if not match:
            raise UserInputError(f"--mark {mark!r}: expected LABEL=START..END, e.g. 'TATA box=-31..-24'")
        spans[match["label"]] = (int(match["start"]), int(match["end"]))
    return spans


def _safe_name(index: int, record_id: str) -> str:
    return f"{index:04d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', record_id)[:60]}"


def _read_inputs(args: argparse.Namespace, max_len: int) -> tuple[list, list[np.ndarray]]:
    from bioattn.data.dna import read_records

    records, tokens = [], []
    for record in read_records(args.input):
        if len(records) == args.max_sequences:
            break
        ids = record.tokens(source=args.input)
        if len(ids) > max_len:
            raise UserInputError(f"{args.input}: {record.describe()}: {len(ids)} nt, the model accepts at most {max_len}")
        records.append(record)
        tokens.append(ids)
    return records, tokens


def _predicted_groups(model, predicted: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """``(name, mask (N,))`` per predicted class: ``predicted_promoter`` / ``predicted_non_promoter`` for two classes."""
    if model.binary:
        return [("predicted_promoter", predicted == 1), ("predicted_non_promoter", predicted == 0)]
    return [(f"predicted_{name}", predicted == k) for k, name in enumerate(model.class_names)]


def _track_title(model, record_id: str, class_probabilities: np.ndarray, predicted: int) -> str:
    if model.binary:
        return f"{record_id}: p(promoter) = {class_probabilities[1]:.3f}"
    return f"{record_id}: predicted {model.class_names[predicted]} (p = {class_probabilities[predicted]:.3f})"


def _check_arguments(args: argparse.Namespace, num_layers: int) -> None:
    for name in ("max_sequences", "batch_size", "faithfulness_sequences"):
        if getattr(args, name) < 1:
            raise UserInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.start_layer < num_layers:
        raise UserInputError(f"--start-layer must be in [0, {num_layers - 1}], got {args.start_layer}")
    bad = sorted(set(args.motif.upper()) - set(ambiguous_dna_letters))
    if bad:
        raise UserInputError(f"--motif {args.motif!r}: {', '.join(bad)} is not an IUPAC nucleotide letter")


def _probe_seconds(model, batches: list, rc_average: bool | None) -> float:
    """Estimated seconds of one gradient × input pass over every batch (timed on the first)."""
    from bioattn.explain.promoter_attribution import promoter_attribution

    start = time.perf_counter()
    promoter_attribution(model, *batches[0], "gradient_x_input", rc_average=rc_average)
    return (time.perf_counter() - start) * len(batches)


def _sharpness(model, batches: list, out) -> dict:
    """Per-head entropy and effective temperature of the first member over the first batch (+ figure)."""
    from bioattn.explain.faithfulness_figures import plot_head_sharpness
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary
    from bioattn.models.ensemble import ensemble_members

    member = ensemble_members(model)[0]
    ids, padding_mask = batches[0]
    device = next(member.parameters()).device
    with torch.no_grad():
        _, key_padding_mask, weights = member.encode(ids.to(device), padding_mask.to(device), need_weights=True)
    sharpness = head_sharpness(weights, key_padding_mask)
    plot_head_sharpness(sharpness, out / "head_sharpness.png", title="promoter attention: per-head sharpness")
    return sharpness_summary(sharpness)


def _faithfulness(model, tokens: list[np.ndarray], args: argparse.Namespace, rc_average: bool | None, out) -> dict:
    """Deletion/insertion AUC of every method on ``tokens`` (nucleotides replaced by N), + faithfulness.png."""
    from bioattn.data.dna import collate_tokens
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.promoter_attribution import predicted_classes, promoter_attribution, promoter_score

    device = next(model.parameters()).device
    batches = [collate_tokens(tokens[start : start + args.batch_size]) for start in range(0, len(tokens), args.batch_size)]
    classes = [predicted_classes(model, ids.to(device), mask.to(device), rc_average=rc_average) for ids, mask in batches]
    scores = [promoter_score(model, ids[row, : int((~mask[row]).sum())].to(device), int(c[row]), rc_average=rc_average)
              for (ids, mask), c in zip(batches, classes) for row in range(len(ids))]

    def attribute(method: str) -> list[torch.Tensor]:
        maps = []
        for start, ((ids, mask), c) in enumerate(zip(batches, classes)):
            values = promoter_attribution(model, ids, mask, method, classes=c, rc_average=rc_average,
                                          head_fusion=args.head_fusion, start_layer=args.start_layer, seed=start)
            maps.extend(values[row, : int((~mask[row]).sum())].cpu() for row in range(len(ids)))
        return maps

    results = compare_methods(attribute, scores, PROMOTER_METHODS, steps=args.faithfulness_steps)
    return write_faithfulness(results, out, unit="nucleotides",
                              title=f"promoter: faithfulness on {len(tokens)} sequences (nucleotides → N)")


def _motif_database(args: argparse.Namespace):
    from bioattn.explain.motif_db import load_motif_database

    if not 0 < args.motif_q <= 1:
        raise UserInputError(f"--motif-q must be in (0, 1], got {args.motif_q}")
    return load_motif_database(args.motif_db)


def _motifs(model, records: list, args: argparse.Namespace, rc_average: bool | None, database, out) -> dict:
    """The motif report of every record (``motifs.html`` and its tables) and its ``summary.json`` entry."""
    from bioattn.explain.motif_report import write_motif_report
    from bioattn.explain.motifs import explain_motifs

    report = explain_motifs(model, [r.sequence for r in records], tss_index=args.tss_index, database=database,
                            q_threshold=args.motif_q, rc_average=rc_average, target=args.motif_target,
                            batch_size=args.batch_size)
    page = write_motif_report(report, out)
    matched = [p for p in report.patterns if p.best_match(report.q_threshold)]
    print(f"motifs: {len(report.patterns)} patterns, {len(matched)} matching {report.database} at q < "
          f"{report.q_threshold:g} -> {page}")
    return {"patterns": len(report.patterns), "matched": len(matched), "database": report.database,
            "q_threshold": report.q_threshold, "seconds": report.seconds}


def run(args: argparse.Namespace) -> int:
    from bioattn.data.dna import collate_tokens
    from bioattn.explain.figures import plot_rollout_track
    from bioattn.explain.promoter import explain_promoters, influence_profile, motif_enrichment
    from bioattn.explain.promoter_attribution import promoter_attribution
    from bioattn.models import PromoterClassifier
    from bioattn.models.ensemble import ensemble_members

    spans = _parse_marks(args.mark)
    database = _motif_database(args) if args.motifs else None
    model = PromoterClassifier.from_pretrained(model_dir(args), map_location=device_from_args(args)).eval()
    device = next(model.parameters()).device
    _check_arguments(args, model.config["num_layers"])
    records, tokens = _read_inputs(args, model.max_len)
    if args.motifs and len({len(t) for t in tokens}) > 1:
        raise UserInputError(f"{args.input}: --motifs needs records of one length, got lengths "
                             f"{', '.join(map(str, sorted({len(t) for t in tokens})[:5]))}")
    out = prepare_out_dir(args.out, overwrite=args.overwrite)
    rc_average = {"model": None, "both": True, "forward": False}[args.strand]

    batches = [collate_tokens(tokens[start : start + args.batch_size]) for start in range(0, len(tokens), args.batch_size)]
    method = resolve_method(args, FAITHFULNESS_ORDER, lambda: _probe_seconds(model, batches, rc_average))
    probabilities = []
    lengths = np.array([len(t) for t in tokens])
    influence = np.zeros((len(tokens), int(lengths.max())))  # (N, L_max), zero past each sequence's end
    for start, (ids, padding_mask) in zip(range(0, len(tokens), args.batch_size),
                                          progress_bar(batches, desc=f"explain promoter ({method})", unit="batch")):
        probabilities.append(model.predict_proba(ids.to(device), padding_mask.to(device), rc_average=rc_average).cpu())
        influence[start : start + len(ids), : ids.shape[1]] = promoter_attribution(
            model, ids, padding_mask, method, rc_average=rc_average, head_fusion=args.head_fusion,
            start_layer=args.start_layer, seed=start).cpu().numpy()
    first_weights = explain_promoters(ensemble_members(model)[0], *batches[0], head_fusion=args.head_fusion,
                                      start_layer=args.start_layer, rc_average=rc_average).weights
    probability = torch.cat(probabilities).numpy()  # (N,) positive-class probability, or (N, C)
    predicted = model.predicted_classes(probability)
    per_class = model.class_probabilities(probability)
    names = model.class_names
    offset = args.tss_index if args.tss_index is not None else 0
    xlabel = "position relative to TSS" if args.tss_index is not None else "position (0-based)"

    probability_columns = ["probability"] if model.binary else [f"p_{name}" for name in names]
    write_table(out / "predictions.tsv", ["id", "length", *probability_columns, "predicted_label"],
              ([r.id, n, *(per_class[row, 1:] if model.binary else per_class[row]), names[k]]
               for row, (r, n, k) in enumerate(zip(records, lengths, predicted))))
    write_table(out / "influence.tsv", ["id", "position", "relative_position", "nucleotide", "influence"],
              ([r.id, i, i - offset, r.sequence[i].upper(), float(influence[row, i])]
               for row, r in enumerate(records) for i in range(lengths[row])))
    for row, record in enumerate(records[: args.plot_sequences]):
        plot_rollout_track(influence[row, : lengths[row]], out / "tracks" / f"{_safe_name(row, record.id)}.png",
                           positions=np.arange(lengths[row]) - offset, sequence=record.sequence.upper(), spans=spans,
                           title=_track_title(model, record.id, per_class[row], predicted[row]), xlabel=xlabel)

    mean, std, counts = influence_profile(influence, lengths)
    positions = np.arange(len(mean)) - offset
    groups = [(name, chosen) for name, chosen in _predicted_groups(model, predicted) if chosen.any()]
    group_means = [influence_profile(influence[chosen], lengths[chosen])[0] for _, chosen in groups]
    write_table(out / "influence_profile.tsv",
              ["position", "relative_position", "sequences", "mean", "sd", *(f"mean_{name}" for name, _ in groups)],
              ([i, int(positions[i]), int(counts[i]), float(mean[i]), float(std[i]), *(float(g[i]) for g in group_means)]
               for i in range(len(mean))))
    plot_rollout_track(mean, out / "influence_profile.png", positions=positions, spans=spans,
                       spread=std / np.sqrt(np.maximum(counts, 1)), spread_label="± s.e.m.",
                       others={f"mean, {name.replace('_', ' ')} (n={int(chosen.sum())})": g
                               for (name, chosen), g in zip(groups, group_means)},
                       label=f"mean over {len(tokens)} sequences", xlabel=xlabel, ylabel=f"{method} influence",
                       title=f"where the model looks ({method}" + (f", {args.head_fusion} head fusion)" if method == "rollout" else ")"))
    similarities = write_layer_figures(first_weights, out, what="promoter attention (first batch; token 0 = [CLS])")

    top = np.argsort(mean)[::-1][:10]
    summary = {
        "run": model_label(args), "input": str(args.input), "sequences": len(tokens),
        "predicted": {name: int((predicted == k).sum()) for k, name in enumerate(names)},
        "method": method, "head_fusion": args.head_fusion, "start_layer": args.start_layer,
        "strand": args.strand, "tss_index": args.tss_index,
        "top_positions": [{"relative_position": int(positions[i]), "mean_influence": float(mean[i])} for i in top],
        "head_similarity": similarities,
        "head_sharpness": _sharpness(model, batches, out),
    }
    if method == "rollout":
        summary["cls_self_share_mean"] = float(1 - influence.sum(1).mean())
        summary["uniform_influence"] = float(influence.sum(1).mean() / lengths.mean())
    if not args.skip_faithfulness:
        summary["faithfulness"] = _faithfulness(model, tokens[: args.faithfulness_sequences], args, rc_average, out)
    if args.motif:
        # enrichment is a ratio of mean influences: signed maps (the Captum methods) enter by magnitude
        magnitude = np.abs(influence)
        summary["motif_influence"] = "absolute value" if (influence < 0).any() else "value"
        summary["motif"] = motif_enrichment([r.sequence for r in records], magnitude, args.motif).summary()
        for name, chosen in groups:
            summary[f"motif_in_{name}"] = motif_enrichment(
                [r.sequence for r, c in zip(records, chosen) if c], magnitude[chosen], args.motif).summary()
    if args.motifs:
        summary["motifs"] = _motifs(model, records, args, rc_average, database, out)
    write_json(out / "summary.json", summary)
    print(f"explained {len(tokens)} sequences with {method} -> {out}")
    if not args.skip_faithfulness:
        print(faithfulness_table(summary["faithfulness"]))
    if args.motif and summary["motif"]["sequences_with_match"]:
        motif = summary["motif"]
        by_sequence = motif["enrichment_vs_sequence_mean"]["mean"]
        by_position = motif["enrichment_vs_same_positions_without_motif"]["mean"]
        print(f"{args.motif}: in {motif['sequences_with_match']}/{len(tokens)} sequences; influence on it is "
              f"{by_sequence:.2f}x the sequence mean"
              + (f", {by_position:.2f}x the same positions in sequences without it" if by_position is not None else ""))
    return 0
