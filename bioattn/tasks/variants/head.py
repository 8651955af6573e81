"""Features of a variant-effect head and its predictions.

Model features (no labels), from a DNA activity model, for each output ``t`` (suffix ``_t`` when several):

- ``delta``: alternative minus reference, averaged over placements and strands; ``delta_o<offset>``: per placement;
  ``delta_sd``: spread over the placements; ``abs_delta``; ``ref_activity``: the reference window's prediction;
  ``delta_fwd`` / ``delta_rev`` when both strands are scored;
- in-silico mutagenesis around the variant (every SNV within ``ism_radius`` nt scored the same way):
  ``ism_here`` (mean |Δ| of the three alleles at the variant's position), ``ism_local`` (mean of that over the
  positions within the radius), ``ism_local_max``, ``ism_allele`` (this allele's Δ minus the mean Δ at its position;
  for a deletion, insertion or multi-base substitution, the SNVs at its POS);
- embedding summaries when the model has ``embed``: ``embed_l2`` (norm of alt - ref pooled embedding) and
  ``embed_cos`` (1 - cosine similarity).

Nearby-effect features (no model), from a release of measured effects: ``nearby_effect`` (Gaussian-weighted mean,
bandwidth ``bandwidth`` nt, of the measured effects within ``radius`` nt on the same contig; the mean of the contig's other
blocks where none lies that close), ``nearby_same_alt``
(the same over variants with the same alternative base) and ``nearby_weight`` (the total weight, i.e. how much
evidence there is). The query's own block of ``block`` positions is always left out, so a measured variant never
sees itself or its block-mates, exactly as a held-out block of cross-validation does not.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from bioattn.tasks.variants.records import Variant
from bioattn.tasks.variants.saturation import BASES
from bioattn.tasks.variants.score import AlleleScores, allele_scores, as_dna_model

ISM_RADIUS = 4
NEARBY = ("nearby_effect", "nearby_same_alt", "nearby_weight")


def _ism_set(reference: Any, variants: Sequence[Variant],
             radius: int) -> tuple[list[Variant], dict[tuple[str, int, str, str], int]]:
    """Every SNV at the positions within ``radius`` of a variant; and the row of each (chrom, pos, ref, alt)."""
    wanted: dict[str, set[int]] = {}
    for v in variants:
        length = len(reference[v.chrom])
        wanted.setdefault(v.chrom, set()).update(range(max(1, v.pos - radius), min(length, v.pos + radius) + 1))
    out: list[Variant] = []
    row: dict[tuple[str, int, str, str], int] = {}
    for chrom, positions in wanted.items():
        ordered = sorted(positions)
        record = reference[chrom]
        for pos in ordered:
            ref = str(record[pos - 1 : pos]).upper()
            if ref not in BASES:
                continue
            for allele, alt in enumerate(b for b in BASES if b != ref):
                row[(chrom, pos, ref, alt)] = len(out)
                out.append(Variant(chrom, pos, ref, alt, len(out), allele, f"{chrom}:{pos}"))
    return out, row


def model_features(model: Any, reference: Any, variants: Sequence[Variant], *, offsets: Sequence[int] | None = None,
                   strands: str = "auto", reverse: Callable[[str], bool] | None = None,
                   ism_radius: int | None = ISM_RADIUS, embed: bool = True,
                   progress: bool = False) -> tuple[list[str], np.ndarray, AlleleScores, np.ndarray]:
    """``(names, features (N, F), the variants' AlleleScores, rows of the variants in the ISM set)``.

    ``ism_radius=None`` scores the variants alone (the ``ism_*`` columns then read only the variants' own
    alleles), ``embed=False`` skips the embedding columns: for a head that uses neither."""
    dna = as_dna_model(model)
    embed = embed and hasattr(dna, "embed")
    if ism_radius is None:
        ism = list(variants)
        row = {(v.chrom, v.pos, v.ref, v.alt): i for i, v in enumerate(variants)}
    else:
        ism, row = _ism_set(reference, variants, ism_radius)
    snvs = len(ism)  # the ISM set's SNVs; an MNV or indel is scored after them and its position read from them
    for v in variants:
        if (v.chrom, v.pos, v.ref, v.alt) not in row:
            row[(v.chrom, v.pos, v.ref, v.alt)] = len(ism)
            ism.append(v)
    scores = allele_scores(dna, reference, ism, offsets=offsets, strands=strands, reverse=reverse, embed=embed,
                           progress=progress)
    rows = np.array([row[(v.chrom, v.pos, v.ref, v.alt)] for v in variants], dtype=np.int64)
    mine = AlleleScores(scores.ref[rows], scores.alt[rows], scores.weights[rows], scores.offsets[rows],
                        None if scores.ref_embed is None else scores.ref_embed[rows],
                        None if scores.alt_embed is None else scores.alt_embed[rows])
    all_delta = scores.mean(scores.alt) - scores.mean(scores.ref)  # (M, T)
    position_index: dict[tuple[str, int], list[int]] = {}
    for i, v in enumerate(ism[:snvs]):
        position_index.setdefault((v.chrom, v.pos), []).append(i)
    names: list[str] = []
    columns: list[np.ndarray] = []
    targets = list(dna.target_names)
    for t, target in enumerate(targets):
        suffix = "" if len(targets) == 1 else f"_{target}"
        ref, alt = mine.mean(mine.ref)[:, t], mine.mean(mine.alt)[:, t]
        per_placement = (mine.alt - mine.ref).mean(axis=2)[:, :, t]  # (N, P)
        w = mine.weights
        mean_pp = (per_placement * w).sum(1) / w.sum(1)
        sd = np.sqrt(((per_placement - mean_pp[:, None]) ** 2 * w).sum(1) / w.sum(1))
        block = {"delta": alt - ref, "abs_delta": np.abs(alt - ref), "ref_activity": ref, "delta_sd": sd}
        for p in range(per_placement.shape[1]):
            block[f"delta_p{p}"] = per_placement[:, p]
        if mine.ref.shape[2] == 2:
            block["delta_fwd"] = (mine.alt - mine.ref)[:, :, 0, t].mean(1)
            block["delta_rev"] = (mine.alt - mine.ref)[:, :, 1, t].mean(1)
        here, local, local_max, allele = (np.zeros(len(variants)) for _ in range(4))
        sensitivity = {key: np.abs(all_delta[idx, t]).mean() for key, idx in position_index.items()}
        for i, v in enumerate(variants):
            idx = position_index[(v.chrom, v.pos)]
            here[i] = sensitivity[(v.chrom, v.pos)]
            near = [sensitivity[(v.chrom, p)] for p in range(v.pos - (ism_radius or 0), v.pos + (ism_radius or 0) + 1)
                    if (v.chrom, p) in sensitivity]
            local[i], local_max[i] = np.mean(near), np.max(near)
            allele[i] = all_delta[rows[i], t] - all_delta[idx, t].mean()
        block.update({"ism_here": here, "ism_local": local, "ism_local_max": local_max, "ism_allele": allele})
        for key, value in block.items():
            names.append(key + suffix)
            columns.append(value)
    if mine.ref_embed is not None:
        diff = (mine.alt_embed - mine.ref_embed).mean(axis=2)  # (N, P, D)
        w = mine.weights
        names.append("embed_l2")
        columns.append((np.linalg.norm(diff, axis=2) * w).sum(1) / w.sum(1))
        ref_e, alt_e = mine.mean(mine.ref_embed), mine.mean(mine.alt_embed)
        cos = (ref_e * alt_e).sum(1) / np.maximum(np.linalg.norm(ref_e, axis=1) * np.linalg.norm(alt_e, axis=1), 1e-12)
        names.append("embed_cos")
        columns.append(1.0 - cos)
    return names, np.column_stack(columns), mine, rows


def nearby_features(chrom: np.ndarray, pos: np.ndarray, alt: np.ndarray, release: Any, *, bandwidth: float = 6.0,
                    radius: int = 24, block: int = 16) -> np.ndarray:
    """``(N, 3)`` :data:`NEARBY` features of query variants (``chrom``, 1-based ``pos``, ``alt`` arrays) from the
    measured ``release`` (a DataFrame with chrom, pos, alt, effect), leaving out each query's own block."""
    out = np.zeros((len(chrom), len(NEARBY)))
    r_chrom = release["chrom"].to_numpy().astype(str)
    r_pos = release["pos"].to_numpy().astype(np.int64)
    r_alt = release["alt"].to_numpy().astype(str)
    r_eff = release["effect"].to_numpy().astype(np.float64)
    chrom = np.asarray(chrom).astype(str)
    pos = np.asarray(pos).astype(np.int64)
    alt = np.asarray(alt).astype(str)
    for name in np.unique(chrom):
        q = np.flatnonzero(chrom == name)
        r = np.flatnonzero((r_chrom == name) & np.isfinite(r_eff))
        if not len(r):
            continue
        distance = np.abs(pos[q, None] - r_pos[None, r])
        w = np.exp(-0.5 * (distance / bandwidth) ** 2)
        w[distance > radius] = 0.0
        w[(pos[q, None] - 1) // block == (r_pos[None, r] - 1) // block] = 0.0
        total = w.sum(1)
        other = (pos[q, None] - 1) // block != (r_pos[None, r] - 1) // block  # the contig's other blocks
        fallback = (other * r_eff[r]).sum(1) / np.maximum(other.sum(1), 1)
        out[q, 0] = np.where(total > 0, (w * r_eff[r]).sum(1) / np.maximum(total, 1e-12), fallback)
        same = w * (alt[q, None] == r_alt[None, r])
        same_total = same.sum(1)
        out[q, 1] = np.where(same_total > 0, (same * r_eff[r]).sum(1) / np.maximum(same_total, 1e-12), out[q, 0])
        out[q, 2] = total
    return out


def head_features(head: Any, reference: Any, variants: Sequence[Variant], *,
                  progress: bool = False) -> tuple[dict[str, np.ndarray], AlleleScores, list[str | None]]:
    """Every feature a fitted :class:`~bioattn.models.variant_head.VariantEffectHead` can read of ``variants``
    (``{name: (N,)}``: the activity model's, the nearby effects and, for an activity model of several outputs, the
    matched features), the variants' :class:`AlleleScores` and each variant's matched output (None: none; all None
    for a model of one output). The cell types are the input's, else the head's stored map, else the FASTA
    headers' (:func:`~bioattn.tasks.variants.cell_types.prediction_cell_types`)."""
    from bioattn.tasks.variants.cell_types import matched_features, matched_outputs, prediction_cell_types
    from bioattn.tasks.variants.evaluate import header_fields

    reverse = set(head.reversed_contigs).__contains__
    config = head.config
    needs_ism = any(name.startswith("ism_") for name in head.feature_names)
    needs_embed = any(name.startswith("embed_") for name in head.feature_names)
    outputs = [str(o) for o in as_dna_model(head.activity_model).target_names]
    row_outputs: list[str | None] = [None] * len(variants)
    if len(outputs) > 1:  # checked before anything is scored
        cell_types = prediction_cell_types(variants, config.get("cell_types", {}), header_fields(reference))
        matched = matched_outputs(cell_types, outputs)
        row_outputs = [matched.get(v.chrom) for v in variants]
    names, features, mine, _ = model_features(head.activity_model, reference, variants, offsets=head.offsets,
                                              strands=head.strands, reverse=reverse,
                                              ism_radius=ISM_RADIUS if needs_ism else None, embed=needs_embed,
                                              progress=progress)
    nearby = nearby_features(np.array([v.chrom for v in variants]), np.array([v.pos for v in variants]),
                             np.array([v.alt for v in variants]), head.release, bandwidth=config["bandwidth"],
                             radius=config["radius"], block=config["block"])
    available = dict(zip(names + list(NEARBY), np.column_stack([features, nearby]).T))
    if len(outputs) > 1:
        extra_names, extra = matched_features(names, features, outputs, row_outputs)
        available.update(zip(extra_names, extra.T))
    return available, mine, row_outputs


def head_table(head: Any, reference: Any, variants: Sequence[Variant], *, progress: bool = False,
               output: str | None = None) -> Any:
    """The score table of ``variants`` with a fitted :class:`~bioattn.models.variant_head.VariantEffectHead`: the
    activity model's ``ref_score alt_score``, the head's predicted effect as ``delta`` (what a variant does: the
    column every model's table has) and the activity model's own difference as ``activity_delta``. For an activity
    model of several outputs: ``ref_score_<output> alt_score_<output> activity_delta_<output>`` per output (only
    ``output``'s, unsuffixed, when given), then ``delta`` and ``matched_output`` (the output the variant's element
    matched by its cell type, empty where none)."""
    from bioattn.tasks.variants.score import score_table

    available, mine, row_outputs = head_features(head, reference, variants, progress=progress)
    matrix = np.column_stack([available[name] for name in head.feature_names])
    outputs = [str(o) for o in as_dna_model(head.activity_model).target_names]
    table = score_table(variants, mine, outputs, output=output)
    means = head.release.groupby("chrom")["effect"].mean()  # the head predicts effects relative to the element mean
    offset = np.array([means.get(v.chrom, 0.0) for v in variants])
    predicted = head.predict_features(matrix) + offset
    if "delta" in table.columns:
        table["activity_delta"] = table["delta"]
        table["delta"] = predicted
    else:
        table = table.rename(columns={f"delta_{o}": f"activity_delta_{o}" for o in outputs})
        table["delta"] = predicted
    if len(outputs) > 1:
        table["matched_output"] = [o or "" for o in row_outputs]
    return table
