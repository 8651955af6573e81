"""Factored attention: one layer of attention fitted on one alignment predicts its contacts (Bhattacharya et al. 2021).

"Single Layers of Attention Suffice to Predict Protein Contacts" (Bhattacharya, Thomas, Rao, Dauparas, Koo,
Baker, Song, Ovchinnikov): a Potts-like model whose couplings are *factored* through attention. Head h has

- queries and keys from the position alone, tied over every row of the alignment: ``Q_h, K_h (L, d)`` (a
  one-hot position embedding times ``W_Q``, ``W_K``, i.e. free per-position vectors);
- the attention ``A_h = softmax(Q_h K_hᵀ / sqrt(d))`` over the other positions (a position never attends to
  itself), computed by the shared attention core (:func:`bioattn.attention.sdpa.attention_weights`);
- values from the residues: ``W_V^h (q, q)`` over the amino-acid alphabet (20 amino acids + gap, the states of
  :mod:`bioattn.coevolution`).

The logit of state a at position i of a row x is ``h_i(a) + Σ_h Σ_j A_h[i, j] W_V^h[x_j, a]``: the implied
coupling ``J_ij = Σ_h A_h[i, j] W_V^h`` (symmetrised, ``(J_ij + J_jiᵀ) / 2``). It is fitted by the same
regularised pseudo-likelihood as the Potts model (:func:`bioattn.coevolution.pseudo_likelihood`: 80 %-identity
sequence weights, identical rows merged, ``λ_single = 0.01`` on the amino-acid fields, ``λ_pair = 0.2·(L-1)`` on
the implied couplings, gap field 0, fields started from the column frequencies) by Adam
(:func:`fit_factored_attention`). L-BFGS, which fits the convex Potts model, stalls on this non-convex
objective (its line search stops within 15 iterations; 1atzA long-range P@L/5 0.07). No pair statistic of the
alignment (frequencies, covariance, MI, a Potts fit) is computed: only this model's own objective.

Contact map (:meth:`FactoredAttention.contact_map`): ``"coupling"`` (default) is the Frobenius norm of the
zero-sum-gauged implied coupling ``J_ij`` over the 20 amino acids (gap excluded), then APC, exactly as the Potts
model's map; ``"attention"`` is the attention itself, ``Σ_h A_h`` symmetrised, then APC. Measured on the 11 bundled
families (100 Adam steps, long-range P@L/5): coupling 0.526 mean, attention 0.528, a tie (the attention map is
better on 1atzA, T0866, 5ptpA, 1a0tP, PF13354, but fails on 16pkA: 0.14 against 0.45); the coupling map is the
default for its worst case (choices made on the families it is evaluated on).

Parameters: ``2·H·L·d + H·q² + L·q`` (L = 222, H = 32, d = 32: 0.47 M, against 10.9 M for the Potts model's
``(L·q)²/2`` couplings). Cost of one Adam step on B rows: ``O(H·L²·(d + q²))`` to build the couplings plus
``O(B·(L·q)²)`` for the objective and its gradient (two dense products, as one Potts evaluation on B rows); with
B = 2048 rows per step, 100 steps cost a few CPU-minutes on the largest bundled family (5ptpA, L = 222).
"""
from __future__ import annotations

import math
import time

import torch
from torch import Tensor, nn

from bioattn.attention.sdpa import attention_weights
from bioattn.coevolution import (
    apc,
    coupling_norms,
    distinct_rows,
    frequency_fields,
    pseudo_likelihood,
    symmetrize,
)
from bioattn.progress import progress_bar

__all__ = ["CONTACT_MAPS", "FactoredAttention", "fit_factored_attention"]

#: The contact maps a fitted model gives (see the module docstring); the first is the default.
CONTACT_MAPS = ("coupling", "attention")


