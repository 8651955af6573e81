"""What every ``bioattn explain`` command shares: its common options, the output folder, the per-layer head
figures (head maps + head diversity), the choice of attribution method and the faithfulness outputs."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.explain.heads import head_diversity
from bioattn.attention.rollout import HEAD_FUSIONS

#: ``--method auto`` picks the most faithful method whose estimated time fits this many seconds.
AUTO_BUDGET_SECONDS = 60.0


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


def add_method_arguments(parser: argparse.ArgumentParser, *, unit: str, methods: Sequence[str] | None = None) -> None:
    """``--method --no-faithfulness --faithfulness-steps``: which attribution the outputs show, and whether every
    method's deletion/insertion faithfulness is measured (``unit``: what one perturbation step removes; ``methods``:
    the model type's methods, default :data:`~bioattn.explain.attribution.METHODS`)."""
    from bioattn.explain.attribution import METHODS

    choices = tuple(methods or METHODS)
    parser.add_argument("--method", choices=("auto", *choices), default="auto",
                        help="attribution shown in the outputs: auto (the most faithful method that is fast enough for "
                             "the input, named on stderr), " + ", ".join(choices) + " (default: %(default)s)")
    parser.add_argument("--no-faithfulness", dest="skip_faithfulness", action="store_true",
                        help=f"skip measuring every method's deletion/insertion faithfulness ({unit} removed or "
                             "revealed by rank; summary.json key 'faithfulness', faithfulness.png) (default: off, "
                             "i.e. measured)")
    parser.add_argument("--faithfulness-steps", type=int, default=20,
                        help="points of each deletion/insertion curve (default: %(default)s)")


def resolve_method(args: argparse.Namespace, order: Sequence[str], probe: Callable[[], float],
                   budget_seconds: float = AUTO_BUDGET_SECONDS) -> str:
    """``--method``, or with ``auto`` the first method of ``order`` (most faithful first, as measured) whose
    estimated time fits ``budget_seconds``: ``probe()`` returns the estimated seconds of one gradient pass over the
    whole input, and a method costs :data:`~bioattn.explain.attribution.RELATIVE_COST` times that. The probe runs
    twice and the second time is the estimate: the first pays one-off costs (a GPU's context and kernel selection,
    lazy imports) that would make a 64-pass method look too slow. Says on stderr which method it used."""
    from bioattn.explain.attribution import RELATIVE_COST

    if args.faithfulness_steps < 1:
        raise UserInputError(f"--faithfulness-steps must be >= 1, got {args.faithfulness_steps}")
    if args.method != "auto":
        return args.method
    probe()  # warm-up, not timed
    one_pass = probe()
    for method in order:
        if one_pass * RELATIVE_COST[method] <= budget_seconds or method == order[-1]:
            print(f"explain: method {method} (the most faithful measured for this model type that fits "
                  f"{budget_seconds:.0f} s here, about {one_pass * RELATIVE_COST[method]:.1f} s; --method to choose)",
                  file=sys.stderr)
            return method
    raise AssertionError("unreachable")


def write_faithfulness(results: dict[str, dict], out_dir: Path, *, title: str, unit: str) -> dict[str, dict]:
    """``faithfulness.png`` of ``results`` (method → summary) and the ``summary.json`` entry (areas, sd, seconds;
    the mean curves too)."""
    from bioattn.explain.faithfulness_figures import plot_faithfulness_curves

    plot_faithfulness_curves(results, out_dir / "faithfulness.png", title=title, unit=unit)
    return results


def faithfulness_table(results: dict[str, dict]) -> str:
    """A text table of ``results`` (method → summary): areas ± sd and seconds, most faithful first."""
    from bioattn.explain.faithfulness import most_faithful
    from bioattn.report import format_table

    best = most_faithful(results)
    ordered = sorted(results, key=lambda name: results[name]["deletion_auc"] - results[name]["insertion_auc"])
    rows = [[name + (" *" if name == best else ""),
             f"{results[name]['deletion_auc']:.3f} ± {results[name]['deletion_auc_sd']:.3f}",
             f"{results[name]['insertion_auc']:.3f} ± {results[name]['insertion_auc_sd']:.3f}",
             f"{results[name]['seconds']:.2f}"] for name in ordered]
    return format_table(["method", "deletion AUC (lower = better)", "insertion AUC (higher = better)", "seconds"], rows,
                        title=f"faithfulness over {results[best]['examples']} examples (* most faithful)")
