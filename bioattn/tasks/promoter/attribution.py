"""Per-nucleotide attributions of a promoter classifier (or ensemble) by every :data:`PROMOTER_METHODS`."""
from __future__ import annotations

import torch
from torch import Tensor

from bioattn.attention.rollout import rollout_rows
from bioattn.data.dna import N_ID, strand_average
from bioattn.explain.attribution import (METHOD_COST, METHODS, check_method, class_probability, layer_attribution,
                                         predicted_log_odds, random_map)
from bioattn.explain.faithfulness import ScoreMasked
from bioattn.explain.ism import _uses_rc, predicted_classes
from bioattn.explain.relevance import attention_gradients, relevance_from_attention
from bioattn.models.ensemble import average_over_members

#: Methods of a DNA model: every method of :data:`~bioattn.explain.attribution.METHODS`, and in-silico mutagenesis.
PROMOTER_METHODS = (*METHODS, "ism")
#: What each of :data:`PROMOTER_METHODS` costs, in gradient × input passes (``explain promoter --method auto``).
RELATIVE_COST = {method: METHOD_COST[method] for method in PROMOTER_METHODS}


def _relevance(member: torch.nn.Module, ids: Tensor, padding_mask: Tensor, classes: Tensor, start_layer: int) -> Tensor:
    """[CLS] row of the gradient-weighted relevance ``(B, L)``, in groups of one length without a padding mask."""
    lengths = (~padding_mask).sum(1)
    influence = torch.zeros(ids.shape, device=ids.device)
    for length in lengths.unique().tolist():
        rows = lengths == length
        with torch.enable_grad():
            hidden, _, weights = member.encode(ids[rows, :length], None, need_weights=True)
            score = predicted_log_odds(member.head(hidden[:, 0]).squeeze(-1) if member.binary else member.head(hidden[:, 0]),
                                       classes[rows])
            gradients = attention_gradients(score, weights)
        relevance = relevance_from_attention([w.detach() for w in weights], gradients, start_layer=start_layer)
        influence[rows, :length] = relevance[:, 0, 1:]
    return influence


def _one_strand(member: torch.nn.Module, method: str, ids: Tensor, padding_mask: Tensor, classes: Tensor, *,
                head_fusion: str, start_layer: int) -> Tensor:
    """``(B, L)`` map of one strand by one (non-random) method."""
    if method == "rollout":
        with torch.no_grad():
            _, key_padding_mask, weights = member.encode(ids, padding_mask, need_weights=True)
            return rollout_rows(weights, 0, head_fusion=head_fusion, start_layer=start_layer,
                                key_padding_mask=key_padding_mask)[:, 1:]
    if method == "relevance":
        return _relevance(member, ids, padding_mask, classes, start_layer)
    baselines = ids.masked_fill(~padding_mask, N_ID)
    attribution = layer_attribution(method, lambda x, mask, c: predicted_log_odds(member(x, mask), c), member.embedding,
                                    ids, baselines=baselines, additional_forward_args=(padding_mask, classes))
    return attribution.sum(-1).detach()


def promoter_attribution(model: torch.nn.Module, ids: Tensor, padding_mask: Tensor, method: str, *,
                         classes: Tensor | None = None, rc_average: bool | None = None, head_fusion: str = "mean",
                         start_layer: int = 0, seed: int = 0) -> Tensor:
    """``ids (B, L)``, ``padding_mask (B, L)`` (True = PAD) → ``(B, L)`` attribution, 0 at padding."""
    check_method(method, PROMOTER_METHODS)
    model.eval()
    device = next(model.parameters()).device
    ids, padding_mask = ids.to(device), padding_mask.to(device)
    real = (~padding_mask).float()
    if method == "random":
        return random_map(tuple(ids.shape), torch.Generator().manual_seed(seed)).to(device) * real
    use_rc = _uses_rc(model, rc_average)
    classes = predicted_classes(model, ids, padding_mask, rc_average=use_rc) if classes is None else classes.to(device)
    if method == "ism":
        from bioattn.explain.ism import ism_attribution

        return ism_attribution(model, ids, padding_mask, classes, rc_average=use_rc).to(device) * real

    def explain(member: torch.nn.Module) -> Tensor:
        kwargs = {"head_fusion": head_fusion, "start_layer": start_layer}
        def one_strand(strand: Tensor) -> Tensor:
            return _one_strand(member, method, strand, padding_mask, classes, **kwargs)

        return strand_average(one_strand, ids, padding_mask, per_position=True) if use_rc else one_strand(ids)

    return average_over_members(model, explain).float() * real


def promoter_score(model: torch.nn.Module, ids: Tensor, predicted: int, *, rc_average: bool | None = None) -> ScoreMasked:
    """Faithfulness score of ``ids (n,)``: masks ``(K, n)`` (True = N) → ``(K,)`` probability of ``predicted``."""
    use_rc = _uses_rc(model, rc_average)

    @torch.no_grad()
    def score(masks: Tensor) -> Tensor:
        batch = ids[None].expand(len(masks), -1).masked_fill(masks.to(ids.device), N_ID)
        probabilities = model.proba_from_ids(batch, None, rc_average=use_rc)
        return class_probability(probabilities, torch.full((len(masks),), predicted, device=batch.device))

    return score


def attribute_tokens(model: torch.nn.Module, ids: Tensor, method: str, **options) -> Tensor:
    """:func:`promoter_attribution` of token ids ``(B, L)`` padded with ``PAD``."""
    from bioattn.data.dna import PAD_ID
    return promoter_attribution(model, ids, ids == PAD_ID, method, **options)