class FactoredAttention(nn.Module):
    """One layer of factored attention over an alignment of ``length`` columns with ``num_states`` states.

    Parameters: ``queries``, ``keys`` ``(H, L, d)``, ``values`` ``(H, q, q)`` (``values[h, b, a]``: what a
    residue b at the attended position adds to the logit of state a), ``fields`` ``(L, q)``.
    """

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
        """Implied symmetric couplings ``(L·q, L·q)`` in :func:`~bioattn.coevolution.pseudo_likelihood`'s layout.

        Entry ``(j·q + b, i·q + a)`` of the unsymmetrised matrix is ``Σ_h A_h[i, j] W_V^h[b, a]``; zero q×q
        diagonal blocks.
        """
        length, q, heads = self.length, self.num_states, self.num_heads
        attention = self.attention().permute(2, 1, 0).reshape(length * length, heads)  # (j·L + i, h)
        blocks = (attention @ self.values.reshape(heads, q * q)).view(length, length, q, q)  # (j, i, b, a)
        implied = blocks.permute(0, 2, 1, 3).reshape(length * q, length * q)
        return 0.5 * (implied + implied.T)

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

    def pseudo_likelihood(
        self, tokens: Tensor, weights: Tensor, *, lambda_single: float = 0.01, lambda_pair: float = 0.2,
    ) -> Tensor:
        """The regularised negative pseudo-log-likelihood of tokens ``(N, L)`` (ids < q), weights ``(N,)``.

        Sets every parameter's ``.grad`` (no autograd graph through the rows: the gradient of the Potts
        objective with respect to the implied couplings is pulled back through :meth:`couplings`).
        Returns the value (float64 scalar).
        """
        couplings = self.couplings()
        with torch.no_grad():
            value, field_grad, coupling_grad = pseudo_likelihood(
                self.fields.detach().reshape(-1), couplings.detach(), tokens, weights,
                lambda_single=lambda_single, lambda_pair=lambda_pair,
            )
        for parameter in self.parameters():
            parameter.grad = None
        couplings.backward(coupling_grad)
        self.fields.grad = field_grad.view_as(self.fields)
        return value


def fit_factored_attention(
    tokens: Tensor,
    weights: Tensor,
    *,
    num_heads: int = 32,
    head_dim: int = 32,
    num_states: int = 21,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    steps: int = 100,
    lr: float = 0.1,
    batch_size: int = 2048,
    max_cpu_seconds: float | None = None,
    seed: int = 0,
    progress: bool = False,
) -> FactoredAttention:
    """Fit :class:`FactoredAttention` on tokens ``(N, L)`` with 80 %-identity ``weights (N,)``; returns it (eval mode).

    Identical rows are merged (weights summed). Fields start from the column frequencies, values at 0 (the
    Potts model's starting point: no couplings), queries and keys from ``N(0, 1)`` (``seed``). Adam (``lr``)
    for ``steps`` steps on the full objective, or, when there are more than ``batch_size`` distinct rows, on
    ``batch_size`` random distinct rows per step, their weights rescaled to sum to the total weight (so the
    pseudo-likelihood keeps its scale against the regularisation); stops early after ``max_cpu_seconds`` of this
    process's CPU time.
    """
    tokens, weights = distinct_rows(tokens, weights, num_states)
    model = FactoredAttention(tokens.shape[1], num_heads, head_dim, num_states, seed=seed)
    with torch.no_grad():
        model.fields.copy_(frequency_fields(tokens, num_states))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    total, started = weights.sum(), time.process_time()
    for _ in progress_bar(range(steps), desc="factored attention", unit="step", disable=not progress, leave=False):
        rows, row_weights = tokens, weights
        if len(tokens) > batch_size:
            batch = torch.randperm(len(tokens), generator=generator)[:batch_size]
            rows, row_weights = tokens[batch], weights[batch] * (total / weights[batch].sum())
        model.pseudo_likelihood(rows, row_weights, lambda_single=lambda_single, lambda_pair=lambda_pair)
        optimizer.step()
        if max_cpu_seconds is not None and time.process_time() - started > max_cpu_seconds:
            break
    return model.eval()
