"""Coevolution maps of a protein alignment: mutual information, Gaussian DCA and a pseudo-likelihood Potts model.

- :func:`mi_apc` (mutual information + APC), :func:`gaussian_dca` (inverse covariance, Baldassi et al. 2014),
  :func:`potts_couplings` (the CCMpred / plmDCA objective :func:`pseudo_likelihood`).
- :func:`symmetrize` and :func:`apc` (average-product correction), shared with the attention contact maps.

Inputs are token ids ``(N, L)`` from :class:`bioattn.data.msa.MSATokenizer` and sequence weights ``(N,)``; outputs
are ``(L, L)`` coupling strengths indexed by alignment column (0-based).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from bioattn.data.msa import one_hot
from bioattn.progress import progress_bar


def symmetrize(scores: torch.Tensor) -> torch.Tensor:
    """``(..., L, L)`` → ``S + Sᵀ``."""
    return scores + scores.transpose(-1, -2)


def apc(scores: torch.Tensor) -> torch.Tensor:
    """Average-product correction of symmetric ``(..., L, L)`` scores (Dunn et al. 2008), diagonal excluded.

    ``S_ij - S_i· S_·j / S_··`` with means over off-diagonal entries; the returned diagonal is 0.
    """
    length = scores.shape[-1]
    eye = torch.eye(length, dtype=torch.bool, device=scores.device)
    off = scores.masked_fill(eye, 0.0)
    row = off.sum(-1, keepdim=True) / (length - 1)
    col = off.sum(-2, keepdim=True) / (length - 1)
    total = off.sum((-1, -2), keepdim=True) / (length * (length - 1))
    corrected = off - row * col / total.clamp_min(torch.finfo(scores.dtype).tiny)
    return corrected.masked_fill(eye, 0.0)


def pair_frequencies(
    tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21, chunk_size: int = 4096
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted single ``(L, q)`` and pair ``(L, L, q, q)`` frequencies of tokens ``(N, L)`` (ids ≥ q-1 folded into state q-1).

    With the bioattn tokenizer and ``q=21`` the states are the 20 amino acids and gap (unknown counted as gap).
    """
    tokens = tokens.clamp(max=num_states - 1)
    n, length = tokens.shape
    weights = weights.float() / weights.sum()
    pair = torch.zeros(length * num_states, length * num_states)
    for rows, w in zip(tokens.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)
        pair += (x * w[:, None]).T @ x
    pair = pair.reshape(length, num_states, length, num_states).permute(0, 2, 1, 3)
    single = torch.diagonal(pair, dim1=0, dim2=1).diagonal(dim1=0, dim2=1)  # (L, q)
    return single, pair


def mutual_information(tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21) -> torch.Tensor:
    """Mutual information ``(L, L)`` between alignment columns from weighted frequencies (0·log 0 = 0; diagonal 0)."""
    single, pair = pair_frequencies(tokens, weights, num_states)
    expected = single[:, None, :, None] * single[None, :, None, :]
    ratio = torch.where(pair > 0, pair / expected.clamp_min(1e-30), torch.ones_like(pair))
    mi = (pair * ratio.log()).sum((-1, -2))
    return mi.fill_diagonal_(0.0)


def mi_apc(tokens: torch.Tensor, weights: torch.Tensor) -> np.ndarray:
    """The mutual-information + APC contact baseline: ``(L, L)`` scores from tokens ``(N, L)`` and weights ``(N,)``."""
    return apc(mutual_information(tokens, weights)).numpy()


