"""[CLS] attention rollout of :class:`~bioattn.models.hybrid_ct.HybridCT3D` on the input's voxel grid."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bioattn.models.hybrid_ct import upsample_token_map


@dataclass
class VolumeExplanation:
    """probabilities ``(B, K)``; [CLS] rollout ``grid_map (B, d, h, w)`` and ``voxel_map (B, D, H, W)``."""
    probabilities: Tensor
    grid_map: Tensor
    voxel_map: Tensor
    attentions: list[Tensor]


@torch.no_grad()
def explain_volumes(model: torch.nn.Module, volumes: Tensor, *, head_fusion: str = "mean", start_layer: int = 0,
                    predict: bool = True) -> VolumeExplanation:
    """``(B, C, D, H, W)`` → :class:`VolumeExplanation`; ``predict=False``: probabilities from the attention pass."""
    model.eval()
    volumes = volumes.to(next(model.parameters()).device)
    output = model(volumes, need_weights=True)
    probabilities = model(volumes).float().softmax(dim=-1) if predict else output.logits.float().softmax(dim=-1)
    grid_map = output.cls_rollout(head_fusion=head_fusion, start_layer=start_layer)
    voxel_map = upsample_token_map(grid_map, volumes.shape[2:])
    return VolumeExplanation(probabilities=probabilities.cpu(), grid_map=grid_map.cpu(), voxel_map=voxel_map.cpu(),
                             attentions=[a.cpu() for a in output.attentions])
