"""What the tasks' explanations share: result classes with ``save(directory)``, model loading, ``method="auto"``."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bioattn.errors import UserInputError

AUTO_BUDGET_SECONDS = 60.0


@dataclasses.dataclass
class Explanation:
    """An explanation in memory: ``summary``, ``tables`` (name → ``(header, rows)``), figures; ``save`` writes them."""
    saved_to: Path | None = dataclasses.field(default=None, init=False, repr=False)
    summary: dict[str, Any]
    tables: dict[str, tuple[list[str], list[list[Any]]]]
    figures: list[Callable[[Path], Any]] = dataclasses.field(default_factory=list, repr=False)

    def save(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the files, tables, figures and ``summary.json`` under ``directory``; returns the folder."""
        from bioattn.io import write_json, write_table
        from bioattn.explain.outputs import prepare_out_dir
        out = prepare_out_dir(directory, overwrite=overwrite)
        self.saved_to = out
        self._write_files(out)
        for name, (header, rows) in self.tables.items():
            write_table(out / name, header, rows)
        for draw in self.figures:
            draw(out)
        write_json(out / "summary.json", self.summary)
        return out

    def _write_files(self, out: Path) -> None:
        """Files other than tables, figures and the summary (maps as NIfTI or safetensors)."""


@dataclasses.dataclass
class SequenceExplanation(Explanation):
    """An explanation of DNA sequences: ``lengths (N,)``, the attribution ``method`` and the motif report, if any."""
    lengths: Any = None
    method: str = ""
    motif_report: Any = None


def where(out: str | os.PathLike | None, name: str | None = None) -> str:
    """Where ``describe`` says a file went: ``out/name`` (or ``out``), or that the result is not saved yet."""
    if out is None:
        return "not saved yet (.save(folder) writes it)"
    return str(Path(out) / name) if name else str(out)


def saved_under(result: "Explanation", out: str | os.PathLike | None, overwrite: bool) -> "Explanation":
    """``result``, saved under ``out`` first when one is given."""
    if out is not None:
        result.save(out, overwrite=overwrite)
    return result


def check_out_dir(path: str | os.PathLike | None, *, overwrite: bool) -> None:
    """Refuse a non-empty existing ``path`` without ``overwrite`` and an unwritable one, before any work."""
    from bioattn.io import prepare_output
    if path is None:
        return
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise UserInputError(f"{path}: output directory already exists and is not empty; pass --overwrite to replace it")
    prepare_output(path, folder=True)


def load_explained_model(model: Any, model_class: type, device: str) -> tuple[Any, str]:
    """``(model, label)``: a model object moved to ``device``, or a run directory / shipped name loaded."""
    import torch
    from bioattn.models.registry import resolve_model_dir
    from bioattn.distributed import resolve_device
    target = resolve_device(device)
    if isinstance(model, (str, os.PathLike)):
        from bioattn.models.registry import load_pretrained
        return load_pretrained(resolve_model_dir(model), map_location=target, expect=model_class).eval(), str(model)
    if not isinstance(model, torch.nn.Module):
        raise UserInputError(f"model must be a {model_class.__name__}, a run directory or a shipped name, "
                             f"got {type(model).__name__}")
    return model.to(target).eval(), type(model).__name__


AUTO_SAMPLE = 16


def resolve_method(method: str, order: Sequence[str], probe: Callable[[], float],
                   measure: Callable[[Sequence[str]], dict[str, dict]] | None = None, *,
                   faithfulness_steps: int = 20, budget_seconds: float = AUTO_BUDGET_SECONDS,
                   sample: str = "the input", costs: Mapping[str, float] | None = None) -> str:
    """``method``, or for ``auto`` the most faithful of ``order`` whose estimated time fits ``budget_seconds``."""
    from bioattn.explain.attribution import METHOD_COST
    from bioattn.explain.faithfulness import most_faithful
    costs = METHOD_COST if costs is None else costs
    if faithfulness_steps < 1:
        raise UserInputError(f"--faithfulness-steps must be >= 1, got {faithfulness_steps}")
    if method != "auto":
        if method not in costs:
            raise UserInputError(f"method must be auto or one of {', '.join(costs)}, got {method!r}")
        return method
    probe()  # warm-up, not timed
    one_pass = probe()
    candidates = [m for m in order if one_pass * costs[m] <= budget_seconds] or [order[-1]]
    if measure is None or len(candidates) == 1:
        chosen = candidates[0]
        print(f"explain: method {chosen} (the most faithful measured for this model type that fits "
              f"{budget_seconds:.0f} s here, about {one_pass * costs[chosen]:.1f} s; --method to choose)",
              file=sys.stderr)
        return chosen
    results = measure((*candidates, "random"))
    chosen = most_faithful({name: results[name] for name in candidates})
    measured = ", ".join(f"{name} {results[name]['deletion_auc']:.3f}/{results[name]['insertion_auc']:.3f}"
                         for name in (*candidates, "random"))
    skipped = [m for m in order if m not in candidates]
    print(f"explain: method {chosen}, the most faithful on {sample} (deletion/insertion AUC, lower/higher = better: "
          f"{measured})" + (f"; too slow here: {', '.join(skipped)}" if skipped else "") + "; --method to choose",
          file=sys.stderr)
    if results[chosen]["deletion_auc"] >= results["random"]["deletion_auc"]:
        print(f"warning: no method deletes the prediction faster than a random ranking on {sample}; the maps may "
              "mean little for this input", file=sys.stderr)
    return chosen
