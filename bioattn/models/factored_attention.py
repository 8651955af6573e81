"""Factored attention: one layer of attention fitted on one alignment predicts its contacts (Bhattacharya et al. 2021).

Head h attends with position-only queries and keys ``Q_h, K_h (L, d)`` over the other positions, values
``W_V^h (q, q)`` over the states: couplings ``J_ij = Σ_h A_h[i, j] W_V^h``, fitted by the Potts model's
pseudo-likelihood (:func:`fit_factored_attention`). Contact maps: ``"coupling"`` (norms of ``J_ij``, then APC) or
``"attention"`` (``Σ_h A_h`` symmetrised, then APC).
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention.sdpa import attention_weights
from bioattn.coevolution import apc, coupling_norms, distinct_rows, frequency_fields, symmetrize
from bioattn.progress import progress_bar

__all__ = ["CONTACT_MAPS", "LR_SCHEDULES", "FactoredAttention", "fit_factored_attention"]

#: The contact maps a fitted model gives; the first is the default.
CONTACT_MAPS = ("coupling", "attention")
#: Learning-rate schedules of :func:`fit_factored_attention`: cosine decay to 0 over ``steps``, or constant.
LR_SCHEDULES = ("cosine", "constant")


class FactoredAttention(nn.Module):
    """One layer of factored attention over ``length`` columns of ``num_states`` states: ``queries``, ``keys``
    ``(H, L, d)``, ``values`` ``(H, q, q)`` (residue b attended → logit of state a), ``fields (L, q)``."""

    def __init__(self, length: int, num_heads: int = 32, head_dim: int = 32, num_states: int = 21, seed: int = 0) -> None:
        super().__init__()
        if min(length, num_heads, head_dim, num_states) < 1 or length < 2:
            raise ValueError(f"need length >= 2 and positive sizes, got L={length}, H={num_heads}, d={head_dim}, q={num_states}")
        generator = torch.Generator().manual_seed(seed)
        self.length, self.num_heads, self.head_dim, self.num_states = length, num_heads, head_dim, num_states
        self.queries = nn.Parameter(torch.randn(num_heads, length, head_dim, generator=generator))
        self.keys = nn.Parameter(torch.randn(num_heads, length, head_dim, generator=generator))
        self.values = nn.Parameter(torch.zeros(num_heads, num_states, num_states))
        self.fields = nn.Parameter(torch.zeros(length, num_states))

    def num_parameters(self) -> int:
        """``2·H·L·d + H·q² + L·q``."""
        return sum(p.numel() for p in self.parameters())

    def attention(self) -> Tensor:
        """Tied attention ``(H, L, L)``: ``softmax(Q_h K_hᵀ / sqrt(d))`` over keys j ≠ i (rows sum to 1)."""
        scores = self.queries @ self.keys.transpose(-1, -2) / math.sqrt(self.head_dim)
        off_diagonal = ~torch.eye(self.length, dtype=torch.bool, device=scores.device)
        return attention_weights(scores, off_diagonal)[1]

    def couplings(self) -> Tensor:
        """Implied symmetric couplings ``(L·q, L·q)`` in :func:`~bioattn.coevolution.pseudo_likelihood`'s layout:
        ``½(U + Uᵀ)``, entry ``(j·q + b, i·q + a)`` of ``U`` being ``Σ_h A_h[i, j] W_V^h[b, a]``."""
        return self._couplings_from(*self._coupling_factors())

    def _couplings_from(self, pairs: Tensor, values: Tensor) -> Tensor:
        """:meth:`couplings` ``(L·q, L·q)`` from :meth:`_coupling_factors`' ``pairs (L·L, 2H)`` and ``values (2H, q·q)``."""
        length, q = self.length, self.num_states
        blocks = (pairs @ values).view(length, length, q, q)  # (j, i, b, a)
        return blocks.permute(0, 2, 1, 3).reshape(length * q, length * q)

    def _coupling_factors(self) -> tuple[Tensor, Tensor]:
        """``pairs (L·L, 2H)`` (symmetric, antisymmetric parts of each ``A_h``) and ``values (2H, q·q)`` (those of
        each ``W_V^h``) whose product holds the coupling blocks ``J_ji[b, a]``."""
        length, q, heads = self.length, self.num_states, self.num_heads
        attention = self.attention()  # (H, i, j)
        pairs = 0.5 * torch.cat([attention + attention.transpose(1, 2), attention - attention.transpose(1, 2)])
        values = 0.5 * torch.cat([self.values + self.values.transpose(1, 2), self.values - self.values.transpose(1, 2)])
        return pairs.permute(2, 1, 0).reshape(length * length, 2 * heads), values.reshape(2 * heads, q * q)

    def coupling_blocks(self) -> Tensor:
        """The implied couplings as blocks ``(L, L, q, q)``: ``[i, j, a, b]`` couples state a at i with b at j."""
        length, q = self.length, self.num_states
        return self.couplings().view(length, q, length, q).permute(0, 2, 1, 3)

    @torch.no_grad()
    def contact_map(self, kind: str = "coupling") -> Tensor:
        """Contact scores ``(L, L)``, symmetric, APC-corrected, diagonal 0 (``kind`` in :data:`CONTACT_MAPS`)."""
        if kind == "coupling":
            return apc(coupling_norms(self.coupling_blocks()))
        if kind == "attention":
            return apc(symmetrize(self.attention().sum(0)))
        raise ValueError(f"kind must be one of {CONTACT_MAPS}, got {kind!r}")

    def pseudo_likelihood(self, tokens: Tensor, weights: Tensor, *, lambda_single: float = 0.01,
                          lambda_pair: float = 0.2) -> Tensor:
        """The objective of :func:`bioattn.coevolution.pseudo_likelihood` for the implied :meth:`couplings`, of
        tokens ``(N, L)`` and weights ``(N,)``; sets every parameter's ``.grad`` (gap fields' to 0), returns the
        float64 value."""
        length, q = self.length, self.num_states
        pairs, values = self._coupling_factors()
        couplings = self._couplings_from(pairs, values)
        # x·J for one-hot rows x: the sum of the L rows of J at the observed states
        observed_rows = (tokens + torch.arange(length) * q).reshape(-1)
        row_starts = torch.arange(0, tokens.numel(), length)
        logits = (self.fields.reshape(-1) + F.embedding_bag(observed_rows, couplings, row_starts, mode="sum")
                  ).view(len(tokens), length, q)
        observed = logits.gather(2, tokens[..., None])[..., 0]
        squared_couplings = ((pairs @ (values @ values.T)) * pairs).sum()  # ‖couplings‖², each J_ij twice
        value = ((weights[:, None] * (logits.logsumexp(-1) - observed)).sum()
                 + lambda_single * self.fields[:, :-1].square().sum()
                 + 0.5 * lambda_pair * (length - 1) * squared_couplings)
        for parameter in self.parameters():
            parameter.grad = None
        value.backward()
        self.fields.grad[:, -1] = 0.0
        return value.detach().double()


