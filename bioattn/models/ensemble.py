"""Ensembles of trained classifiers that load, predict and explain like a single model.

An ensemble run directory (``bioattn train ... --seeds`` or ``--cv K``) holds one run directory per member and a
``config.json`` naming them::

    {"model_type": "Ensemble", "member_type": "PromoterClassifier", "members": ["seed0", "seed1", "seed2"],
     "combine": "mean probability"}

``bioattn.models.load_pretrained(ensemble_dir)`` returns an :class:`Ensemble`; the member class's prediction
methods, run with the ensemble as ``self``, give the averaged prediction. Explanations run per member.
"""
from __future__ import annotations

import inspect
import os
import types
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor, nn

from bioattn.errors import UserInputError

ENSEMBLE_TYPE = "Ensemble"
COMBINE = "mean probability"


class Ensemble(nn.Module):
    """Average of ``members``' probabilities (models of one class): logits ``(B,)`` averaged as sigmoid
    probabilities, ``(B, ..., C)`` as softmax probabilities (returned as log-probabilities); ``(logits, None, ...)``
    gives ``(averaged logits, None, ...)``; dicts with ``"values"`` give :class:`EnsembleValues`."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(members) == 0:
            raise ValueError("an Ensemble needs at least one member")
        kinds = {type(m).__name__ for m in members}
        if len(kinds) != 1:
            raise ValueError(f"ensemble members must share one class, got {sorted(kinds)}")
        self.members = nn.ModuleList(members)

    @property
    def member_type(self) -> str:
        """Class name of the members."""
        return type(self.members[0]).__name__

    def member_outputs(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Every member's own output for the same arguments (in member order)."""
        return [member(*args, **kwargs) for member in self.members]

    def forward(self, *args: Any, **kwargs: Any) -> Tensor | tuple[Tensor | None, ...] | "EnsembleValues":
        outputs = self.member_outputs(*args, **kwargs)
        if all(isinstance(out, Mapping) and isinstance(out.get("values"), Tensor) for out in outputs):
            return EnsembleValues.of(outputs, self.member_type)
        if all(isinstance(out, tuple) and isinstance(out[0], Tensor) and all(v is None for v in out[1:]) for out in outputs):
            return (_average_logits([out[0] for out in outputs]), *outputs[0][1:])
        if not all(isinstance(out, Tensor) for out in outputs):
            raise TypeError(f"an Ensemble averages logits; {self.member_type} returned {type(outputs[0]).__name__} "
                            "with more than logits, such as attention maps, which have no mean over separately trained "
                            "members (explain ensembles per member: bioattn.models.ensemble.ensemble_members)")
        return _average_logits(outputs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        first = self._modules["members"][0]  # type: ignore[index]
        value = getattr(first, name)
        if isinstance(value, (nn.Module, Tensor)):
            raise AttributeError(f"an Ensemble has no single {name!r}: each of its {len(self.members)} members has "
                                 "one (ensemble.members)")
        if inspect.ismethod(value) and value.__self__ is first:
            return types.MethodType(value.__func__, self)
        return value

    @classmethod
    def load(cls, run_dir: str | os.PathLike, config: dict[str, Any], member_class: type[nn.Module],
             map_location: str | torch.device = "cpu") -> "Ensemble":
        """The ensemble of ``run_dir`` (its parsed ``config.json``: ``config``) of ``member_class`` members."""
        run_dir = Path(run_dir)
        names = config.get("members")
        if not isinstance(names, list) or not names:
            raise UserInputError(f"{run_dir / 'config.json'}: an ensemble config needs a non-empty 'members' list")
        missing = [name for name in names if not (run_dir / name).is_dir()]
        if missing:
            raise UserInputError(f"{run_dir}: ensemble member folder(s) missing: {', '.join(missing)}")
        members = [member_class.from_pretrained(run_dir / name, map_location=map_location)  # type: ignore[attr-defined]
                   for name in names]
        return cls(members).eval()


class EnsembleValues(dict):
    """What an :class:`Ensemble` of regressors returns: ``"values" (B, T)``, the members' mean, and
    ``"member_values" (M, B, T)``; any other key is a ``KeyError`` saying so."""

    member_type = ""

    @classmethod
    def of(cls, outputs: Sequence[Mapping[str, Tensor]], member_type: str) -> "EnsembleValues":
        members = torch.stack([out["values"].float() for out in outputs])
        out = cls(values=members.mean(dim=0), member_values=members)
        out.member_type = member_type
        return out

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"an Ensemble of {self.member_type or 'regressors'} has no single {key!r}: only 'values' (the "
                       "members' mean) and 'member_values' average over separately trained members; each member's "
                       "own outputs: Ensemble.member_outputs(...) or bioattn.models.ensemble.ensemble_members")


def _average_logits(outputs: Sequence[Tensor]) -> Tensor:
    """The members' logits ``(B,)`` (sigmoid) or ``(B, ..., C)`` (softmax) → the logits of their mean probability."""
    logits = torch.stack(list(outputs)).float()
    if logits.dim() == 2:  # (M, B): one logit per item
        return torch.logit(torch.sigmoid(logits).mean(dim=0), eps=1e-7)
    return torch.log(torch.softmax(logits, dim=-1).mean(dim=0).clamp_min(1e-12))


def ensemble_config(member_type: str, member_dirs: Sequence[str]) -> dict[str, Any]:
    """The ``config.json`` of an ensemble of the run directories ``member_dirs`` (relative to the ensemble's)."""
    return {"model_type": ENSEMBLE_TYPE, "member_type": member_type, "members": list(member_dirs), "combine": COMBINE}


def ensemble_members(model: nn.Module) -> list[nn.Module]:
    """The members of an :class:`Ensemble`, or ``[model]`` for a single model."""
    return list(model.members) if isinstance(model, Ensemble) else [model]


def average_over_members(model: nn.Module, explain: Callable[[nn.Module], Any]) -> Any:
    """``explain(member)`` averaged over :func:`ensemble_members` (tensors / arrays, or lists and dicts of them)."""
    return _mean([explain(member) for member in ensemble_members(model)])


def _mean(values: list[Any]) -> Any:
    first = values[0]
    if len(values) == 1:
        return first
    if isinstance(first, dict):
        return {key: _mean([v[key] for v in values]) for key in first}
    if isinstance(first, (list, tuple)):
        return type(first)(_mean(list(items)) for items in zip(*values))
    if isinstance(first, Tensor):
        return torch.stack(values).mean(dim=0)
    return sum(values) / len(values)