def pseudo_likelihood(
    fields: torch.Tensor,
    couplings: torch.Tensor,
    tokens: torch.Tensor,
    weights: torch.Tensor,
    *,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    chunk_size: int = 2048,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CCMpred's regularised negative pseudo-log-likelihood of a Potts model and its gradient.

    ``fields (L*q,)``, ``couplings (L*q, L*q)`` symmetric with zero ``q×q`` diagonal blocks (index ``i*q + a``:
    state a at column i), ``tokens (N, L)`` with ids < q, ``weights (N,)``. The value is
    ``-Σ_n w_n Σ_i log p(x_ni | x_n,-i) + λ_s Σ_i Σ_{a<q-1} h_ia² + λ_p (L-1) Σ_{i<j} ‖J_ij‖²``. Returns
    ``(value (float64), d/dfields (L*q,), d/dcouplings (L*q, L*q))``: the gradient over symmetric
    matrices (the mean of J_ij's and J_jiᵀ's partial derivatives), zero on the diagonal blocks and on the
    gap fields (held at 0). Costs two dense ``(N, L*q) × (L*q, L*q)`` products, in row chunks of ``chunk_size``.
    """
    length = tokens.shape[1]
    size = couplings.shape[0]
    num_states = size // length
    observed = tokens + torch.arange(length) * num_states  # (N, L): index of each observed state
    penalty_pair = lambda_pair * (length - 1)
    value = torch.zeros((), dtype=torch.float64)
    field_grad, pair_grad = torch.zeros(size), torch.zeros(size, size)
    for rows, states, w in zip(tokens.split(chunk_size), observed.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)  # (m, L*q)
        logits = torch.addmm(fields, x, couplings).view(len(rows), length, num_states)
        log_norm = logits.logsumexp(-1)  # (m, L)
        value += (w[:, None] * (log_norm - logits.view(len(rows), size).gather(1, states))).sum(dtype=torch.float64)
        residual = (logits - log_norm[..., None]).exp_().view(len(rows), size).sub_(x).mul_(w[:, None])  # w (p - x)
        field_grad += residual.sum(0)
        pair_grad.addmm_(x.T, residual)
    amino_fields = fields.view(length, num_states)[:, :-1]
    value += lambda_single * amino_fields.square().sum(dtype=torch.float64)
    value += 0.5 * penalty_pair * couplings.square().sum(dtype=torch.float64)  # each J_ij stored twice
    field_grad += 2 * lambda_single * fields
    field_grad.view(length, num_states)[:, -1] = 0.0
    pair_grad = 0.5 * (pair_grad + pair_grad.T) + penalty_pair * couplings
    index = torch.arange(length)
    pair_grad.view(length, num_states, length, num_states)[index, :, index, :] = 0.0
    return value, field_grad, pair_grad


def potts_couplings(
    tokens: torch.Tensor,
    weights: torch.Tensor,
    *,
    num_states: int = 21,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    max_iterations: int = 50,
    max_cpu_seconds: float | None = None,
    tolerance: float = 1e-5,
    progress: bool = False,
) -> torch.Tensor:
    """Coupling strengths ``(L, L)`` of a Potts model fitted by pseudo-likelihood (the plmDCA / CCMpred objective).

    Minimises :func:`pseudo_likelihood` (CCMpred's regularisation: ``λ_s = 0.01``, ``λ_p = 0.2·(L-1)``) with
    CCMpred's conventions: amino-acid fields relative to a gap field fixed at 0, started from the column
    frequencies (one pseudocount); couplings between all 21 states, started at 0. L-BFGS stops after
    ``max_iterations`` iterations (CCMpred's default 50), when the objective changes by less than
    ``tolerance`` (relative) in one iteration, or after ``max_cpu_seconds`` of this process's CPU time. Returns the Frobenius
    norm of each zero-sum-gauged ``J_ij`` over the 20 amino acids (gap excluded), diagonal 0; apply
    :func:`apc` to get contact scores.

    ``tokens (N, L)``, ids ≥ q-1 folded into the gap state; ``weights (N,)``: give the whole alignment with
    its 80 %-identity weights (a subsample lowers precision). Identical rows are merged, their weights
    summed; an evaluation costs O(M·(L·q)²) for the M distinct rows.
    """
    tokens, weights = distinct_rows(tokens, weights, num_states)
    length = tokens.shape[1]
    fields = frequency_fields(tokens, num_states).reshape(-1).requires_grad_(True)  # (L*q,)
    couplings = torch.zeros(length * num_states, length * num_states, requires_grad=True)

    @torch.no_grad()
    def objective() -> torch.Tensor:
        value, fields.grad, couplings.grad = pseudo_likelihood(
            fields, couplings, tokens, weights, lambda_single=lambda_single, lambda_pair=lambda_pair
        )
        return value

    optimizer = torch.optim.LBFGS([fields, couplings], lr=1.0, max_iter=1, history_size=10, line_search_fn="strong_wolfe")
    started, previous = time.process_time(), None
    for _ in progress_bar(range(max_iterations), desc="pseudo-likelihood", unit="iter", disable=not progress, leave=False):
        value = float(optimizer.step(objective))
        if previous is not None and abs(previous - value) <= tolerance * abs(previous):
            break
        previous = value
        if max_cpu_seconds is not None and time.process_time() - started > max_cpu_seconds:
            break
    return coupling_norms(couplings.detach().view(length, num_states, length, num_states).permute(0, 2, 1, 3))


def distinct_rows(tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(M, L)`` of the distinct rows of ``tokens (N, L)`` (ids ≥ q-1 folded into the gap state q-1) and
    their summed ``weights (M,)``: the pseudo-likelihood of the merged rows equals that of the original rows."""
    if tokens.ndim != 2 or weights.shape != tokens.shape[:1]:
        raise ValueError(f"tokens must be (N, L) and weights (N,), got {tuple(tokens.shape)} and {tuple(weights.shape)}")
    tokens, inverse = torch.unique(tokens.clamp(max=num_states - 1), dim=0, return_inverse=True)
    return tokens, torch.zeros(len(tokens)).index_add_(0, inverse, weights.float())


def frequency_fields(tokens: torch.Tensor, num_states: int = 21) -> torch.Tensor:
    """CCMpred's starting fields ``(L, q)``: log column counts (one pseudocount) relative to the gap state (0).

    Single-column statistics only (no pair statistics). ``tokens (N, L)`` with ids < q.
    """
    length = tokens.shape[1]
    counts = torch.ones(length, num_states).index_put_(
        (torch.arange(length).repeat(len(tokens)), tokens.reshape(-1)), torch.ones(tokens.numel()), accumulate=True
    )
    return counts.log() - counts[:, -1:].log()


def coupling_norms(blocks: torch.Tensor) -> torch.Tensor:
    """Frobenius norms ``(L, L)`` of coupling blocks ``(L, L, q, q)`` in the zero-sum gauge, last (gap) state excluded; diagonal 0."""
    blocks = blocks - blocks.mean(-1, keepdim=True) - blocks.mean(-2, keepdim=True) + blocks.mean((-1, -2), keepdim=True)
    return blocks[..., :-1, :-1].square().sum((-1, -2)).sqrt().fill_diagonal_(0.0)


def gaussian_dca(tokens: torch.Tensor, weights: torch.Tensor, *, num_states: int = 21, pseudocount: float = 0.8) -> torch.Tensor:
    """Coupling strengths ``(L, L)`` of Gaussian DCA (Baldassi et al. 2014): the inverse covariance of one-hot columns.

    Frequencies are mixed with a uniform pseudocount (0.8, the paper's default); the covariance of the first
    q-1 states (gap left out) is inverted and each ``(q-1)×(q-1)`` block scored by :func:`coupling_norms`.
    Apply :func:`apc` to get contact scores. Cost: O(N (Lq)²) for the frequencies and O((Lq)³) for the inverse.
    """
    single, pair = pair_frequencies(tokens, weights, num_states)
    length, q = single.shape
    single = (1 - pseudocount) * single + pseudocount / q
    pair = (1 - pseudocount) * pair + pseudocount / q**2
    index = torch.arange(length)
    pair[index, index] = torch.diag_embed(single)
    covariance = (pair - single[:, None, :, None] * single[None, :, None, :])[..., : q - 1, : q - 1]
    covariance = covariance.permute(0, 2, 1, 3).reshape(length * (q - 1), length * (q - 1))
    inverse = torch.linalg.inv(covariance.double()).float().view(length, q - 1, length, q - 1).permute(0, 2, 1, 3)
    blocks = torch.zeros(length, length, q, q)
    blocks[..., : q - 1, : q - 1] = inverse
    return coupling_norms(blocks)
