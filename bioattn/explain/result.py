"""What the tasks' explanations (:func:`~bioattn.tasks.promoter.explain.explain_promoter`,
:func:`~bioattn.tasks.activity.explain.explain_activity`, :func:`~bioattn.tasks.ct.explain.explain_ct`,
:func:`~bioattn.tasks.msa.explain.explain_msa`) share: the result base classes with ``save(directory)``, how a model
is given (an object, a shipped name or a run directory) and how ``method="auto"`` is resolved."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bioattn.errors import UserInputError

#: ``method="auto"`` picks the most faithful method whose estimated time fits this many seconds.
AUTO_BUDGET_SECONDS = 60.0


@dataclasses.dataclass
class Explanation:
    """An explanation held in memory: ``summary`` (what ``summary.json`` holds), ``tables`` (file name →
    ``(header, rows)``, written as TSV) and figures rendered when saved.

    ``save(directory)`` writes every file the matching ``bioattn explain`` command writes; ``saved_to`` is then
    that folder (``None`` until saved).
    """

    saved_to: Path | None = dataclasses.field(default=None, init=False, repr=False)

    summary: dict[str, Any]
    tables: dict[str, tuple[list[str], list[list[Any]]]]
    figures: list[Callable[[Path], Any]] = dataclasses.field(default_factory=list, repr=False)

    def save(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the tables, figures, files and ``summary.json`` under ``directory`` (created; a non-empty folder
        is refused unless ``overwrite``). Returns the folder."""
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
    """An explanation of DNA sequences: ``lengths (N,)`` (each sequence's length; the per-nucleotide maps of a
    subclass are zero past it), the attribution ``method`` and, when motifs were asked for, the
    :class:`~bioattn.explain.motifs.MotifReport` (``motif_report``)."""

    lengths: Any = None
    method: str = ""
    motif_report: Any = None


def where(out: str | os.PathLike | None, name: str | None = None) -> str:
    """Where ``describe`` says a file went: ``out/name`` (``out`` alone without ``name``), or that the result is
    not saved yet when ``out`` is ``None``."""
    if out is None:
        return "not saved yet (.save(folder) writes it)"
    return str(Path(out) / name) if name else str(out)


def saved_under(result: "Explanation", out: str | os.PathLike | None, overwrite: bool) -> "Explanation":
    """``result``, saved under ``out`` first when one is given (the ``out=`` of the ``explain_*`` functions)."""
    if out is not None:
        result.save(out, overwrite=overwrite)
    return result


def check_out_dir(path: str | os.PathLike | None, *, overwrite: bool) -> None:
    """Refuse a non-empty existing ``path`` without ``overwrite`` before any work (:meth:`Explanation.save`
    checks again when it writes) and an unwritable one (:func:`~bioattn.io.prepare_output`); ``None``: nothing to
    check."""
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
    """``(model, label)``: a model object moved to ``device``, or the run directory / shipped name loaded with
    ``model_class.from_pretrained``; ``label`` is how the summary names it."""
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


#: ``method="auto"`` measures the candidates' faithfulness on at most this many inputs of the sample it is given.
AUTO_SAMPLE = 16


def resolve_method(method: str, order: Sequence[str], probe: Callable[[], float],
                   measure: Callable[[Sequence[str]], dict[str, dict]] | None = None, *,
                   faithfulness_steps: int = 20, budget_seconds: float = AUTO_BUDGET_SECONDS,
                   sample: str = "the input", costs: Mapping[str, float] | None = None) -> str:
    """``method``, or with ``auto`` the most faithful method on (a sample of) this input among those of ``order``
    whose estimated time fits ``budget_seconds``.

    ``probe()`` returns the estimated seconds of one gradient pass over the whole input; a method costs
    ``costs[method]`` times that (``costs``: the task's methods and their costs, default the method-generic
    :data:`~bioattn.explain.attribution.METHOD_COST`; ``method`` must be one of them). The probe runs twice and the
    second time is the estimate: the first pays one-off costs (a GPU's context and kernel selection, lazy imports)
    that would make a 64-pass method look too slow. ``measure(methods)`` returns each method's faithfulness on ``sample`` (method →
    :meth:`~bioattn.explain.faithfulness.FaithfulnessResult.summary`); the candidates and ``random`` are measured
    and the largest insertion − deletion AUC wins (:func:`~bioattn.explain.faithfulness.most_faithful`, the method
    the faithfulness table stars). Says on stderr which method it used and the AUCs it measured; a warning when no
    candidate deletes better than random. Without ``measure``, the first fitting method of ``order``."""
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
