"""What every ``bioattn explain`` command shares: its common options, the output folder and the per-layer head
figures (head maps + head diversity)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

from torch import Tensor

from bioattn.explain.heads import head_diversity
from bioattn.attention.rollout import HEAD_FUSIONS


def add_common_arguments(parser: argparse.ArgumentParser, *, input_help: str, rollout: bool = True) -> None:
    """``--input --out --overwrite`` and, with ``rollout``, ``--head-fusion --start-layer`` (the command adds
    how the model is chosen: ``bioattn.commands.common.add_model_arguments``)."""
    parser.add_argument("--input", required=True, metavar="FILE", help=input_help)
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder for tables and figures (created)")
    parser.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty --out folder")
    if not rollout:
        return
    parser.add_argument("--head-fusion", choices=HEAD_FUSIONS, default="mean", help="how rollout fuses a layer's heads (default: mean)")
    parser.add_argument("--start-layer", type=int, default=0, help="first layer included in the rollout (default: 0)")


def prepare_out_dir(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Create ``path``; an existing non-empty folder is refused unless ``overwrite``."""
    from bioattn.training import prepare_run_dir

    return prepare_run_dir(path, resume=False, overwrite=overwrite, resumable=False)


def write_layer_figures(
    layer_maps: Sequence[Tensor],
    out_dir: Path,
    *,
    what: str,
    reference: Tensor | None = None,
    reference_title: str = "reference",
    head_scores: Sequence[Sequence[float]] | None = None,
    score_name: str = "score",
) -> list[list[list[float]]]:
    """For each layer ``l``: ``heads_layer{l}.png`` (every head's map) and ``head_diversity_layer{l}.png``.

    layer_maps: per layer ``(H, L, L)`` (one input) or ``(B, H, L, L)`` (diversity averaged over the batch,
    the head maps show the batch mean). Returns the per-layer ``(H, H)`` similarity matrices as lists.
    """
    from bioattn.explain.figures import plot_head_diversity, plot_head_maps

    similarities = []
    for layer, maps in enumerate(layer_maps):
        similarity = head_diversity(maps)
        shown = maps if maps.dim() == 3 else maps.float().mean(0)
        scores = None if head_scores is None else head_scores[layer]
        plot_head_maps(shown, out_dir / f"heads_layer{layer}.png", title=f"{what}: layer {layer}",
                       reference=reference, reference_title=reference_title, head_scores=scores,
                       score_name=score_name)
        plot_head_diversity(similarity, out_dir / f"head_diversity_layer{layer}.png",
                            title=f"layer {layer}: head similarity (cosine)")
        similarities.append([[round(float(v), 4) for v in row] for row in similarity])
    return similarities
