"""In-silico saturation mutagenesis (ISM, tangermeme) of a promoter classifier: every single-nucleotide substitution."""
from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, N_ID, PAD_ID
from bioattn.explain.attribution import predicted_log_odds

ALPHABET = "ACGT"
ISM_BATCH = 256


def _uses_rc(model: torch.nn.Module, rc_average: bool | None) -> bool:
    return bool(model.rc_average if rc_average is None else rc_average)


@torch.no_grad()
def predicted_classes(model: torch.nn.Module, ids: Tensor, padding_mask: Tensor, *, rc_average: bool | None = None) -> Tensor:
    """The class the model predicts for each sequence: ``(B,)`` long."""
    probabilities = model.proba_from_ids(ids, padding_mask, rc_average=_uses_rc(model, rc_average))
    return torch.as_tensor(model.predicted_classes(probabilities.cpu().numpy()), device=ids.device)


class _OneHotLogOdds(nn.Module):
    """``(B, 4, L)`` one-hot (an all-zero column = N) → ``(B, 1)`` log-odds of ``classes`` under ``model``."""

    def __init__(self, model: nn.Module, rc_average: bool | None) -> None:
        super().__init__()
        self.model = model
        self.rc_average = rc_average

    def forward(self, one_hot: Tensor, classes: Tensor) -> Tensor:
        present = one_hot.sum(1) > 0
        ids = torch.where(present, one_hot.argmax(1) + A_ID, torch.full_like(present, N_ID, dtype=torch.long))
        logits = self.model.predict_logits(ids, None, rc_average=self.rc_average)
        return predicted_log_odds(logits.float(), classes.long())[:, None]


def one_hot_ids(ids: Tensor) -> Tensor:
    """``(B, L)`` token ids → ``(B, 4, L)`` float one-hot (N and PAD: all-zero columns)."""
    codes = ids - A_ID
    valid = (codes >= 0) & (codes < 4)
    one_hot = torch.nn.functional.one_hot(codes.clamp(0, 3), 4).float() * valid[..., None]
    return one_hot.transpose(1, 2)


@torch.no_grad()
def ism_attribution(model: nn.Module, ids: Tensor, padding_mask: Tensor, classes: Tensor, *,
                    rc_average: bool | None = None, hypothetical: bool = False, batch_size: int = ISM_BATCH) -> Tensor:
    """``ids, padding_mask (B, L)``, ``classes (B,)`` → ``(B, L)`` (observed base) or ``(B, L, 4)`` (hypothetical)."""
    model.eval()
    # tangermeme restores the scorer's training mode afterwards: built in eval mode, it keeps the model in eval
    return saturation_scores(_OneHotLogOdds(model, rc_average).eval(), ids, padding_mask, classes.cpu().float(),
                             hypothetical=hypothetical, batch_size=batch_size, device=next(model.parameters()).device)


@torch.no_grad()
def saturation_scores(scorer: nn.Module, ids: Tensor, padding_mask: Tensor, *rows: Tensor, hypothetical: bool = False,
                      batch_size: int = ISM_BATCH, device: torch.device | str = "cpu") -> Tensor:
    """ISM of ``scorer(one_hot (b, 4, L), *rows[chosen]) -> (b, 1)`` over ``ids (B, L)`` → ``(B, L[, 4])``."""
    from tangermeme.saturation_mutagenesis import saturation_mutagenesis
    lengths = (~padding_mask).sum(1).cpu()
    out = torch.zeros((*ids.shape, 4), dtype=torch.float32)
    for length in lengths.unique().tolist():
        chosen = (lengths == length).nonzero()[:, 0]
        one_hot = one_hot_ids(ids[chosen, :length].cpu())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = saturation_mutagenesis(scorer, one_hot, args=tuple(r[chosen] for r in rows) or None,
                                            batch_size=batch_size, hypothetical=True, device=device, fast=False,
                                            verbose=False)
        out[chosen, :length] = values.float().cpu().transpose(1, 2)
    if hypothetical:
        return out
    observed = one_hot_ids(ids.masked_fill(padding_mask, PAD_ID).cpu()).transpose(1, 2)
    return (out * observed).sum(-1)
