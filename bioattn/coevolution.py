"""Coevolution maps of a protein alignment: ``(N, L)`` tokens and ``(N,)`` weights → ``(L, L)``."""
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
    """``(..., L, L)`` → average-product corrected, means over off-diagonal entries; diagonal 0."""
    length = scores.shape[-1]
    eye = torch.eye(length, dtype=torch.bool, device=scores.device)
    off = scores.masked_fill(eye, 0.0)
    row = off.sum(-1, keepdim=True) / (length - 1)
    col = off.sum(-2, keepdim=True) / (length - 1)
    total = off.sum((-1, -2), keepdim=True) / (length * (length - 1))
    corrected = off - row * col / total.clamp_min(torch.finfo(scores.dtype).tiny)
    return corrected.masked_fill(eye, 0.0)


def pair_frequencies(tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21,
                     chunk_size: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """``(N, L)`` → weighted single ``(L, q)`` and pair ``(L, L, q, q)`` frequencies (ids ≥ q-1 folded into q-1)."""
    tokens = tokens.clamp(max=num_states - 1)
    n, length = tokens.shape
    weights = weights.float() / weights.sum()
    pair = torch.zeros(length * num_states, length * num_states)
    for rows, w in zip(tokens.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)
        pair += (x * w[:, None]).T @ x
    pair = pair.reshape(length, num_states, length, num_states).permute(0, 2, 1, 3)
    single = torch.diagonal(pair, dim1=0, dim2=1).diagonal(dim1=0, dim2=1)
    return single, pair


def mutual_information(tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21) -> torch.Tensor:
    """``(N, L)`` → ``(L, L)`` mutual information between columns (diagonal 0)."""
    single, pair = pair_frequencies(tokens, weights, num_states)
    expected = single[:, None, :, None] * single[None, :, None, :]
    ratio = torch.where(pair > 0, pair / expected.clamp_min(1e-30), torch.ones_like(pair))
    mi = (pair * ratio.log()).sum((-1, -2))
    return mi.fill_diagonal_(0.0)


def mi_apc(tokens: torch.Tensor, weights: torch.Tensor) -> np.ndarray:
    """``(N, L)``, ``(N,)`` → ``(L, L)`` mutual information + APC scores."""
    return apc(mutual_information(tokens, weights)).numpy()


def pseudo_likelihood(fields: torch.Tensor, couplings: torch.Tensor, tokens: torch.Tensor, weights: torch.Tensor, *,
                      lambda_single: float = 0.01, lambda_pair: float = 0.2,
                      chunk_size: int = 2048) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CCMpred's regularised negative pseudo-log-likelihood of a Potts model and its gradients."""
    length = tokens.shape[1]
    size = couplings.shape[0]
    num_states = size // length
    observed = tokens + torch.arange(length) * num_states
    penalty_pair = lambda_pair * (length - 1)
    value = torch.zeros((), dtype=torch.float64)
    field_grad, pair_grad = torch.zeros(size), torch.zeros(size, size)
    for rows, states, w in zip(tokens.split(chunk_size), observed.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)
        logits = torch.addmm(fields, x, couplings).view(len(rows), length, num_states)
        log_norm = logits.logsumexp(-1)
        value += (w[:, None] * (log_norm - logits.view(len(rows), size).gather(1, states))).sum(dtype=torch.float64)
        residual = (logits - log_norm[..., None]).exp_().view(len(rows), size).sub_(x).mul_(w[:, None])
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


def potts_couplings(tokens: torch.Tensor, weights: torch.Tensor, *, num_states: int = 21, lambda_single: float = 0.01,
                    lambda_pair: float = 0.2, max_iterations: int = 50, max_cpu_seconds: float | None = None,
                    tolerance: float = 1e-5, progress: bool = False) -> torch.Tensor:
    """``(N, L)``, ``(N,)`` → ``(L, L)`` Potts coupling norms fitted by pseudo-likelihood (before APC)."""
    tokens, weights = distinct_rows(tokens, weights, num_states)
    length = tokens.shape[1]
    fields = frequency_fields(tokens, num_states).reshape(-1).requires_grad_(True)
    couplings = torch.zeros(length * num_states, length * num_states, requires_grad=True)

    @torch.no_grad()
    def objective() -> torch.Tensor:
        value, fields.grad, couplings.grad = pseudo_likelihood(fields, couplings, tokens, weights,
                                                               lambda_single=lambda_single, lambda_pair=lambda_pair)
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
    """``(N, L)``, ``(N,)`` → the distinct rows ``(M, L)`` (ids ≥ q-1 folded into q-1) and their summed weights."""
    if tokens.ndim != 2 or weights.shape != tokens.shape[:1]:
        raise ValueError(f"tokens must be (N, L) and weights (N,), got {tuple(tokens.shape)} and {tuple(weights.shape)}")
    tokens, inverse = torch.unique(tokens.clamp(max=num_states - 1), dim=0, return_inverse=True)
    return tokens, torch.zeros(len(tokens)).index_add_(0, inverse, weights.float())


def frequency_fields(tokens: torch.Tensor, num_states: int = 21) -> torch.Tensor:
    """``(N, L)`` → ``(L, q)`` log column counts (one pseudocount) relative to the gap state."""
    length = tokens.shape[1]
    counts = torch.ones(length, num_states).index_put_((torch.arange(length).repeat(len(tokens)), tokens.reshape(-1)),
                                                       torch.ones(tokens.numel()), accumulate=True)
    return counts.log() - counts[:, -1:].log()


def coupling_norms(blocks: torch.Tensor) -> torch.Tensor:
    """``(L, L, q, q)`` → ``(L, L)`` zero-sum-gauge Frobenius norms, gap state excluded; diagonal 0."""
    blocks = blocks - blocks.mean(-1, keepdim=True) - blocks.mean(-2, keepdim=True) + blocks.mean((-1, -2), keepdim=True)
    return blocks[..., :-1, :-1].square().sum((-1, -2)).sqrt().fill_diagonal_(0.0)


def gaussian_dca(tokens: torch.Tensor, weights: torch.Tensor, *, num_states: int = 21, pseudocount: float = 0.8) -> torch.Tensor:
    """``(N, L)``, ``(N,)`` → ``(L, L)`` Gaussian DCA coupling norms (inverse covariance of one-hot columns)."""
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
