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
the implied couplings, gap field 0, fields started from the column frequencies) by Adam with a cosine-decayed
learning rate (:func:`fit_factored_attention`). L-BFGS, which fits the convex Potts model, stalls on this non-convex
objective (its line search stops within 15 iterations; 1atzA long-range P@L/5 0.07). No pair statistic of the
alignment (frequencies, covariance, MI, a Potts fit) is computed: only this model's own objective.

Contact map (:meth:`FactoredAttention.contact_map`): ``"coupling"`` (default) is the Frobenius norm of the
zero-sum-gauged implied coupling ``J_ij`` over the 20 amino acids (gap excluded), then APC, exactly as the Potts
model's map; ``"attention"`` is the attention itself, ``Σ_h A_h`` symmetrised, then APC (tied with the coupling
map at 100 steps, 0.528 vs 0.526 mean, but failing on 16pkA, so the coupling map is the default). With the defaults
the coupling map reaches a mean long-range P@L/5 of 0.613 on the 11 bundled families against 0.688 for the Potts
model (README table; 0.581 at a constant lr 0.1, whose map moved with the mini-batches; 0.526 with the former 100
steps of 2,048 rows).

Parameters: ``2·H·L·d + H·q² + L·q`` (L = 222, H = 32, d = 32: 0.47 M, against 10.9 M for the Potts model's
``(L·q)²/2`` couplings). Cost of one Adam step on B rows: ``O(H·L²·(d + q²))`` to build the couplings and pull
their gradient back, plus ``O(B·L·L·q)`` for the logits and their gradient (each row's logits are the sum of the L
coupling rows of its observed states, not a dense one-hot product). Defaults (:func:`fit_factored_attention`):
1,000 steps of 256 rows, about 11 CPU-minutes on 5ptpA (L = 222, 15,567 rows) on one core.
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

#: The contact maps a fitted model gives (see the module docstring); the first is the default.
CONTACT_MAPS = ("coupling", "attention")
#: Learning-rate schedules of :func:`fit_factored_attention`: cosine decay to 0 over ``steps``, or constant.
LR_SCHEDULES = ("cosine", "constant")


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

        ``½(U + Uᵀ)`` where entry ``(j·q + b, i·q + a)`` of ``U`` is ``Σ_h A_h[i, j] W_V^h[b, a]``; zero q×q
        diagonal blocks. Built without transposing the ``(L·q)²`` matrix: with ``S_h, D_h`` the symmetric and
        antisymmetric parts of ``A_h`` and ``V^s_h, V^a_h`` those of ``W_V^h``, the entry is
        ``Σ_h S_h[i, j] V^s_h[b, a] + D_h[i, j] V^a_h[b, a]`` (one product over 2H "heads").
        """
        return self._couplings_from(*self._coupling_factors())

    def _couplings_from(self, pairs: Tensor, values: Tensor) -> Tensor:
        """:meth:`couplings` ``(L·q, L·q)`` from :meth:`_coupling_factors`' ``pairs (L·L, 2H)`` and ``values (2H, q·q)``."""
        length, q = self.length, self.num_states
        blocks = (pairs @ values).view(length, length, q, q)  # (j, i, b, a)
        return blocks.permute(0, 2, 1, 3).reshape(length * q, length * q)

    def _coupling_factors(self) -> tuple[Tensor, Tensor]:
        """``pairs (L·L, 2H)`` (row ``j·L + i``: ``[S_h[i, j]…, D_h[i, j]…]``) and ``values (2H, q·q)``
        (``[V^s_h…, V^a_h…]``) whose product holds the coupling blocks ``J_ji[b, a]``."""
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

    def pseudo_likelihood(
        self, tokens: Tensor, weights: Tensor, *, lambda_single: float = 0.01, lambda_pair: float = 0.2,
    ) -> Tensor:
        """The regularised negative pseudo-log-likelihood of tokens ``(N, L)`` (ids < q), weights ``(N,)``.

        The objective of :func:`bioattn.coevolution.pseudo_likelihood` (same value, tested) for the implied
        :meth:`couplings`: ``-Σ_n w_n Σ_i log p(x_ni | x_n,-i) + λ_s Σ_i Σ_{a<q-1} h_ia² + λ_p (L-1) Σ_{i<j} ‖J_ij‖²``.
        Sets every parameter's ``.grad`` (the gap fields' to 0: they are held at 0) and returns the value
        (float64 scalar). Costs ``O(N·L·L·q)`` for the logits and their gradient plus ``O(H·L²·q²)`` for the couplings.
        """
        length, q = self.length, self.num_states
        pairs, values = self._coupling_factors()
        couplings = self._couplings_from(pairs, values)
        # x·J for one-hot rows x: the sum of the L rows of J at the observed states (3× faster than the dense product)
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


def fit_factored_attention(
    tokens: Tensor,
    weights: Tensor,
    *,
    num_heads: int = 32,
    head_dim: int = 32,
    num_states: int = 21,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    steps: int = 1000,
    lr: float = 0.02,
    lr_schedule: str = "cosine",
    batch_size: int = 256,
    max_cpu_seconds: float | None = None,
    seed: int = 0,
    progress: bool = False,
) -> FactoredAttention:
    """Fit :class:`FactoredAttention` on tokens ``(N, L)`` with 80 %-identity ``weights (N,)``; returns it (eval mode).

    Identical rows are merged (weights summed). Fields start from the column frequencies, values at 0 (the
    Potts model's starting point: no couplings), queries and keys from ``N(0, 1)`` (``seed``). Adam (``lr``,
    decayed to 0 over ``steps`` by a cosine with ``lr_schedule="cosine"``, else constant) for ``steps`` steps on
    the full objective, or, when there are more than ``batch_size`` distinct rows, on ``batch_size`` random
    distinct rows per step, their weights rescaled to sum to the total weight (so the pseudo-likelihood keeps its
    scale against the regularisation); stops early after ``max_cpu_seconds`` of this process's CPU time.
    """
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