def fit_factored_attention(tokens: Tensor, weights: Tensor, *, num_heads: int = 32, head_dim: int = 32,
                           num_states: int = 21, lambda_single: float = 0.01, lambda_pair: float = 0.2,
                           steps: int = 1000, lr: float = 0.02, lr_schedule: str = "cosine", batch_size: int = 256,
                           max_cpu_seconds: float | None = None, seed: int = 0,
                           progress: bool = False) -> FactoredAttention:
    """Fit :class:`FactoredAttention` on tokens ``(N, L)`` with sequence ``weights (N,)`` (eval mode on return): Adam
    for ``steps`` steps (``lr_schedule`` in :data:`LR_SCHEDULES`) on ``batch_size`` random distinct rows per step,
    for at most ``max_cpu_seconds`` of CPU time."""
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}")
    tokens, weights = distinct_rows(tokens, weights, num_states)
    model = FactoredAttention(tokens.shape[1], num_heads, head_dim, num_states, seed=seed)
    with torch.no_grad():
        model.fields.copy_(frequency_fields(tokens, num_states))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps) if lr_schedule == "cosine" else None
    generator = torch.Generator().manual_seed(seed)
    total, started = weights.sum(), time.process_time()
    for _ in progress_bar(range(steps), desc="factored attention", unit="step", disable=not progress, leave=False):
        rows, row_weights = tokens, weights
        if len(tokens) > batch_size:
            batch = torch.randperm(len(tokens), generator=generator)[:batch_size]
            rows, row_weights = tokens[batch], weights[batch] * (total / weights[batch].sum())
        model.pseudo_likelihood(rows, row_weights, lambda_single=lambda_single, lambda_pair=lambda_pair)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if max_cpu_seconds is not None and time.process_time() - started > max_cpu_seconds:
            break
    return model.eval()
