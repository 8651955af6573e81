"""Hypothetical contributions ``(B, L, 4)`` of a promoter classifier from its gradients: Integrated Gradients
along the path from the all-N sequence, read for every base (what TF-MoDISco clusters).

The model embeds a nucleotide as ``one_hot @ W`` (``W``: the embedding rows of A, C, G, T), so the gradient of
the explained log-odds with respect to the one-hot input at position ``i`` is ``W @ g_i``, ``g_i`` being the
gradient with respect to the embedding at ``i``. Averaging ``g_i`` over the Integrated Gradients path (the
embedding moving from the N embedding to the observed bases) gives, for each base ``b``, ``s_ib = W_b · ḡ_i``;
the hypothetical contribution is ``s_ib`` minus its mean over the four bases (the one-hot gradient correction:
the component that no change of base can realise is removed). The observed base's value is then Integrated
Gradients' attribution with the mean-base embedding as reference.

An ensemble's contributions are the mean of its members'; with ``rc_average`` each member's forward map is
averaged with its reverse-complement map put back on forward positions and bases (A↔T, C↔G).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, N_ID
from bioattn.explain.attribution import IG_STEPS, predicted_log_odds
from bioattn.models.ensemble import average_over_members

#: Sequences × path steps per forward/backward pass.
GRADIENT_BATCH = 1024


def _path_gradients(member: nn.Module, ids: Tensor, classes: Tensor, steps: int) -> Tensor:
    """Mean gradient of the log-odds of ``classes`` w.r.t. the embedding along the IG path: ``(B, L, D)``.

    ``ids (B, L)`` hold no padding. The path uses Gauss-Legendre nodes on [0, 1] (the rule Captum uses)."""
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
    """Hypothetical contributions of ``ids (B, L)`` (one length, no padding; N allowed) to the log-odds of
    ``classes (B,)``: ``(B, L, 4)`` float32 on the CPU, bases A C G T (see the module docstring)."""
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
