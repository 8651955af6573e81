"""``explain_promoter``: ``bioattn explain promoter`` from Python."""
from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from bioattn.errors import UserInputError
from bioattn.explain.attribution import method_label
from bioattn.explain.result import (AUTO_SAMPLE, SequenceExplanation, check_out_dir, load_explained_model,
                                    resolve_method, saved_under, where)

#: Methods from most to least faithful (``--method auto`` tries them in this order).
FAITHFULNESS_ORDER = ("integrated_gradients", "gradient_x_input", "relevance", "rollout")
STRANDS = ("model", "both", "forward")

_MARK = re.compile(r"^(?P<label>[^=]+)=(?P<start>-?\d+)\.\.(?P<end>-?\d+)$")


@dataclasses.dataclass
class PromoterExplanation(SequenceExplanation):
    """``influence (N, L_max)`` (0 past each end), ``probabilities`` ``(N,)`` or ``(N, C)``, ``predicted (N,)``."""

    influence: np.ndarray = None
    probabilities: np.ndarray = None
    predicted: np.ndarray = None
    motif: str = ""


def parse_marks(marks: Iterable[str]) -> dict[str, tuple[int, int]]:
    """``{label: (start, end)}`` of ``LABEL=START..END`` strings."""
    spans = {}
    for mark in marks:
        match = _MARK.match(mark)
        if not match:
            raise UserInputError(f"--mark {mark!r}: expected LABEL=START..END, e.g. 'TATA box=-31..-24'")
        spans[match["label"]] = (int(match["start"]), int(match["end"]))
    return spans


def _safe_name(index: int, record_id: str) -> str:
    return f"{index:04d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', record_id)[:60]}"


def _records(inputs: Any, max_rows: int):
    """DNARecords of a FASTA/CSV path, of DNARecords, or of sequence strings (ids ``seq{i}``); at most ``max_rows``."""
    from bioattn.data.dna import DNARecord, read_records
    if isinstance(inputs, (str, os.PathLike)):
        source, iterator = inputs, read_records(inputs)
    else:
        source = None
        iterator = (r if isinstance(r, DNARecord) else DNARecord(id=f"seq{i}", sequence=str(r))
                    for i, r in enumerate(inputs))
    records = []
    for record in iterator:
        if len(records) == max_rows:
            break
        records.append(record)
    if not records:
        raise UserInputError(f"{source if source is not None else 'inputs'}: no sequences")
    return records, source


def _tokens(records, source, max_len: int) -> list[np.ndarray]:
    tokens = []
    for record in records:
        ids = record.tokens(source=source)
        if len(ids) > max_len:
            where = f"{source}: " if source is not None else ""
            raise UserInputError(f"{where}{record.describe()}: {len(ids)} nt, the model accepts at most {max_len}")
        tokens.append(ids)
    return tokens


def _predicted_groups(model, predicted: np.ndarray) -> list[tuple[str, np.ndarray]]:
    if model.binary:
        return [("predicted_promoter", predicted == 1), ("predicted_non_promoter", predicted == 0)]
    return [(f"predicted_{name}", predicted == k) for k, name in enumerate(model.class_names)]


def _track_title(model, record_id: str, class_probabilities: np.ndarray, predicted: int) -> str:
    if model.binary:
        return f"{record_id}: p(promoter) = {class_probabilities[1]:.3f}"
    return f"{record_id}: predicted {model.class_names[predicted]} (p = {class_probabilities[predicted]:.3f})"


def _check(motif: str, start_layer: int, num_layers: int, **counts: int) -> None:
    from Bio.Data.IUPACData import ambiguous_dna_letters
    for name, value in counts.items():
        if value < 1:
            raise UserInputError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if not 0 <= start_layer < num_layers:
        raise UserInputError(f"--start-layer must be in [0, {num_layers - 1}], got {start_layer}")
    bad = sorted(set(motif.upper()) - set(ambiguous_dna_letters))
    if bad:
        raise UserInputError(f"--motif {motif!r}: {', '.join(bad)} is not an IUPAC nucleotide letter")


def _sharpness(model, batch):
    from bioattn.explain.sharpness import head_sharpness
    from bioattn.models.ensemble import ensemble_members
    member = ensemble_members(model)[0]
    ids, padding_mask = batch
    device = next(member.parameters()).device
    with torch.no_grad():
        _, key_padding_mask, weights = member.encode(ids.to(device), padding_mask.to(device), need_weights=True)
    return head_sharpness(weights, key_padding_mask)


