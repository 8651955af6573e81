"""Per-voxel attributions of a CT model by :data:`~bioattn.tasks.ct.methods.CT_METHODS`, and their score."""
from __future__ import annotations

import warnings

import torch
from torch import Tensor

from bioattn.explain.attribution import check_method, class_probability, input_attribution, predicted_log_odds, random_map
from bioattn.explain.faithfulness import ScoreMasked
from bioattn.explain.relevance import attention_gradients, relevance_from_attention
from bioattn.models.ensemble import average_over_members
from bioattn.models.hybrid_ct import upsample_token_map
from bioattn.tasks.ct.methods import CT_METHODS


def background(volumes: Tensor) -> Tensor:
    """Per-volume background value ``(B, 1, 1, 1, 1)``: the minimum of each volume ``(B, C, D, H, W)``."""
    return volumes.flatten(1).amin(dim=1).view(-1, 1, 1, 1, 1)


def _relevance(member: torch.nn.Module, volumes: Tensor, classes: Tensor, start_layer: int) -> Tensor:
    """[CLS] row of the gradient-weighted relevance on the token grid ``(B, d, h, w)``."""
    with torch.enable_grad():
        output = member(volumes, need_weights=True)
        gradients = attention_gradients(predicted_log_odds(output.logits.float(), classes), output.attentions)
    relevance = relevance_from_attention([a.detach() for a in output.attentions], gradients, start_layer=start_layer)
    return relevance[:, 0, 1:].reshape(len(volumes), *output.grid)


OCCLUSION_MASK, OCCLUSION_OVERLAP = 8, 0.5


def _monai_map(member: torch.nn.Module, method: str, volumes: Tensor, classes: Tensor) -> Tensor:
    """``(B, D, H, W)`` MONAI GradCAM (last CNN stage of the stem) or occlusion sensitivity map."""
    from monai.visualize import GradCAM, OcclusionSensitivity
    maps = []
    for volume, predicted, value in zip(volumes, classes, background(volumes)):
        if method == "gradcam":
            stage = getattr(member, "gradcam_layer", None) or f"stem.{len(member.stem) - 1}"
            with torch.enable_grad():
                cam = GradCAM(nn_module=member, target_layers=stage)(volume[None], class_idx=int(predicted))
            maps.append(cam[0, 0].detach())
        else:
            mask = max(1, min(OCCLUSION_MASK, min(volume.shape[1:]) // 2))
            occlusion = OcclusionSensitivity(member, mask_size=mask, n_batch=8, verbose=False,
                                             mode=float(value), overlap=OCCLUSION_OVERLAP, activate=True)
            with torch.no_grad(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Using a non-tuple sequence for multidimensional indexing")
                sensitivity, _ = occlusion(volume[None])
            maps.append(-sensitivity[0, int(predicted)].float())
    return torch.stack(maps)


def _member_map(member: torch.nn.Module, method: str, volumes: Tensor, classes: Tensor, *, head_fusion: str,
                start_layer: int) -> Tensor:
    """``(B, D, H, W)`` map of one member by one (non-random) method."""
    if method in ("gradcam", "occlusion"):
        return _monai_map(member, method, volumes, classes)
    if method == "rollout":
        return member.attention_map(volumes, head_fusion=head_fusion, start_layer=start_layer)[1].to(volumes.device)
    if method == "relevance":
        return upsample_token_map(_relevance(member, volumes, classes, start_layer), volumes.shape[2:])
    maps = []
    for volume, predicted, value in zip(volumes, classes, background(volumes)):
        def forward(x: Tensor, predicted: Tensor = predicted) -> Tensor:
            return predicted_log_odds(member(x).float(), predicted.expand(len(x)))

        attribution = input_attribution(method, forward, volume[None].clone().requires_grad_(),
                                         baselines=torch.full_like(volume[None], float(value)))
        maps.append(attribution.detach().sum(dim=1)[0])
    return torch.stack(maps)


@torch.no_grad()
def predicted_volume_classes(model: torch.nn.Module, volumes: Tensor) -> Tensor:
    """Class of the largest logit per volume, ``(B,)`` long (the plain forward pass, no flip averaging)."""
    return model(volumes).argmax(dim=-1)


def volume_attribution(
    model: torch.nn.Module, volumes: Tensor, method: str, *, classes: Tensor | None = None,
    head_fusion: str = "mean", start_layer: int = 0, seed: int = 0,
) -> Tensor:
    """``(B, C, D, H, W)`` → ``(B, D, H, W)``: higher = more important for ``classes (B,)`` (default: predicted)."""
    check_method(method, CT_METHODS)
    model.eval()
    volumes = volumes.to(next(model.parameters()).device).float()
    if method == "random":
        return random_map((volumes.shape[0], *volumes.shape[2:]), torch.Generator().manual_seed(seed)).to(volumes.device)
    classes = predicted_volume_classes(model, volumes) if classes is None else classes.to(volumes.device)
    return average_over_members(model, lambda member: _member_map(
        member, method, volumes, classes, head_fusion=head_fusion, start_layer=start_layer)).float()


def volume_score(model: torch.nn.Module, volume: Tensor, predicted: int, *, batch_size: int = 8) -> ScoreMasked:
    """Score of one volume ``(C, D, H, W)``: masks ``(K, D*H*W)`` (True = background) → ``(K,)`` probabilities."""
    value = float(background(volume[None]))

    @torch.no_grad()
    def score(masks: Tensor) -> Tensor:
        out = []
        for chunk in masks.split(batch_size):
            keep = chunk.view(len(chunk), 1, *volume.shape[1:]).to(volume.device)
            batch = volume[None].expand(len(chunk), -1, -1, -1, -1).masked_fill(keep, value)
            probabilities = model(batch).float().softmax(dim=-1)
            out.append(class_probability(probabilities, torch.full((len(chunk),), predicted, device=batch.device)))
        return torch.cat(out)

    return score
