"""``explain_activity``: per-nucleotide attributions, faithfulness, motifs and known-motif weights of a model."""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from bioattn.data.dna import N_ID, PAD_ID, encode, strand_average
from bioattn.errors import UserInputError
from bioattn.explain.attribution import check_method, layer_attribution, method_label, random_map
from bioattn.explain.faithfulness import compare_methods
from bioattn.explain.result import AUTO_SAMPLE, SequenceExplanation, check_out_dir, resolve_method, saved_under, where
from bioattn.models.activity import STRANDS, ActivityRegressor, strip_flanks
from bioattn.models.ensemble import ensemble_members
from bioattn.progress import progress_bar
from bioattn.tasks.activity.branches import top_motif_weights
from bioattn.tasks.activity.methods import ACTIVITY_METHODS, KNOWN_MOTIF_WEIGHTS
from bioattn.tasks.activity.explained import (
    MIN_DEPARTURE, OneHotValue, activity_members, departures, mean_values, measurable, read_inputs,
)

FAITHFULNESS_ORDER = ("ism", "integrated_gradients", "gradient_x_input")
GRADIENT_SCOPE = ("the deep part of the model only: its known-motif and k-mer branches read base identities, which "
                  "have no gradient (ism scores the whole model)")
FAITHFULNESS_NOTE = ("AUCs: area under the predicted value's departure from the all-N sequence's value, divided by the "
                     "intact sequence's departure, over the fraction of nucleotides replaced by N (0 to 1); deletion "
                     "replaces the top-ranked nucleotides first, insertion reveals them first. Deletion can fall below "
                     "0 and insertion exceed 1: part of a sequence alone can move the value further than the whole "
                     "sequence does.\nseconds (maps): time to compute each method's maps, not the curves.")


@dataclasses.dataclass
class ActivityExplanation(SequenceExplanation):
    """``attribution (N, L_max)`` of ``target``, ``values (N, T)`` (ensemble mean), ``member_values (M, N, T)``."""

    attribution: np.ndarray = None
    values: np.ndarray = None
    member_values: np.ndarray = None
    target: str = ""
    motif_weights: list = dataclasses.field(default_factory=list)


def deep_part_used(members: Sequence[ActivityRegressor]) -> bool:
    """Whether any member's deep part reaches its output (a kept ridge alone has its head scaled to 0)."""
    return any(bool(m.head[-1].weight.detach().abs().max() > 0) or bool(m.head[-1].bias.detach().abs().max() > 0)
               for m in members)


def activity_attribution(members: Sequence[ActivityRegressor], tokens: Tensor, method: str, *, target: int = 0,
                         strand: str | None = None, seed: int = 0, hypothetical: bool = False) -> Tensor:
    """``(B, L)`` → ``(B, L)`` map of output ``target``, 0 at padding; ``hypothetical`` (ism): ``(B, L, 4)``."""
    from bioattn.explain.ism import saturation_scores
    check_method(method, ACTIVITY_METHODS)
    device = next(members[0].parameters()).device
    tokens = tokens.to(device)
    padding = tokens == PAD_ID
    real = (~padding).float().cpu()
    if method == "random":
        return random_map(tuple(tokens.shape), torch.Generator().manual_seed(seed)) * real
    if method == "ism":
        return saturation_scores(OneHotValue(members, target, strand), tokens, padding, hypothetical=hypothetical,
                                 device=device)
    if hypothetical:
        raise ValueError("hypothetical contributions come from ism")

    def explain(member: ActivityRegressor) -> Tensor:
        def one_strand(ids: Tensor) -> Tensor:
            baselines = ids.masked_fill(ids != PAD_ID, N_ID)
            values = layer_attribution(method, lambda x: member(x)["values"][:, target].float(), member.embedding, ids,
                                       baselines=baselines)
            return values.sum(-1).detach()

        both = (strand or member.strand) == "both"
        return strand_average(one_strand, tokens, padding, per_position=True) if both else one_strand(tokens)

    return torch.stack([explain(member) for member in members]).mean(0).float().cpu() * real