def _faithfulness(model, tokens, batch_size, rc_average, head_fusion, start_layer, steps, methods=None) -> dict:
    """Deletion/insertion AUC of ``methods`` (default: every method) on ``tokens`` (nucleotides → N)."""
    from bioattn.data.dna import collate_tokens
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.ism import predicted_classes
    from bioattn.progress import progress_bar
    from bioattn.tasks.promoter.attribution import PROMOTER_METHODS, promoter_attribution, promoter_score
    device = next(model.parameters()).device
    batches = [collate_tokens(tokens[start : start + batch_size]) for start in range(0, len(tokens), batch_size)]
    classes = [predicted_classes(model, ids.to(device), mask.to(device), rc_average=rc_average) for ids, mask in batches]
    scores = [promoter_score(model, ids[row, : int((~mask[row]).sum())].to(device), int(c[row]), rc_average=rc_average)
              for (ids, mask), c in zip(batches, classes) for row in range(len(ids))]
    methods = PROMOTER_METHODS if methods is None else methods
    bar = progress_bar(total=len(methods) * len(tokens), desc=f"faithfulness over {len(tokens)} sequences", unit="map")

    def attribute(method: str) -> list[torch.Tensor]:
        maps = []
        for start, ((ids, mask), c) in enumerate(zip(batches, classes)):
            values = promoter_attribution(model, ids, mask, method, classes=c, rc_average=rc_average,
                                          head_fusion=head_fusion, start_layer=start_layer, seed=start)
            maps.extend(values[row, : int((~mask[row]).sum())].cpu() for row in range(len(ids)))
            bar.update(len(ids))
        return maps

    try:
        return compare_methods(attribute, scores, methods, steps=steps)
    finally:
        bar.close()


