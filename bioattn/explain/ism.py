"""In-silico saturation mutagenesis (ISM) of a promoter classifier: every single-nucleotide substitution.

tangermeme's :func:`~tangermeme.saturation_mutagenesis.saturation_mutagenesis` makes the edits, batches them and
centres the effects over the four bases; this module only adapts a
:class:`~bioattn.models.PromoterClassifier` (or an ensemble of them) to the one-hot ``(B, 4, L)`` input tangermeme
edits, and scores every edit the way the model predicts (its own strand handling: with ``rc_average`` each edited
sequence is scored on both strands). What ISM explains is the log-odds of a class (default: the class the model
predicts on the unedited sequence), so its values share the sign convention of the gradient methods: positive =
the observed base supports the class.

``hypothetical=True`` returns, for every position, the centred effect of each of the four bases (``(B, L, 4)``,
TF-MoDISco's "hypothetical contributions"); otherwise the value of the observed base (``(B, L)``).
:func:`saturation_scores` does the same for any model with one output per sequence (e.g. a measured activity).
:func:`predicted_classes` is the class a DNA classifier predicts, with its own strand handling (what ISM, the
hypothetical contributions and the attribution maps explain by default).
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, N_ID, PAD_ID
from bioattn.explain.attribution import predicted_log_odds

#: Order of the one-hot channels (A, C, G, T: token ids ``A_ID .. A_ID + 3``).
ALPHABET = "ACGT"
#: Edited sequences per forward pass.
ISM_BATCH = 256


def _uses_rc(model: torch.nn.Module, rc_average: bool | None) -> bool:
    return bool(model.rc_average if rc_average is None else rc_average)


@torch.no_grad()
def predicted_classes(model: torch.nn.Module, ids: Tensor, padding_mask: Tensor, *, rc_average: bool | None = None) -> Tensor:
    """The class the model predicts for each sequence: ``(B,)`` long (a two-class model: probability ≥ threshold)."""
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
    """Token ids ``(B, L)`` (A, C, G, T; N or PAD give an all-zero column) → one-hot ``(B, 4, L)`` float."""
    codes = ids - A_ID
    valid = (codes >= 0) & (codes < 4)
    one_hot = torch.nn.functional.one_hot(codes.clamp(0, 3), 4).float() * valid[..., None]
    return one_hot.transpose(1, 2)


@torch.no_grad()
def ism_attribution(model: nn.Module, ids: Tensor, padding_mask: Tensor, classes: Tensor, *,
                    rc_average: bool | None = None, hypothetical: bool = False, batch_size: int = ISM_BATCH) -> Tensor:
    """ISM of the log-odds of ``classes (B,)``: ``ids (B, L)``, ``padding_mask (B, L)`` (True = PAD) →
    ``(B, L)`` (observed base) or, with ``hypothetical``, ``(B, L, 4)`` (every base, A C G T), 0 at padding.

    Sequences run in groups of one length (the edits of a padded batch would score padding). Each value is the
    change in log-odds when the position holds that base, minus the mean over the four bases.
    """
    model.eval()
    # tangermeme restores the scorer's training mode afterwards: built in eval mode, it leaves the model in eval mode
    return saturation_scores(_OneHotLogOdds(model, rc_average).eval(), ids, padding_mask, classes.cpu().float(),
                             hypothetical=hypothetical, batch_size=batch_size, device=next(model.parameters()).device)


@torch.no_grad()
def saturation_scores(scorer: nn.Module, ids: Tensor, padding_mask: Tensor, *rows: Tensor, hypothetical: bool = False,
                      batch_size: int = ISM_BATCH, device: torch.device | str = "cpu") -> Tensor:
    """ISM of any one-output model: ``scorer(one_hot (b, 4, L), *rows[chosen]) -> (b, 1)`` (``rows``: per-sequence
    tensors ``(B, ...)``, e.g. the class each sequence explains) scored by tangermeme for every substitution of
    ``ids (B, L)`` (``padding_mask`` True = PAD) → ``(B, L)`` (observed base) or, with ``hypothetical``,
    ``(B, L, 4)`` (A C G T; the output with that base minus the mean over the four), 0 at padding."""
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