def attribute_tokens(model: nn.Module, ids: Tensor, method: str, **options: Any) -> Tensor:
    """``(B, L)`` → ``(B, L)``: :func:`activity_attribution` of a model or an ensemble."""
    return activity_attribution([m.eval() for m in ensemble_members(model)], ids, method, **options)


def _batches(tokens: Tensor, batch_size: int) -> list[Tensor]:
    """Rows of ``tokens`` in batches, each cut to its longest element."""
    rows = [tokens[start : start + batch_size] for start in range(0, len(tokens), batch_size)]
    return [batch[:, : int((batch != PAD_ID).sum(1).max())] for batch in rows]


def _attribution_rows(members, tokens: Tensor, method: str, target: int, strand: str | None, batch_size: int,
                      bar: Any = None) -> list[Tensor]:
    """One ``(n_i,)`` map per row of ``tokens``."""
    maps = []
    for index, batch in enumerate(_batches(tokens, batch_size)):
        values = activity_attribution(members, batch, method, target=target, strand=strand, seed=index)
        maps.extend(values[row, : int((batch[row] != PAD_ID).sum())] for row in range(len(batch)))
        if bar is not None:
            bar.update(len(batch))
    return maps


def _faithfulness(members, tokens: Tensor, target: int, strand: str | None, batch_size: int, steps: int,
                  methods: Sequence[str]) -> dict:
    """Deletion/insertion AUC of ``methods`` on the :func:`measurable` rows of ``tokens`` (``{}``: none)."""
    device = next(members[0].parameters()).device
    tokens = tokens[measurable(members, tokens, target, strand)].to(device)
    if not len(tokens):
        return {}
    blank, departure = departures(members, tokens, target, strand)
    sign = torch.sign(departure)

    def scorer(row: int):
        ids = tokens[row, : int((tokens[row] != PAD_ID).sum())]

        @torch.no_grad()
        def score(masks: Tensor) -> Tensor:
            batch = ids[None].expand(len(masks), -1).masked_fill(masks.to(device), N_ID)
            return sign[row] * (mean_values(members, batch, target, strand) - blank[row])

        return score

    scores = [scorer(row) for row in range(len(tokens))]
    bar = progress_bar(total=len(methods) * len(tokens), desc=f"faithfulness over {len(tokens)} sequences", unit="map")

    def attribute(method: str) -> list[Tensor]:
        maps = _attribution_rows(members, tokens, method, target, strand, batch_size, bar)
        return maps if method == "random" else [m * float(s) for m, s in zip(maps, sign.cpu())]

    try:
        return compare_methods(attribute, scores, methods, steps=steps)
    finally:
        bar.close()


def _safe_name(index: int, record_id: str) -> str:
    return f"{index:04d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', record_id)[:60]}"