def explain_promoter(
    model: Any, inputs: str | os.PathLike | Sequence[str] | Sequence[Any], *, method: str = "auto",
    strand: str = "model", head_fusion: str = "mean", start_layer: int = 0, max_rows: int = 1000, batch_size: int = 64,
    tss_index: int | None = None, motif: str = "TATAWAWR",
    marks: dict[str, tuple[int, int]] | Iterable[str] | None = None, plot_sequences: int = 6, faithfulness: bool = True,
    faithfulness_sequences: int = 200, faithfulness_steps: int = 20, motifs: bool = False, motif_db: str = "jaspar",
    motif_target: str = "positive", motif_q: float = 0.05, motif_attribution: str = "integrated_gradients",
    motif_sequences: str = "all", motif_background: bool = True, known_motifs: int = 0, device: str = "auto",
    out: str | os.PathLike | None = None, overwrite: bool = False) -> PromoterExplanation:
    """Explain a promoter classifier's predictions on ``inputs``, nucleotide by nucleotide.

    Args:
        model: a :class:`~bioattn.models.PromoterClassifier` (or an ensemble), a run directory or a shipped model.
        inputs: a FASTA/CSV file or in-memory sequences (strings or :class:`~bioattn.data.dna.DNARecord`).
        method: ``auto`` (the most faithful of the methods that fit about a minute) or one of
            :data:`~bioattn.tasks.promoter.attribution.PROMOTER_METHODS`.
        strand: ``model`` (as the model predicts), ``both`` or ``forward``.
        tss_index: 0-based TSS index; positions are then reported relative to it.
        motif: IUPAC motif whose influence is compared with the sequence mean (``""``: none).
        marks: ranges shaded on the profile plot, ``{label: (start, end)}`` or ``"LABEL=START..END"`` strings.
        motifs: also discover the motifs the model uses (:func:`~bioattn.explain.motifs.explain_motifs`); the
            ``motif_*`` arguments configure it.
        known_motifs: plant core-promoter motifs into shuffles of the first N sequences
            (:func:`~bioattn.explain.marginalize.marginalize_known_motifs`; 0: off).
        out: a folder to write the result into (a non-empty one only with ``overwrite``).
    """
    check_out_dir(out, overwrite=overwrite)
    from bioattn.data.dna import collate_tokens
    from bioattn.explain.figures import plot_rollout_track
    from bioattn.explain.outputs import layer_similarities, write_faithfulness, write_layer_figures
    from bioattn.explain.sharpness import sharpness_summary
    from bioattn.models.promoter import PromoterClassifier
    from bioattn.models.ensemble import ensemble_members
    from bioattn.progress import progress_bar
    from bioattn.tasks.promoter.attribution import RELATIVE_COST, promoter_attribution
    from bioattn.tasks.promoter.influence import explain_promoters, influence_profile, motif_enrichment
    if strand not in STRANDS:
        raise UserInputError(f"strand must be one of {', '.join(STRANDS)}, got {strand!r}")
    spans = dict(marks) if isinstance(marks, dict) else parse_marks(marks or [])
    database = None
    if motifs:
        from bioattn.explain.motif_db import load_motif_database

        if not 0 < motif_q <= 1:
            raise UserInputError(f"--motif-q must be in (0, 1], got {motif_q}")
        for flag, value, allowed in (("--motif-target", motif_target, ("positive", "predicted")),
                                     ("--motif-sequences", motif_sequences, ("all", "predicted_positive")),
                                     ("--motif-attribution", motif_attribution, ("integrated_gradients", "ism"))):
            if value not in allowed:  # the flag's full name in the source: the messages' flags are checked by tests
                raise UserInputError(f"{flag} must be {' or '.join(allowed)}, got {value!r}")
        database = load_motif_database(motif_db)
    if known_motifs < 0:
        raise UserInputError(f"--known-motifs must be >= 0, got {known_motifs}")
    if known_motifs and tss_index is None:
        raise UserInputError("--known-motifs places the motifs relative to the TSS: give --tss-index")
    model, label = load_explained_model(model, PromoterClassifier, device)
    if known_motifs and not model.binary:
        raise UserInputError("--known-motifs measures the positive-class log-odds: it needs a two-class model")
    device_ = next(model.parameters()).device
    _check(motif, start_layer, model.config["num_layers"], max_rows=max_rows, batch_size=batch_size,
           faithfulness_sequences=faithfulness_sequences)
    records, source = _records(inputs, max_rows)
    tokens = _tokens(records, source, model.max_len)
    if motifs and len({len(t) for t in tokens}) > 1:
        raise UserInputError(f"{source or 'inputs'}: --motifs needs records of one length, got lengths "
                             f"{', '.join(map(str, sorted({len(t) for t in tokens})[:5]))}")
    rc_average = {"model": None, "both": True, "forward": False}[strand]
    batches = [collate_tokens(tokens[start : start + batch_size]) for start in range(0, len(tokens), batch_size)]

    def probe() -> float:
        start = time.perf_counter()
        promoter_attribution(model, *batches[0], "gradient_x_input", rc_average=rc_average)
        return (time.perf_counter() - start) * len(batches)

    sample = tokens[:AUTO_SAMPLE]
    method = resolve_method(method, FAITHFULNESS_ORDER, probe, lambda methods: _faithfulness(
        model, sample, batch_size, rc_average, head_fusion, start_layer, faithfulness_steps, methods),
        faithfulness_steps=faithfulness_steps, sample=f"the first {len(sample)} sequences", costs=RELATIVE_COST)
    ylabel = method_label(method)
    probabilities = []
    lengths = np.array([len(t) for t in tokens])
    influence = np.zeros((len(tokens), int(lengths.max())))
    for start, (ids, padding_mask) in zip(range(0, len(tokens), batch_size),
                                          progress_bar(batches, desc=f"explain promoter ({method})", unit="batch")):
        probabilities.append(model.proba_from_ids(ids.to(device_), padding_mask.to(device_), rc_average=rc_average).cpu())
        influence[start : start + len(ids), : ids.shape[1]] = promoter_attribution(
            model, ids, padding_mask, method, rc_average=rc_average, head_fusion=head_fusion, start_layer=start_layer,
            seed=start).cpu().numpy()
    first_weights = explain_promoters(ensemble_members(model)[0], *batches[0], head_fusion=head_fusion,
                                      start_layer=start_layer, rc_average=rc_average).weights
    probability = torch.cat(probabilities).numpy()
    predicted = model.predicted_classes(probability)
    per_class = model.class_probabilities(probability)
    names = model.class_names
    offset = tss_index if tss_index is not None else 0
    xlabel = "position relative to TSS" if tss_index is not None else "position (0-based)"
    probability_columns = ["probability"] if model.binary else [f"p_{name}" for name in names]
    tables = {
        "predictions.tsv": (["id", "length", *probability_columns, "predicted_label"],
                            [[r.id, n, *(per_class[row, 1:] if model.binary else per_class[row]), names[k]]
                             for row, (r, n, k) in enumerate(zip(records, lengths, predicted))]),
        "influence.tsv": (["id", "position", "relative_position", "nucleotide", "influence"],
                          [[r.id, i, i - offset, r.sequence[i].upper(), float(influence[row, i])]
                           for row, r in enumerate(records) for i in range(lengths[row])]),
    }
    mean, std, counts = influence_profile(influence, lengths)
    positions = np.arange(len(mean)) - offset
    groups = [(name, chosen) for name, chosen in _predicted_groups(model, predicted) if chosen.any()]
    group_means = [influence_profile(influence[chosen], lengths[chosen])[0] for _, chosen in groups]
    tables["influence_profile.tsv"] = (
        ["position", "relative_position", "sequences", "mean", "sd", *(f"mean_{name}" for name, _ in groups)],
        [[i, int(positions[i]), int(counts[i]), float(mean[i]), float(std[i]), *(float(g[i]) for g in group_means)]
         for i in range(len(mean))])

    def draw_tracks(out: Path) -> None:
        for row, record in enumerate(records[:plot_sequences]):
            plot_rollout_track(influence[row, : lengths[row]], out / "tracks" / f"{_safe_name(row, record.id)}.png",
                               positions=np.arange(lengths[row]) - offset, sequence=record.sequence.upper(),
                               spans=spans, title=_track_title(model, record.id, per_class[row], predicted[row]),
                               xlabel=xlabel, ylabel=ylabel)
        plot_rollout_track(mean, out / "influence_profile.png", positions=positions, spans=spans,
                           spread=std / np.sqrt(np.maximum(counts, 1)), spread_label="± s.e.m.",
                           others={f"mean, {name.replace('_', ' ')} (n={int(chosen.sum())})": g
                                   for (name, chosen), g in zip(groups, group_means)},
                           label=f"mean over {len(tokens)} sequences", xlabel=xlabel, ylabel=ylabel,
                           title=f"where the model looks ({method}"
                                 + (f", {head_fusion} head fusion)" if method == "rollout" else ")"))
        write_layer_figures(first_weights, out, what="promoter attention (first batch; token 0 = [CLS])")

    sharpness = _sharpness(model, batches[0])
    top = np.argsort(mean)[::-1][:10]
    summary = {
        "run": label, "input": str(source) if source is not None else "in-memory sequences", "sequences": len(tokens),
        "predicted": {name: int((predicted == k).sum()) for k, name in enumerate(names)}, "method": method,
        "head_fusion": head_fusion, "start_layer": start_layer, "strand": strand, "tss_index": tss_index,
        "top_positions": [{"relative_position": int(positions[i]), "mean_influence": float(mean[i])} for i in top],
        "head_similarity": layer_similarities(first_weights), "head_sharpness": sharpness_summary(sharpness),
    }

    def draw_sharpness(out: Path) -> None:
        from bioattn.explain.faithfulness_figures import plot_head_sharpness
        plot_head_sharpness(sharpness, out / "head_sharpness.png", title="promoter attention: per-head sharpness")

    figures = [draw_tracks, draw_sharpness]
    if method == "rollout":
        summary["cls_self_share_mean"] = float(1 - influence.sum(1).mean())
        summary["uniform_influence"] = float(influence.sum(1).mean() / lengths.mean())
    if faithfulness:
        results = _faithfulness(model, tokens[:faithfulness_sequences], batch_size, rc_average, head_fusion,
                                start_layer, faithfulness_steps)
        summary["faithfulness"] = results
        n = len(tokens[:faithfulness_sequences])
        figures.append(lambda out: write_faithfulness(
            results, out, unit="nucleotides", title=f"promoter: faithfulness on {n} sequences (nucleotides → N)"))
    if motif:
        magnitude = np.abs(influence)
        summary["motif_influence"] = "absolute value" if (influence < 0).any() else "value"
        summary["motif"] = motif_enrichment([r.sequence for r in records], magnitude, motif).summary()
        for name, chosen in groups:
            summary[f"motif_in_{name}"] = motif_enrichment(
                [r.sequence for r, c in zip(records, chosen) if c], magnitude[chosen], motif).summary()
    report = None
    if motifs:
        from bioattn.explain.motif_report import finding_rows, write_motif_report
        from bioattn.explain.motifs import explain_motifs

        report = explain_motifs(model, [r.sequence for r in records], tss_index=tss_index, database=database,
                                q_threshold=motif_q, rc_average=rc_average, target=motif_target, batch_size=batch_size,
                                attribution=motif_attribution, use=motif_sequences, background=motif_background)
        findings = finding_rows(report)
        summary["motifs"] = {"patterns": len(report.patterns), "findings": findings,
                             "matched": sum(row["significant"] for row in findings), "database": report.database,
                             "composition": [p.name for p in report.patterns if p.composition],
                             "background": report.background, "q_threshold": report.q_threshold,
                             "seconds": report.seconds, "families": len(report.matched_families())}
        figures.append(lambda out: write_motif_report(report, out))
    if known_motifs:
        tables["known_motifs.tsv"], summary["known_motifs"] = _known_motifs(
            model, [r.sequence for r in records[:known_motifs]], tss_index, rc_average, batch_size)
    return saved_under(PromoterExplanation(summary=summary, tables=tables, figures=figures, influence=influence,
                                           lengths=lengths, probabilities=probability, predicted=predicted,
                                           method=method, motif=motif, motif_report=report), out, overwrite)


