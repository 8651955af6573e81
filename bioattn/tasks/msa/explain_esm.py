"""Which heads of ESM's MSA Transformer (the user's weights) carry the contacts of one alignment."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from bioattn.data.contacts import ContactTarget
from bioattn.errors import UserInputError
from bioattn.explain.outputs import write_layer_figures
from bioattn.io import save_tensors, write_json, write_table
from bioattn.metrics import CONTACT_CUTOFF, LONG_RANGE, precision_at
from bioattn.models.msa_transformer import DEFAULT_MAX_ROWS, MSATransformer
from bioattn.tasks.msa.head_contacts import PRECISION_NAMES, head_contact_precision

__all__ = ["explain_esm_msa", "explain_with_weights", "describe_weights_explanation"]


def explain_esm_msa(model: MSATransformer, target: ContactTarget, out: Path, max_rows: int, label: str) -> dict[str, Any]:
    """Write the per-layer, per-head explanation of ``model`` on ``target`` into ``out``; returns ``summary.json``."""
    from bioattn.explain.figures import plot_head_scores
    prediction = model.predict_alignment(target.msa.sequences, max_rows, source=str(target.msa.source))
    maps = prediction.row_attentions  # (layers, H, L, L)
    layers, heads, length = maps.shape[0], maps.shape[1], maps.shape[-1]
    save_tensors(out / "row_attention.safetensors", {"row_attention": maps})
    np.save(out / "contacts.npy", prediction.probabilities.numpy().astype(np.float32))
    regression = model.contact_regression.weight.detach().float().cpu().view(layers, heads)
    summary: dict[str, Any] = {"weights": label, "input": str(target.msa.source), "family": target.name, "columns": length,
                               "rows_used": len(prediction.rows), "rows_in_alignment": target.msa.depth}
    rows = [[layer, head, float(regression[layer, head])] for layer in range(layers) for head in range(heads)]
    if target.distances is None:
        summary["head_similarity"] = write_layer_figures(list(maps), out, what=f"{target.name} row attention")
        write_table(out / "head_contacts.tsv", ["layer", "head", "regression_weight"], rows)
        write_json(out / "summary.json", summary)
        return summary
    distances = target.distances
    precision = head_contact_precision(maps, distances)  # (layers, H, 3)
    contacts = torch.from_numpy(np.nan_to_num(distances, nan=np.inf) < CONTACT_CUTOFF).float()
    summary["head_similarity"] = write_layer_figures(
        list(maps), out, what=f"{target.name} row attention", reference=contacts,
        reference_title=f"native contacts (< {CONTACT_CUTOFF:g} Å)",
        head_scores=[[float(p) for p in layer] for layer in precision[..., 0]], score_name=PRECISION_NAMES[0])
    plot_head_scores(precision[..., 0], out / "head_contact_precision.png", label=f"long-range {PRECISION_NAMES[0]}",
                     title=f"{target.name}: which heads carry contacts (sym + APC map, separation ≥ {LONG_RANGE})")
    write_table(out / "head_contacts.tsv", ["layer", "head", "regression_weight", *PRECISION_NAMES],
                ([*row, *map(float, precision[row[0], row[1]])] for row in rows))
    best = np.unravel_index(int(np.argmax(precision[..., 0])), precision.shape[:2])
    summary.update({
        "best_head": {"layer": int(best[0]), "head": int(best[1]),
                      **{name: float(v) for name, v in zip(PRECISION_NAMES, precision[best])}},
        "mean_over_heads": {name: float(precision[..., k].mean()) for k, name in enumerate(PRECISION_NAMES)},
        "contact_regression": precision_at(prediction.probabilities.numpy(), distances),
    })
    write_json(out / "summary.json", summary)
    return summary


def explain_with_weights(weights: str | os.PathLike, inputs: str | os.PathLike, out: str | os.PathLike, *,
                         fmt: str | None = None, query: str | None = None, pdb: str | None = None,
                         chain: str | None = None, struct_dat: str | None = None, max_rows: int = DEFAULT_MAX_ROWS,
                         device: str = "auto", overwrite: bool = False) -> tuple[dict, Path, str]:
    """``bioattn explain msa --weights``: :func:`explain_esm_msa` on ``inputs``; returns ``(summary, out, family)``."""
    from bioattn.data.contacts import load_target
    from bioattn.explain.outputs import prepare_out_dir
    from bioattn.tasks.msa.esm import load_msa_transformer
    from bioattn.distributed import resolve_device
    from bioattn.explain.result import check_out_dir
    if max_rows < 1:
        raise UserInputError(f"--max-rows must be >= 1, got {max_rows}")
    check_out_dir(out, overwrite=overwrite)
    model = load_msa_transformer(weights, resolve_device(device))
    target = load_target(inputs, fmt=fmt, query_fasta=query, pdb=pdb, chain=chain, struct_dat=struct_dat)
    folder = prepare_out_dir(out, overwrite=overwrite)
    return explain_esm_msa(model, target, folder, max_rows, str(weights)), folder, target.name


def describe_weights_explanation(summary: Mapping[str, Any], out: Path, family: str) -> str:
    """What ``bioattn explain msa --weights`` prints for the result of :func:`explain_with_weights`."""
    best = summary.get("best_head")
    found = (f"best head layer {best['layer']} head {best['head']}, long-range P@L/5 = {best['P@L/5']:.2f}"
             if best else "no structure given")
    return f"{family}: MSA Transformer row attention of {len(summary['head_similarity'])} layers, {found} -> {out}"