def explain_activity(model: Any, inputs: str | os.PathLike | Sequence[str] | Sequence[Any], *, method: str = "auto",
                     target: str | int | None = None, strand: str | None = None, max_rows: int = 1000,
                     batch_size: int = 64, plot_sequences: int = 6, faithfulness: bool = True,
                     faithfulness_sequences: int = 32, faithfulness_steps: int = 20, motifs: bool = False,
                     motif_db: str = "jaspar", motif_q: float = 0.05, motif_background: bool = True,
                     known_motif_weights: int = KNOWN_MOTIF_WEIGHTS, device: str = "auto",
                     out: str | os.PathLike | None = None, overwrite: bool = False) -> ActivityExplanation:
    """Explain an activity model (a model, ensemble, run directory or shipped name) on a file or sequences."""
    check_out_dir(out, overwrite=overwrite)
    from bioattn.tasks.promoter.influence import influence_profile
    check_method(method, ("auto", *ACTIVITY_METHODS))
    for name, value, least in (("max_rows", max_rows, 1), ("batch_size", batch_size, 1), ("plot_sequences", plot_sequences, 0),
                               ("faithfulness_sequences", faithfulness_sequences, 1),
                               ("known_motif_weights", known_motif_weights, 0)):
        if value < least:
            raise UserInputError(f"--{name.replace('_', '-')} must be >= {least}, got {value}")
    if strand is not None and strand not in STRANDS:
        raise UserInputError(f"--strand must be one of {', '.join(STRANDS)}, got {strand!r}")
    database = None
    if motifs:
        from bioattn.explain.motif_db import load_motif_database

        if not 0 < motif_q <= 1:
            raise UserInputError(f"--motif-q must be in (0, 1], got {motif_q}")
        database = load_motif_database(motif_db)
    members, label = activity_members(model, device)
    names = list(members[0].target_names)
    target = names[0] if target is None else names[target] if isinstance(target, int) and target in range(len(names)) else target
    if target not in names:
        raise UserInputError(f"--target {target!r}: the model predicts {', '.join(names)}")
    column = names.index(target)
    ids, sequences, source = read_inputs(inputs, max_rows)
    prefix = f"{source}: " if source else ""
    tokens = members[0].tokenize(sequences, [f"{prefix}record {i!r}" for i in ids])
    elements = [strip_flanks(s, members[0].flanks).upper() for s in sequences]
    lengths = (tokens != PAD_ID).sum(1).numpy()
    if motifs and len(set(lengths.tolist())) > 1:
        raise UserInputError(f"{source or 'inputs'}: --motifs needs elements of one length (flanks removed), got "
                             f"lengths {', '.join(map(str, sorted(set(lengths.tolist()))[:5]))}")
    member_values = np.stack([m.predict_tokens(tokens, batch_size=batch_size, strand=strand) for m in members])
    values = member_values.mean(0)  # (N, T)
    batches = _batches(tokens, batch_size)

    def probe() -> float:
        start = time.perf_counter()
        activity_attribution(members, batches[0], "gradient_x_input", target=column, strand=strand)
        return (time.perf_counter() - start) * len(batches)

    sample = tokens[:AUTO_SAMPLE]
    measure = None
    if not deep_part_used(members):
        if method == "auto":
            method = "ism"
            print("explain: method ism: the model is its linear branches alone (the run kept a ridge, the deep part "
                  "has weight 0), which only in-silico mutagenesis sees; gradient maps would all be 0", file=sys.stderr)
        elif method in ("integrated_gradients", "gradient_x_input"):
            print(f"warning: the model is its linear branches alone (the deep part has weight 0): every {method} map "
                  "is 0; --method ism scores the whole model", file=sys.stderr)
    if method == "auto" and bool(measurable(members, sample, column, strand).any()):
        def measure(methods: Sequence[str]) -> dict:
            return _faithfulness(members, sample, column, strand, batch_size, faithfulness_steps, methods)
    method = resolve_method(method, FAITHFULNESS_ORDER, probe, measure, faithfulness_steps=faithfulness_steps,
                            sample=f"the first {len(sample)} sequences")
    with progress_bar(total=len(tokens), desc=f"explain activity ({method})", unit="seq") as bar:
        maps = _attribution_rows(members, tokens, method, column, strand, batch_size, bar)
    attribution = np.zeros((len(tokens), int(lengths.max())))  # (N, L_max), zero past each element's end
    for row, values_row in enumerate(maps):
        attribution[row, : len(values_row)] = values_row.numpy()
    high = values[:, column] >= np.median(values[:, column])
    groups = {"predicted_high": high, "predicted_low": ~high}
    mean, sd, counts = influence_profile(attribution, lengths)
    group_means = {name: influence_profile(attribution[chosen], lengths[chosen])[0]
                   for name, chosen in groups.items() if chosen.any()}
    ensemble = len(members) > 1
    value_columns = [*names, *(f"{name}_members_sd" for name in names if ensemble)]
    spread = member_values.std(0)
    tables = {
        "predictions.tsv": (["id", "length", *value_columns],
                            [[i, int(n), *values[row], *(spread[row] if ensemble else [])]
                             for row, (i, n) in enumerate(zip(ids, lengths))]),
        "attribution.tsv": (["id", "position", "nucleotide", "attribution"],
                            [[i, p, elements[row][p], float(attribution[row, p])]
                             for row, i in enumerate(ids) for p in range(lengths[row])]),
        "attribution_profile.tsv": (["position", "sequences", "mean", "sd", *(f"mean_{g}" for g in group_means)],
                                    [[p, int(counts[p]), float(mean[p]), float(sd[p]),
                                      *(float(g[p]) for g in group_means.values())] for p in range(len(mean))]),
    }
    weights = top_motif_weights(members, count=known_motif_weights, target=column) if known_motif_weights else []
    weight_note = ("" if weights or not known_motif_weights else
                   "no member has a known-motif branch (trained with --blend none or kmers, or the deep model was kept "
                   "alone): the model has no known-motif weights")
    if weights:
        tables["known_motif_weights.tsv"] = (
            ["rank", "id", "name", "part", "of", "score", "weight", *(("weight_sd", "members_with_branch", "member_weights")
                                                                      if ensemble else ())],
            [[k, w["id"], w["name"], w["part"], w["of"], w["score"], w["weight"],
              *((w["weight_sd"], w["members_with_branch"], ",".join(f"{v:.6g}" for v in w["member_weights"]))
                if ensemble else ())] for k, w in enumerate(weights, 1)])
    ylabel = method_label(method).replace("log-odds change", "value change")
    top = np.argsort(mean)[::-1][:10]
    summary = {
        "run": label, "input": source or "in-memory sequences", "sequences": len(ids), "members": len(members),
        "target": target, "targets": names, "method": method, "strand": strand or members[0].strand,
        "predicted": {"mean": float(values[:, column].mean()), "sd": float(values[:, column].std()),
                      "min": float(values[:, column].min()), "max": float(values[:, column].max())},
        "top_positions": [{"position": int(p), "mean_attribution": float(mean[p])} for p in top],
        "known_motif_weights": {"rows": weights[:10], "note": weight_note,
                                "units": "sd of the target per sd of the motif score" + (
                                    "; mean over the members (0 for a member without the branch)" if ensemble else "")},
    }
    if method in ("integrated_gradients", "gradient_x_input"):
        summary["gradient_scope"] = GRADIENT_SCOPE

    def draw(out_dir: Path) -> None:
        from bioattn.explain.figures import plot_rollout_track
        for row in range(min(plot_sequences, len(ids))):
            n = int(lengths[row])
            plot_rollout_track(attribution[row, :n], out_dir / "tracks" / f"{_safe_name(row, ids[row])}.png",
                               sequence=elements[row], xlabel="position in the element (0-based)", ylabel=ylabel,
                               title=f"{ids[row]}: predicted {target} = {values[row, column]:.3g}")
        plot_rollout_track(mean, out_dir / "attribution_profile.png", spread=sd / np.sqrt(np.maximum(counts, 1)),
                           spread_label="± s.e.m.", label=f"mean over {len(ids)} sequences",
                           others={f"mean, {g.replace('_', ' ')} (n={int(groups[g].sum())})": v
                                   for g, v in group_means.items()},
                           xlabel="position in the element (0-based)", ylabel=ylabel,
                           title=f"what moves the predicted {target} ({method})")

    figures = [draw]
    if faithfulness:
        from bioattn.explain.outputs import write_faithfulness

        chosen = tokens[:faithfulness_sequences]
        results = _faithfulness(members, chosen, column, strand, batch_size, faithfulness_steps, ACTIVITY_METHODS)
        examples = results["random"]["examples"] if results else 0
        summary["faithfulness"] = results
        summary["faithfulness_scope"] = (
            f"{examples} of the first {len(chosen)} sequences (those predicted at least {MIN_DEPARTURE} training sd "
            "away from the all-N sequence's value); the curves follow the value's departure from the all-N value, 1 = "
            "the intact sequence's")
        if results:
            figures.append(lambda out_dir: write_faithfulness(
                results, out_dir, unit="nucleotides", title=f"activity: faithfulness on {examples} sequences (nucleotides → N)"))
    report = None
    if motifs:
        from bioattn.explain.motif_report import motif_summary, write_motif_report

        report = _motif_report(members, elements, column, strand, batch_size, groups, database, motif_q,
                               motif_background)
        summary["motifs"] = motif_summary(report)
        figures.append(lambda out_dir: write_motif_report(report, out_dir))
    return saved_under(ActivityExplanation(summary=summary, tables=tables, figures=figures, attribution=attribution,
                                           lengths=lengths, values=values, member_values=member_values, method=method,
                                           target=target, motif_weights=weights, motif_report=report), out, overwrite)