def _known_motifs(model: Any, sequences: list[str], tss_index: int, rc_average: bool | None,
                  batch_size: int) -> tuple[tuple[list[str], list[list[Any]]], dict[str, Any]]:
    """``known_motifs.tsv`` and its summary: core-promoter motifs planted into shuffles of ``sequences``."""
    from bioattn.explain.marginalize import (DEFAULT_SHUFFLES, jaspar_consensus, marginalize_known_motifs,
                                             shuffled_backgrounds)
    motifs = jaspar_consensus()
    rows = marginalize_known_motifs(model, {label: consensus for label, (_, consensus) in motifs.items()},
                                    shuffled_backgrounds(sequences), tss_index=tss_index, rc_average=rc_average,
                                    batch_size=batch_size)
    columns = ["motif", "jaspar_id", "consensus", "position", "start", "covers_tss", "sequences", "effect_mean", "effect_sd",
               "control_mean", "control_sd", "control_shuffle_sd", "difference_mean", "difference_sd", "difference_se", "fraction_up"]
    table = [[row["motif"], motifs[row["motif"]][0], *(row[c] for c in columns[2:])] for row in rows]
    away = [row for row in rows if not row["covers_tss"]]
    best = max(away, key=lambda row: row["difference_mean"]) if away else None
    return (columns, table), {
        "backgrounds": f"dinucleotide shuffles of the first {len(sequences)} sequences",
        "control": f"{DEFAULT_SHUFFLES} shuffles of each motif's letters at the same place",
        "largest_away_from_tss": {k: best[k] for k in ("motif", "position", "difference_mean", "difference_se")} if best else None}


