"""An activity model's members and their mean value of one output, the value ISM edits, departures from all-N."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, N_ID, PAD_ID, DNARecord, reverse_complement_ids
from bioattn.distributed import resolve_device
from bioattn.errors import UserInputError
from bioattn.models.activity import ActivityRegressor
from bioattn.models.ensemble import ENSEMBLE_TYPE, ensemble_members
from bioattn.models.registry import read_config, resolve_model_dir
from bioattn.tasks.activity.predict import load_activity_models, read_sequences

#: Faithfulness leaves out sequences predicted within this many training sd of the all-N sequence's value.
MIN_DEPARTURE = 0.05


def activity_members(model: Any, device: str = "auto") -> tuple[list[ActivityRegressor], str]:
    """``(members, label)``: the ActivityRegressor(s) of ``model`` (a model, ensemble, list, run dir or name)."""
    target = str(resolve_device(device))
    if isinstance(model, (str, os.PathLike)):
        folder = resolve_model_dir(model)
        config = read_config(folder)
        ensemble = config.get("model_type") == ENSEMBLE_TYPE
        held = config.get("member_type") if ensemble else config.get("model_type")
        if held != ActivityRegressor.__name__:
            raise UserInputError(f"{folder}: holds {'an ensemble of ' if ensemble else 'a '}{held}, not an activity "
                                 f"model (ActivityRegressor){_which_command(held)}")
        return [m.eval() for m in load_activity_models(folder, device=target)], str(model)
    members = list(model) if isinstance(model, (list, tuple)) else ensemble_members(model)
    wrong = sorted({type(m).__name__ for m in members if not isinstance(m, ActivityRegressor)})
    if not members or wrong:
        raise UserInputError(f"model must be an ActivityRegressor, an ensemble of them, a run directory or a shipped "
                             f"name, got {', '.join(wrong) or 'nothing'}{_which_command(wrong[0] if wrong else None)}")
    return [m.to(target).eval() for m in members], type(model).__name__


def _which_command(model_type: str | None) -> str:
    from bioattn.tasks.registry import all_tasks
    tasks = [t.name for t in all_tasks() if model_type in t.model_types and "explain" in t.commands]
    return f"; 'bioattn explain {tasks[0]}' explains it" if tasks else ""


def read_inputs(inputs: Any, max_rows: int) -> tuple[list[str], list[str], str | None]:
    """``(ids, sequences, source)`` of a FASTA/CSV/TSV path or of in-memory strings / DNARecords (ids ``seq{i}``)."""
    if isinstance(inputs, (str, os.PathLike)):
        ids, sequences = read_sequences(Path(inputs))
        source: str | None = str(inputs)
    else:
        if isinstance(inputs, str) or not isinstance(inputs, Sequence):
            raise UserInputError(f"inputs must be a file or a list of sequences, got {type(inputs).__name__}")
        records = [r if isinstance(r, DNARecord) else DNARecord(id=f"seq{i}", sequence=str(r)) for i, r in enumerate(inputs)]
        ids, sequences, source = [r.id for r in records], [r.sequence for r in records], None
    if not sequences:
        raise UserInputError(f"{source or 'inputs'}: no sequences")
    return ids[:max_rows], sequences[:max_rows], source


def mean_values(members: Sequence[ActivityRegressor], tokens: Tensor, target: int, strand: str | None) -> Tensor:
    """``(B, L)`` → ``(B,)``: the members' mean value of output ``target`` (``strand`` overrides theirs)."""
    total = 0.0
    for member in members:
        value = member(tokens)["values"][:, target]
        if (strand or member.strand) == "both":
            value = (value + member(reverse_complement_ids(tokens, tokens == PAD_ID))["values"][:, target]) / 2
        total = total + value
    return total / len(members)


class OneHotValue(nn.Module):
    """``(b, 4, L)`` one-hot (an all-zero column = N) → ``(b, 1)`` value of output ``target``: what ISM edits."""

    def __init__(self, members: Sequence[ActivityRegressor], target: int, strand: str | None) -> None:
        super().__init__()
        self.members, self.target, self.strand = nn.ModuleList(members), target, strand
        self.eval()  # tangermeme restores the wrapper's mode on its members when it is done

    def forward(self, one_hot: Tensor) -> Tensor:
        present = one_hot.sum(1) > 0
        ids = torch.where(present, one_hot.argmax(1) + A_ID, torch.full_like(present, N_ID, dtype=torch.long))
        return mean_values(list(self.members), ids, self.target, self.strand)[:, None].float()


@torch.no_grad()
def departures(members: Sequence[ActivityRegressor], tokens: Tensor, target: int,
               strand: str | None = None) -> tuple[Tensor, Tensor]:
    """``(B, L)`` → ``(all-N value (B,), value minus it (B,))``."""
    tokens = tokens.to(next(members[0].parameters()).device)
    blank = mean_values(members, tokens.masked_fill(tokens != PAD_ID, N_ID), target, strand)
    return blank, mean_values(members, tokens, target, strand) - blank


def measurable(members: Sequence[ActivityRegressor], tokens: Tensor, target: int, strand: str | None = None) -> Tensor:
    """``(B,)`` bool: rows predicted at least :data:`MIN_DEPARTURE` training sd from the all-N value."""
    return (departures(members, tokens, target, strand)[1].abs()
            >= MIN_DEPARTURE * float(members[0].config["target_sd"][target])).cpu()
