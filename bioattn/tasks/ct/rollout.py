"""[CLS] attention rollout of :class:`~bioattn.models.hybrid_ct.HybridCT3D` on the input's voxel grid."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bioattn.models.hybrid_ct import upsample_token_map


@dataclass
class VolumeExplanation:
    """probabilities: ``(B, K)``; grid_map: ``(B, d, h, w)`` [CLS] rollout on the token grid (sums to
    ``1 - R[0, 0]`` per volume); voxel_map: ``(B, D, H, W)`` the grid map trilinearly upsampled onto the model
    input; attentions: per layer ``(B, H, 1 + N, 1 + N)``, token 0 = [CLS], ``N = d*h*w`` in raster order."""

    probabilities: Tensor
    grid_map: Tensor
    voxel_map: Tensor
    attentions: list[Tensor]


@torch.no_grad()
def explain_volumes(model: torch.nn.Module, volumes: Tensor, *, head_fusion: str = "mean", start_layer: int = 0,
                    predict: bool = True) -> VolumeExplanation:
    """Predict with the model's normal (fused) path, then explain with a second pass that returns attention.

    volumes: ``(B, C, D, H, W)`` with ``D, H, W`` divisible by ``model.stride``. The model is put in eval mode.
    ``predict=False`` skips the first pass (one forward pass less); ``probabilities`` are then the softmax of the
    attention pass's logits (the same model, unfused attention: equal up to float rounding).
    """
    model.eval()
    volumes = volumes.to(next(model.parameters()).device)
    output = model(volumes, need_weights=True)
    probabilities = model(volumes).float().softmax(dim=-1) if predict else output.logits.float().softmax(dim=-1)
    grid_map = output.cls_rollout(head_fusion=head_fusion, start_layer=start_layer)
    voxel_map = upsample_token_map(grid_map, volumes.shape[2:])
    return VolumeExplanation(probabilities=probabilities.cpu(), grid_map=grid_map.cpu(), voxel_map=voxel_map.cpu(),
                             attentions=[a.cpu() for a in output.attentions])
