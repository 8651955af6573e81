"""``explain_msa``: row-attention maps of an MSA model per layer and head beside the native contacts, from Python."""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bioattn.errors import UserInputError
from bioattn.explain.result import (
    Explanation, check_out_dir, load_explained_model, resolve_method, saved_under, where,
)

#: Methods ``--method auto`` tries, from most to least faithful.
FAITHFULNESS_ORDER = ("integrated_gradients", "relevance", "rollout")


@dataclasses.dataclass
class MSAExplanation(Explanation):
    """``row_attention (layers, H, L, L)``; ``head_precision (layers, H, 3)`` (``None`` without a structure);
    ``columns (L,)`` the ``method``'s attribution; ``member``: the ensemble member explained, or ``None``."""

    row_attention: torch.Tensor = None
    head_precision: np.ndarray | None = None
    columns: torch.Tensor = None
    method: str = ""
    family: str = ""
    member: str | None = None

    def _write_files(self, out: Path) -> None:
        from bioattn.io import save_tensors
        save_tensors(out / "row_attention.safetensors", {"row_attention": self.row_attention})


def _first_member(model: Any, label: str, folder: Any):
    """``(model, member)``: the model, or an ensemble's first member and its folder name (``None`` for one model)."""
    from bioattn.models.ensemble import ensemble_members
    from bioattn.models.registry import read_config, resolve_model_dir
    members = ensemble_members(model)
    if len(members) == 1:
        return members[0], None
    first = read_config(resolve_model_dir(folder))["members"][0] if folder is not None else "member 0"
    print(f"note: {label} is an ensemble of {len(members)} separately trained models, whose heads do not "
          f"correspond; explaining its first member, {first} (--model {label}/<member> for another)", file=sys.stderr)
    return members[0], first