def _motif_report(members, elements: list[str], column: int, strand: str | None, batch_size: int,
                  groups: dict[str, np.ndarray], database: Any, q_threshold: float, background: bool) -> Any:
    """The motif report of the ISM hypothetical contributions of ``elements`` (one length)."""
    from bioattn.explain.motifs import report_motifs
    def attribute(sequences: Sequence[str], label: str = "motifs") -> np.ndarray:
        ids = torch.as_tensor(np.stack([encode(s) for s in sequences]))
        chunks = [activity_attribution(members, ids[s : s + batch_size], "ism", target=column, strand=strand,
                                       hypothetical=True)
                  for s in progress_bar(range(0, len(ids), batch_size), desc=f"{label}: in-silico mutagenesis",
                                        unit="batch")]
        return torch.cat(chunks).numpy()

    start = time.perf_counter()
    hypothetical = attribute(elements)
    seconds = {"ism": time.perf_counter() - start}
    label = ("in-silico mutagenesis, predicted " + members[0].target_names[column] + " (hypothetical contributions"
             + (f", every edit scored by the mean of the {len(members)} members)" if len(members) > 1 else ")"))
    return report_motifs(elements, hypothetical, attribute, groups=groups, attribution=label, database=database,
                         q_threshold=q_threshold, background=background, seconds=seconds)