def describe(result: PromoterExplanation, out: Path | None = None) -> str:
    """What ``bioattn explain promoter`` prints once ``result`` is saved in ``out`` (default ``result.saved_to``)."""
    from bioattn.explain.outputs import faithfulness_table
    summary, out = result.summary, out if out is not None else result.saved_to
    lines = [f"explained {summary['sequences']} sequences with {result.method} -> {where(out)}"]
    if "motifs" in summary:
        lines += _describe_motifs(summary["motifs"], where(out, "motifs.html"))
    largest = summary.get("known_motifs", {}).get("largest_away_from_tss")
    if largest:
        lines.append(f"known motifs: largest effect off the TSS {largest['motif']} at {largest['position']:+d} nt, log-odds "
                     f"{largest['difference_mean']:+.2f} ± {largest['difference_se']:.2f} (s.e.) beyond its shuffles -> "
                     f"{where(out, 'known_motifs.tsv')}")
    if "faithfulness" in summary:
        lines.append(faithfulness_table(summary["faithfulness"]))
    motif = summary.get("motif")
    if result.motif and motif["sequences_with_match"]:
        by_sequence = motif["enrichment_vs_sequence_mean"]["mean"]
        by_position = motif["enrichment_vs_same_positions_without_motif"]["mean"]
        lines.append(f"{result.motif}: in {motif['sequences_with_match']}/{summary['sequences']} sequences; "
                     f"influence on it is {by_sequence:.2f}x the sequence mean"
                     + (f", {by_position:.2f}x the same positions in sequences without it" if by_position is not None else ""))
    return "\n".join(lines)


def _describe_motifs(found: dict[str, Any], page: str) -> list[str]:
    """The motif lines ``describe`` prints: the pattern counts, then one line per finding (at most 5)."""
    from bioattn.explain.motif_report import describe_finding
    findings, composition = found["findings"], found["composition"]
    matched = (f"{found['matched']} matching {found['database']} at q < {found['q_threshold']:g} "
               f"({found['families']} TF families)" if found["database"] != "none" else "no database (--motif-db none)")
    counts = f"{len(findings)} findings"
    if found["background"]:
        counts += f", {len(composition)} composition (the dinucleotide-shuffled background yields them too; not listed)"
    lines = [f"motifs: {found['patterns']} patterns: {counts}; {matched} -> {page}"]
    lines += [f"  {k}. {describe_finding(row, found['q_threshold'])}" for k, row in enumerate(findings[:5], 1)]
    if len(findings) > 5:
        lines.append(f"  ... {len(findings) - 5} more findings in motifs.html")
    return lines