def explain_msa(model: Any, inputs: Any, *, fmt: str | None = None, query: str | os.PathLike | None = None,
                pdb: str | os.PathLike | None = None, chain: str | None = None,
                struct_dat: str | os.PathLike | None = None, max_rows: int = 128, method: str = "auto",
                faithfulness: bool = True, faithfulness_steps: int = 20, device: str = "auto",
                out: str | os.PathLike | None = None, overwrite: bool = False) -> MSAExplanation:
    """Explain an MSA model (an :class:`~bioattn.models.MSAContactModel`, a run directory or a shipped name; an
    ensemble through its first member) on one alignment file or :class:`~bioattn.data.contacts.ContactTarget`:
    per-head row-attention maps, their contact precision and a per-column map; saved under ``out`` when given."""
    check_out_dir(out, overwrite=overwrite)
    from bioattn.data.contacts import ContactTarget, load_target
    from bioattn.data.msa import ALPHABET, MSATokenizer, subsample
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.outputs import layer_similarities, write_faithfulness, write_layer_figures
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary
    from bioattn.metrics import CONTACT_CUTOFF, LONG_RANGE, residues_with_coordinates
    from bioattn.models.msa_contact import MSAContactModel
    from bioattn.tasks.msa.attribution import MSA_METHODS, RELATIVE_COST, msa_attribution, msa_score, predicted_residues
    from bioattn.tasks.msa.head_contacts import PRECISION_NAMES, head_contact_precision, row_attention_maps
    if max_rows < 1:
        raise UserInputError(f"--max-rows must be >= 1, got {max_rows}")
    folder = model if isinstance(model, (str, os.PathLike)) else None
    model, label = load_explained_model(model, MSAContactModel, device)
    model, member = _first_member(model, label, folder)
    if isinstance(inputs, ContactTarget):
        target, source = inputs, inputs.name
    else:
        target = load_target(inputs, fmt=fmt, query_fasta=query, pdb=pdb, chain=chain, struct_dat=struct_dat)
        source = str(inputs)
    tokens = MSATokenizer().encode(target.msa)
    if tokens.shape[1] > model.config["max_len"]:
        raise UserInputError(f"{source}: {tokens.shape[1]} columns, the model {label} accepts at most {model.config['max_len']}")
    rows = tokens[subsample(tokens, max_rows, "diversity")]
    maps = row_attention_maps(model, rows)  # (layers, H, L, L)
    layers, heads, length = maps.shape[0], maps.shape[1], maps.shape[-1]
    summary: dict = {"run": label, "input": source, "family": target.name, "columns": length,
                     "rows_used": len(rows), "rows_in_alignment": target.msa.depth}
    if member is not None:
        summary["member"] = member

    def timed_gradient_pass() -> float:
        start = time.perf_counter()
        msa_attribution(model, rows, "gradient_x_input")
        return time.perf_counter() - start

    residues = predicted_residues(model, rows)

    def attribute(name: str) -> list:
        return [msa_attribution(model, rows, name, residues=residues).cpu()]

    score = msa_score(model, rows.to(next(model.parameters()).device), residues)
    measured: dict = {}  # method="auto"'s measurements, reused by the faithfulness table

    def measure(methods) -> dict:
        measured.update(compare_methods(attribute, [score], methods, steps=faithfulness_steps))
        return measured

    method = resolve_method(method, FAITHFULNESS_ORDER, timed_gradient_pass, measure,
                            faithfulness_steps=faithfulness_steps, sample="this alignment", costs=RELATIVE_COST)
    values = attribute(method)[0]
    query_row = rows[0].tolist()
    tables = {"columns.tsv": (["column", "query", "predicted", method],
                              [[c, ALPHABET[query_row[c]] if query_row[c] < len(ALPHABET) else "?",
                                ALPHABET[int(residues[c])], float(values[c])] for c in range(len(query_row))])}
    sharpness = head_sharpness([layer[None] for layer in row_attention_maps(model, rows)])
    summary.update({"method": method, "head_sharpness": sharpness_summary(sharpness)})
    results = None
    if faithfulness:
        results = compare_methods(attribute, [score], MSA_METHODS, steps=faithfulness_steps, known=measured)
        summary["faithfulness"] = results
    family = target.name

    def draw_common(out: Path) -> None:
        from bioattn.explain.faithfulness_figures import plot_head_sharpness
        plot_head_sharpness(sharpness, out / "head_sharpness.png", title=f"{family} row attention: per-head sharpness")
        if results is not None:
            write_faithfulness(results, out, unit="alignment columns", title=f"{family}: faithfulness (columns masked)")

    result = MSAExplanation(summary=summary, tables=tables, figures=[draw_common], row_attention=maps, columns=values,
                            method=method, family=family, member=member)
    summary["head_similarity"] = layer_similarities(list(maps))
    if target.distances is None:
        result.figures.append(lambda out: write_layer_figures(list(maps), out, what=f"{family} row attention"))
        return saved_under(result, out, overwrite)

    distances = target.distances
    precision = head_contact_precision(maps, distances)  # (layers, H, 3)
    contacts = torch.from_numpy(np.nan_to_num(distances, nan=np.inf) < CONTACT_CUTOFF).float()

    def draw_contacts(out: Path) -> None:
        from bioattn.explain.figures import plot_head_scores
        write_layer_figures(list(maps), out, what=f"{family} row attention", reference=contacts,
                            reference_title=f"native contacts (< {CONTACT_CUTOFF:g} Å)",
                            head_scores=[[float(p) for p in layer] for layer in precision[..., 0]],
                            score_name=PRECISION_NAMES[0])
        plot_head_scores(precision[..., 0], out / "head_contact_precision.png", label=f"long-range {PRECISION_NAMES[0]}",
                         title=f"{family}: which heads carry contacts (sym + APC map, separation ≥ {LONG_RANGE})")

    result.figures.append(draw_contacts)
    tables["head_contacts.tsv"] = (["layer", "head", *PRECISION_NAMES],
                                   [[layer, head, *map(float, precision[layer, head])]
                                    for layer in range(layers) for head in range(heads)])
    i, j = np.triu_indices(length, k=LONG_RANGE)
    known = np.isfinite(distances[i, j])
    best = np.unravel_index(int(np.argmax(precision[..., 0])), precision.shape[:2])
    summary.update({
        "residues_with_coordinates": int(residues_with_coordinates(distances).sum()),
        "long_range_contact_rate": float((distances[i, j][known] < CONTACT_CUTOFF).mean()) if known.any() else None,
        "best_head": {"layer": int(best[0]), "head": int(best[1]),
                      **{name: float(v) for name, v in zip(PRECISION_NAMES, precision[best])}},
        "mean_over_heads": {name: float(precision[..., k].mean()) for k, name in enumerate(PRECISION_NAMES)},
    })
    result.head_precision = precision
    return saved_under(result, out, overwrite)


def describe(result: MSAExplanation, out: Path | None = None) -> str:
    """What ``bioattn explain msa`` prints after saving to ``out`` (default: ``result.saved_to``)."""
    from bioattn.explain.outputs import faithfulness_table
    from bioattn.tasks.msa.head_contacts import PRECISION_NAMES
    summary, lines, out = result.summary, [], out if out is not None else result.saved_to
    if "faithfulness" in summary:
        lines.append(faithfulness_table(summary["faithfulness"]))
    maps = result.row_attention
    if result.head_precision is None:
        lines.append(f"{result.family}: row-attention maps of {maps.shape[0]} layers x {maps.shape[1]} heads -> {where(out)} "
                     "(no structure given)")
        return "\n".join(lines)
    best, rate, mean = summary["best_head"], summary["long_range_contact_rate"], summary["mean_over_heads"]
    lines.append(f"{result.family}: best head layer {best['layer']} head {best['head']}, long-range {PRECISION_NAMES[0]} = "
                 f"{best[PRECISION_NAMES[0]]:.2f} (mean over heads {mean[PRECISION_NAMES[0]]:.2f}"
                 + (f"; random ranking ≈ {rate:.2f}" if rate is not None else "") + f") -> {where(out)}")
    return "\n".join(lines)