def describe(result: ActivityExplanation, out: Path | None = None) -> str:
    """What ``bioattn explain activity`` prints once ``result`` is saved."""
    from bioattn.explain.outputs import faithfulness_table
    from bioattn.tasks.promoter.explain import _describe_motifs
    summary, out = result.summary, out if out is not None else result.saved_to
    members = f", the mean of {summary['members']} members" if summary["members"] > 1 else ""
    lines = [f"explained {summary['sequences']} sequences ({summary['target']}{members}) with {result.method} -> "
             f"{where(out)}"]
    if "motifs" in summary:
        lines += _describe_motifs(summary["motifs"], where(out, "motifs.html"))
    known = summary["known_motif_weights"]
    if known["rows"]:
        spread = summary["members"] > 1
        lines.append(f"known-motif weights ({known['units']}) -> {where(out, 'known_motif_weights.tsv')}:")
        lines += [f"  {w['name']} {w['id']} ({w['score']}, part {w['part'] + 1} of {w['of']}): {w['weight']:+.3f}"
                  + (f" ± {w['weight_sd']:.3f} over members, branch in {w['members_with_branch']}/{summary['members']}"
                     if spread else "") for w in known["rows"][:5]]
    elif known["note"]:
        lines.append(f"known-motif weights: {known['note']}")
    if "gradient_scope" in summary:
        lines.append(f"note: {result.method} explains {GRADIENT_SCOPE}")
    if summary.get("faithfulness"):
        lines.append(faithfulness_table(summary["faithfulness"], FAITHFULNESS_NOTE))
    elif "faithfulness" in summary:
        lines.append("faithfulness: no sequence is predicted far enough from the all-N sequence's value to measure it")
    return "\n".join(lines)
