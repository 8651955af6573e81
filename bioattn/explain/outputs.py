"""What every explanation writes the same way: the output folder, per-layer head figures, faithfulness outputs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from torch import Tensor

from bioattn.explain.heads import head_diversity


def prepare_out_dir(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Create ``path``; an existing non-empty folder is refused unless ``overwrite``."""
    from bioattn.run_dir import prepare_run_dir
    return prepare_run_dir(path, resume=False, overwrite=overwrite, resumable=False)


def layer_similarities(layer_maps: Sequence[Tensor]) -> list[list[list[float]]]:
    """Per layer, the ``(H, H)`` head similarity of ``layer_maps`` (``(H, L, L)`` or ``(B, H, L, L)``)."""
    return [[[round(float(v), 4) for v in row] for row in head_diversity(maps)] for maps in layer_maps]


def write_layer_figures(layer_maps: Sequence[Tensor], out_dir: Path, *, what: str, reference: Tensor | None = None,
                        reference_title: str = "reference", head_scores: Sequence[Sequence[float]] | None = None,
                        score_name: str = "score") -> list[list[list[float]]]:
    """``heads_layer{l}.png`` and ``head_diversity_layer{l}.png`` per layer; returns the ``(H, H)`` similarities."""
    from bioattn.explain.figures import plot_head_diversity, plot_head_maps
    similarities = []
    for layer, maps in enumerate(layer_maps):
        similarity = head_diversity(maps)
        shown = maps if maps.dim() == 3 else maps.float().mean(0)
        scores = None if head_scores is None else head_scores[layer]
        plot_head_maps(shown, out_dir / f"heads_layer{layer}.png", title=f"{what}: layer {layer}", reference=reference,
                       reference_title=reference_title, head_scores=scores, score_name=score_name)
        plot_head_diversity(similarity, out_dir / f"head_diversity_layer{layer}.png",
                            title=f"layer {layer}: head similarity (cosine)")
        similarities.append([[round(float(v), 4) for v in row] for row in similarity])
    return similarities


def write_faithfulness(results: dict[str, dict], out_dir: Path, *, title: str, unit: str) -> dict[str, dict]:
    """``faithfulness.png`` of ``results`` (method → summary); returns ``results``."""
    from bioattn.explain.faithfulness_figures import plot_faithfulness_curves
    plot_faithfulness_curves(results, out_dir / "faithfulness.png", title=title, unit=unit)
    return results


def faithfulness_table(results: dict[str, dict], note: str | None = None) -> str:
    """Text table of ``results`` (method → summary), most faithful first, then ``note`` (:data:`FAITHFULNESS_NOTE`)."""
    from bioattn.explain.faithfulness import most_faithful
    from bioattn.report import format_table
    best = most_faithful(results)
    ordered = sorted(results, key=lambda name: results[name]["deletion_auc"] - results[name]["insertion_auc"])
    rows = [[name + (" *" if name == best else ""),
             f"{results[name]['deletion_auc']:.3f} ± {results[name]['deletion_auc_sd']:.3f}",
             f"{results[name]['insertion_auc']:.3f} ± {results[name]['insertion_auc_sd']:.3f}",
             _seconds(results[name]["seconds"])] for name in ordered]
    table = format_table(["method", "deletion AUC (lower = better)", "insertion AUC (higher = better)",
                          "seconds (maps)"], rows,
                         title=f"faithfulness over {_count(results[best]['examples'], 'example')} (* most faithful)")
    return f"{table}\n\n{note or FAITHFULNESS_NOTE}"


FAITHFULNESS_NOTE = (
    "AUCs: area under the model's probability of the class it predicted on the intact input, divided by that "
    "probability, over the fraction of units perturbed (0 to 1); deletion perturbs the top-ranked units first, "
    "insertion reveals them first. Insertion can exceed 1: the top-ranked units alone can give that class a higher "
    "probability than the whole input (the rest of the input works against it).\n"
    "seconds (maps): time to compute each method's maps, not the curves.")


def _seconds(seconds: float) -> str:
    """``"0.012"``, ``"123.5"``; ``"< 0.001"`` for a time that rounds to 0."""
    if seconds < 0.0005:
        return "< 0.001"
    return f"{seconds:.3f}" if seconds < 100 else f"{seconds:.1f}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
