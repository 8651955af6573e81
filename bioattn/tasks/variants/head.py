"""Features of a variant-effect head and its predictions.

Model features, per output ``t`` (suffix ``_t`` when several): ``delta`` (alt minus ref over placements and
strands), ``delta_p<k>`` per placement, ``delta_sd``, ``abs_delta``, ``ref_activity``, ``delta_fwd``/``delta_rev``;
in-silico mutagenesis within ``ism_radius`` nt: ``ism_here``, ``ism_local``, ``ism_local_max``, ``ism_allele``;
``embed_l2`` and ``embed_cos`` when the model has ``embed``. Nearby-effect features (:data:`NEARBY`, no model):
Gaussian-weighted measured effects within ``radius`` nt, leaving out the query's own block of ``block`` positions.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from bioattn.tasks.variants.cell_types import matched_features, matched_outputs, prediction_cell_types
from bioattn.tasks.variants.evaluate import header_fields
from bioattn.tasks.variants.records import Variant
from bioattn.tasks.variants.saturation import BASES
from bioattn.tasks.variants.score import AlleleScores, allele_scores, as_dna_model, score_table

ISM_RADIUS = 4
NEARBY = ("nearby_effect", "nearby_same_alt", "nearby_weight")


def _ism_set(reference: Any, variants: Sequence[Variant],
             radius: int) -> tuple[list[Variant], dict[tuple[str, int, str, str], int]]:
    """Every SNV within ``radius`` of a variant, and the row of each (chrom, pos, ref, alt)."""
    wanted: dict[str, set[int]] = {}
    for v in variants:
        length = len(reference[v.chrom])
        wanted.setdefault(v.chrom, set()).update(range(max(1, v.pos - radius), min(length, v.pos + radius) + 1))
    out: list[Variant] = []
    row: dict[tuple[str, int, str, str], int] = {}
    for chrom, positions in wanted.items():
        record = reference[chrom]
        for pos in sorted(positions):
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
    """``(names, features (N, F), the variants' AlleleScores, rows of the variants in the ISM set)``;
    ``ism_radius=None`` scores the variants alone, ``embed=False`` skips the embedding columns."""
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
    """``(N, 3)`` :data:`NEARBY` features of query variants from the measured ``release`` (a DataFrame with chrom,
    pos, alt, effect), leaving out each query's own block."""
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
    """``({name: (N,)} of every feature a fitted :class:`~bioattn.models.variant_head.VariantEffectHead` can read,
    the variants' :class:`AlleleScores`, each variant's matched output or None)``."""
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
                                              ism_radius=config.get("ism_radius", ISM_RADIUS) if needs_ism else None, embed=needs_embed,
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
    """The score table of a fitted :class:`~bioattn.models.variant_head.VariantEffectHead`: the activity model's
    scores (``delta`` renamed ``activity_delta``), the head's predicted effect as ``delta`` and, with several
    outputs, ``matched_output``."""
    available, mine, row_outputs = head_features(head, reference, variants, progress=progress)
    matrix = np.column_stack([available[name] for name in head.feature_names])
    outputs = [str(o) for o in as_dna_model(head.activity_model).target_names]
    table = score_table(variants, mine, outputs, output=output)
    means = head.release.groupby("chrom")["effect"].mean()  # the head predicts effects relative to the element mean
    offset = np.array([means.get(v.chrom, 0.0) for v in variants])
    predicted = head.predict_features(matrix) + offset
    if "delta" in table.columns:
        table["activity_delta"] = table["delta"]
    else:
        table = table.rename(columns={f"delta_{o}": f"activity_delta_{o}" for o in outputs})
    table["delta"] = predicted
    if len(outputs) > 1:
        table["matched_output"] = [o or "" for o in row_outputs]
    return table
