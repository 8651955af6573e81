"""Per-column attributions of a :class:`~bioattn.models.msa_contact.MSAContactModel` by every method of
:data:`MSA_METHODS`, explaining its masked-LM prediction on the query row; columns are masked in every row."""
from __future__ import annotations

import torch
from torch import Tensor

from bioattn.attention.rollout import attention_rollout
from bioattn.data.msa import MSATokenizer
from bioattn.explain.attribution import (
    METHOD_COST, METHODS, check_method, layer_attribution, predicted_log_odds, random_map,
)
from bioattn.explain.faithfulness import ScoreMasked
from bioattn.explain.relevance import attention_gradients, relevance_from_attention

#: Methods of an MSA model: the method-generic :data:`~bioattn.explain.attribution.METHODS`.
MSA_METHODS = METHODS
#: What each of :data:`MSA_METHODS` costs, in gradient × input passes (``explain msa --method auto``).
RELATIVE_COST = {method: METHOD_COST[method] for method in MSA_METHODS}

_TOKENS = MSATokenizer()
#: Alignment cells per forward pass of Integrated Gradients (bounds its memory).
IG_CELLS = 2**15


def query_cells(tokens: Tensor) -> Tensor:
    """Bool ``(L,)``: columns where the query (row 0 of ``tokens (N, L)``) has a residue (not a gap or padding)."""
    query = tokens[0]
    return (query != _TOKENS.gap_id) & (query != _TOKENS.pad_id) & (query != _TOKENS.mask_id)


@torch.no_grad()
def predicted_residues(model: torch.nn.Module, tokens: Tensor) -> Tensor:
    """Residue ids ``(L,)`` the model predicts on the query row of the intact alignment ``tokens (N, L)``."""
    logits, _ = model(tokens[None].to(next(model.parameters()).device))
    return logits[0, 0].argmax(dim=-1)


def _query_log_odds(logits: Tensor, residues: Tensor, cells: Tensor) -> Tensor:
    """``logits (B, N, L, 22)`` → ``(B,)`` mean log-odds of ``residues (L,)`` over the query's ``cells (L,)``."""
    chosen = logits[:, 0][:, cells]  # (B, n, 22)
    targets = residues[cells].expand(len(chosen), -1)
    return predicted_log_odds(chosen.flatten(0, 1).float(), targets.flatten()).view(len(chosen), -1).mean(1)


def _row_attention_with_gradients(model: torch.nn.Module, tokens: Tensor, residues: Tensor, cells: Tensor
                                  ) -> tuple[list[Tensor], list[Tensor]]:
    """Every layer's tied row attention ``(1, H, L, L)`` and its gradient, captured from the forward pass."""
    captured: list[Tensor] = []
    hooks = [layer.row_attention.register_forward_hook(lambda _m, _i, output: captured.append(output[1]))
             for layer in model.layers]
    try:
        with torch.enable_grad():
            logits, _ = model(tokens[None], need_weights=True)
            gradients = attention_gradients(_query_log_odds(logits, residues, cells), captured)
    finally:
        for hook in hooks:
            hook.remove()
    return [a.detach() for a in captured], gradients


def msa_attribution(model: torch.nn.Module, tokens: Tensor, method: str, *, residues: Tensor | None = None,
                    head_fusion: str = "mean", start_layer: int = 0, seed: int = 0) -> Tensor:
    """Attribution ``(L,)`` of every column of ``tokens (N, L)`` (query first) for the query-row prediction ``residues``
    (default: the model's own); the model is put in eval mode."""
    check_method(method, MSA_METHODS)
    model.eval()
    tokens = tokens.to(next(model.parameters()).device)
    length = tokens.shape[1]
    if method == "random":
        return random_map((length,), torch.Generator().manual_seed(seed)).to(tokens.device)
    residues = predicted_residues(model, tokens) if residues is None else residues.to(tokens.device)
    cells = query_cells(tokens)
    if method in ("rollout", "relevance"):
        if method == "rollout":
            with torch.no_grad():
                _, maps = model(tokens[None], need_weights=True)
            flow = attention_rollout(list(maps.unbind(1)), head_fusion=head_fusion, start_layer=start_layer)
        else:
            attentions, gradients = _row_attention_with_gradients(model, tokens, residues, cells)
            flow = relevance_from_attention(attentions, gradients, start_layer=start_layer)
        return flow[0][cells].sum(dim=0).float()
    baselines = torch.where(tokens == _TOKENS.pad_id, tokens, torch.full_like(tokens, _TOKENS.mask_id))[None]
    attribution = layer_attribution(
        method, lambda x: _query_log_odds(model(x)[0], residues, cells), model.embed, tokens[None], baselines=baselines,
        internal_batch_size=max(1, IG_CELLS // tokens.numel()))
    return attribution.detach()[0].sum(dim=(0, 2)).float()  # (N, L, E) → (L,)


def msa_score(model: torch.nn.Module, tokens: Tensor, residues: Tensor, *, batch_size: int = 8) -> ScoreMasked:
    """Faithfulness score of ``tokens (N, L)``: masks ``(K, L)`` (True = column masked) → ``(K,)`` mean probability of
    the predicted query ``residues``."""
    cells = query_cells(tokens)

    @torch.no_grad()
    def score(masks: Tensor) -> Tensor:
        out = []
        for chunk in masks.split(batch_size):
            chunk = chunk.to(tokens.device)[:, None, :].expand(-1, tokens.shape[0], -1)
            batch = tokens[None].expand(len(chunk), -1, -1).masked_fill(chunk, _TOKENS.mask_id)
            probabilities = model(batch)[0][:, 0].float().softmax(dim=-1)  # (K, L, 22)
            chosen = probabilities.gather(-1, residues[None, :, None].expand(len(chunk), -1, 1))[..., 0]
            out.append(chosen[:, cells].mean(dim=1))
        return torch.cat(out)

    return score
