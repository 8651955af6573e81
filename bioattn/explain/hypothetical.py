"""Hypothetical contributions ``(B, L, 4)``: IG path gradients of the embedding read for every base, centred."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, N_ID
from bioattn.explain.attribution import IG_STEPS, predicted_log_odds
from bioattn.models.ensemble import average_over_members

GRADIENT_BATCH = 1024


def _path_gradients(member: nn.Module, ids: Tensor, classes: Tensor, steps: int) -> Tensor:
    """``(B, L, D)`` mean embedding gradient along the IG path (Gauss-Legendre nodes); ``ids (B, L)``, no padding."""
    import numpy as np
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    alphas = torch.as_tensor((nodes + 1) / 2, dtype=torch.float32, device=ids.device)
    weights = torch.as_tensor(weights / 2, dtype=torch.float32, device=ids.device)
    table = member.embedding.weight
    start = table[N_ID].detach()
    observed = table[ids].detach()
    total = torch.zeros_like(observed)
    per_pass = max(1, GRADIENT_BATCH // max(1, len(ids)))
    for first in range(0, steps, per_pass):
        chunk = slice(first, first + per_pass)
        a = alphas[chunk]
        path = (start + a[:, None, None, None] * (observed - start)).reshape(-1, *observed.shape[1:])
        path.requires_grad_(True)
        replace = member.embedding.register_forward_hook(lambda module, inputs, output: path)
        try:
            with torch.enable_grad():
                logits = member(ids.repeat(len(a), 1), None)
                score = predicted_log_odds(logits.float(), classes.repeat(len(a)))
                (gradient,) = torch.autograd.grad(score.sum(), path)
        finally:
            replace.remove()
        total += (gradient.view(len(a), *observed.shape) * weights[chunk, None, None, None]).sum(0)
    return total


def _one_strand(member: nn.Module, ids: Tensor, classes: Tensor, steps: int) -> Tensor:
    gradients = _path_gradients(member, ids, classes, steps)
    bases = member.embedding.weight[A_ID : A_ID + 4].detach()
    scores = torch.einsum("bld,kd->blk", gradients, bases)
    return scores - scores.mean(-1, keepdim=True)


def gradient_hypothetical(model: nn.Module, ids: Tensor, classes: Tensor, *, rc_average: bool = False,
                          steps: int = IG_STEPS) -> Tensor:
    """``ids (B, L)`` (one length, no padding) → ``(B, L, 4)`` float32 CPU contributions to ``classes``' log-odds."""
    if ids.dim() != 2 or classes.shape != ids.shape[:1]:
        raise ValueError(f"ids must be (B, L) and classes (B,), got {tuple(ids.shape)} and {tuple(classes.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    from bioattn.data.dna import strand_average
    model.eval()
    device = next(model.parameters()).device
    ids, classes = ids.to(device), classes.to(device)
    def explain(member: nn.Module) -> Tensor:
        def one_strand(strand: Tensor) -> Tensor:
            return _one_strand(member, strand, classes, steps)
        # the reverse strand's (B, L, 4) contributions back onto forward positions and bases
        return strand_average(one_strand, ids, back=lambda r: r.flip(1).flip(2)) if rc_average else one_strand(ids)
    return average_over_members(model, explain).detach().float().cpu()
