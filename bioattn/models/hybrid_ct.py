"""Hybrid 3D CNN + attention classifier for CT volumes: each voxel of the CNN's output grid is a token with a 3D
position code, and a [CLS] token's output over a :class:`~bioattn.attention.TransformerEncoder` feeds the classifier.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence, overload

import torch
import torch.nn.functional as F
from monai.networks.blocks import ResidualUnit
from monai.networks.nets import ResNet
from monai.networks.utils import pixelunshuffle
from torch import Tensor, nn

from bioattn.attention import SinusoidalPositionalEncoding, TransformerEncoder
from bioattn.errors import UserInputError
from bioattn.attention.rollout import rollout_row_from_queries, rollout_rows
from bioattn.data.ct import foreground_distance
from bioattn.models.ct_classifier import CTClassifier

__all__ = [
    "MAX_ATTENTION_BYTES", "MAX_ATTENTION_TOKENS", "POOLS", "STEMS", "resnet_stem_problem", "HybridCT3D",
    "HybridCTOutput", "DistanceChannelInput", "with_distance_channel", "unshuffle_3d", "upsample_token_map",
]

MAX_ATTENTION_TOKENS = 4096
MAX_ATTENTION_BYTES = 4 * 2**30
DISTANCE_UNIT = 8.0
#: What the classifier reads: [CLS] alone, [CLS] with the grid tokens' channel maximum, [CLS] with the mean CNN
#: token, or a ResNet readout of the trunk plus a gated [CLS] head (gate starting at 0).
POOLS = ("cls", "cls+max", "cls+mean", "trunk+gate")
#: The CNN stem: MONAI ``ResidualUnit`` stages, or a MONAI ResNet's trunk.
STEMS = ("residual", "resnet")
ATTENTION_MAP_CHUNK = 256


def unshuffle_3d(x: Tensor, factor: int, *, channels_last: bool = False) -> Tensor:
    """``(B, C, D, H, W)`` → ``(B, C·f³, D/f, H/f, W/f)`` (MONAI's ``pixelunshuffle``), channels-last on request."""
    out = pixelunshuffle(x, 3, factor)
    return out.contiguous(memory_format=torch.channels_last_3d) if channels_last else out


def with_distance_channel(volumes: Tensor) -> Tensor:
    """``(B, C, D, H, W)`` → ``(B, C + 1, D, H, W)``: appends the depth inside the mask of channel 0."""
    return torch.cat([volumes, foreground_distance(volumes) / DISTANCE_UNIT], dim=1)


class DistanceChannelInput(nn.Module):
    """Runs ``network`` (``C + 1`` input channels) on :func:`with_distance_channel` of ``x (B, C, D, H, W)``."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, x: Tensor) -> Tensor:
        return self.network(with_distance_channel(x))


@dataclass
class HybridCTOutput:
    """logits ``(B, num_classes)``; attentions per layer ``(B, H, 1 + N, 1 + N)`` (token 0 = [CLS], then the grid
    ``(d, h, w)`` in raster order, ``N = d*h*w``)."""
    logits: Tensor
    attentions: list[Tensor]
    grid: tuple[int, int, int]

    def cls_attention(self, layer: int = -1) -> Tensor:
        """What [CLS] attends to in one layer, per head, on the token grid: ``(B, H, d, h, w)``."""
        weights = self.attentions[layer]
        return weights[:, :, 0, 1:].reshape(*weights.shape[:2], *self.grid)

    def cls_rollout(self, *, residual: bool = True, head_fusion: str = "mean", start_layer: int = 0) -> Tensor:
        """``(B, d, h, w)``: [CLS] attention rolled out from ``start_layer`` (each map sums to ``1 - R[0, 0]``)."""
        row = rollout_rows(self.attentions, 0, residual=residual, head_fusion=head_fusion, start_layer=start_layer)
        return row[:, 1:].reshape(row.shape[0], *self.grid)


class HybridCT3D(CTClassifier):
    """3D CNN stem → tokens + 3D positions → [CLS] + Transformer encoder → linear classifier.

    ``stem_depth``: convolutions per stage; ``stem``: :data:`STEMS`; ``unshuffle``: fold each ``unshuffle³`` block of
    voxels into channels first; ``distance_channel``: :func:`with_distance_channel`; ``pool``: :data:`POOLS`;
    ``token_stage``: the stem stage whose output becomes the tokens (``-2`` only with ``pool="trunk+gate"``).
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 2, *, stem_channels: Sequence[int] = (8, 16, 64),
        stem_strides: Sequence[int] = (1, 2, 2), stem_depth: int = 2, unshuffle: int = 1,
        distance_channel: bool = False, embed_dim: int = 144, num_heads: int = 4, num_layers: int = 4,
        dim_feedforward: int | None = None, dropout: float = 0.1, norm: str = "batch",
        class_names: Sequence[str] | None = None, pool: str = "cls", stem: str = "residual", conv1_stride: int = 1,
        token_stage: int = -1,
    ) -> None:
        super().__init__()
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {', '.join(POOLS)}, got {pool!r}")
        if stem not in STEMS:
            raise ValueError(f"stem must be one of {', '.join(STEMS)}, got {stem!r}")
        if stem == "resnet" and (problem := resnet_stem_problem(stem_strides)):
            raise ValueError(f"stem='resnet': {problem}, got stem_strides {list(stem_strides)}")
        if min(in_channels, num_classes, unshuffle, stem_depth) < 1:
            raise ValueError(f"in_channels, num_classes, unshuffle and stem_depth must be >= 1, got {in_channels}, "
                             f"{num_classes}, {unshuffle}, {stem_depth}")
        if len(stem_channels) != len(stem_strides) or not stem_channels:
            raise ValueError("stem_channels and stem_strides need one entry per stage, "
                             f"got {list(stem_channels)}, {list(stem_strides)}")
        if token_stage not in (-1, -2) or (token_stage == -2 and (pool != "trunk+gate" or len(stem_strides) < 2)):
            raise ValueError(f"token_stage must be -1, or -2 with pool='trunk+gate' and two or more stem stages, got {token_stage}")
        if conv1_stride < 1 or (conv1_stride != 1 and stem != "resnet"):
            raise ValueError(f"conv1_stride must be >= 1, and 1 unless stem='resnet', got {conv1_stride}")
        if class_names is not None and len(class_names) != num_classes:
            raise ValueError(f"class_names needs {num_classes} names, got {list(class_names)}")
        if embed_dim % 6:
            raise ValueError(f"embed_dim must be divisible by 6 (a sin/cos pair per axis), got {embed_dim}")
        self.config = {
            "in_channels": in_channels, "num_classes": num_classes, "stem_channels": list(stem_channels),
            "stem_strides": list(stem_strides), "stem_depth": stem_depth, "unshuffle": unshuffle,
            "distance_channel": distance_channel, "embed_dim": embed_dim, "num_heads": num_heads,
            "num_layers": num_layers, "dim_feedforward": dim_feedforward, "dropout": dropout, "norm": norm,
            "class_names": list(class_names) if class_names is not None else None, "pool": pool, "stem": stem,
            "conv1_stride": conv1_stride, "token_stage": token_stage,
        }
        self.pool = pool
        self.class_names = list(class_names) if class_names is not None else [f"class_{k}" for k in range(num_classes)]
        self.init_run_settings()
        self.in_channels, self.unshuffle, self.distance_channel = in_channels, unshuffle, distance_channel
        self.stride = unshuffle * conv1_stride * math.prod(stem_strides[:-1] if token_stage == -2 else stem_strides)
        self.token_stage, self._frozen_trunk = token_stage, False
        stem_in = (in_channels + distance_channel) * unshuffle**3
        if stem == "resnet":
            self.stem = _resnet_trunk(stem_in, stem_channels, max(1, stem_depth // 2), norm, conv1_stride)
            previous = stem_channels[-1]
        else:
            stages, previous = [], stem_in
            for channels, stride in zip(stem_channels, stem_strides):
                stages.append(ResidualUnit(3, previous, channels, strides=stride, subunits=stem_depth, norm=norm))
                previous = channels
            self.stem = nn.Sequential(*stages)
        self._channels_last_stem = False
        self.to_tokens = nn.Linear(stem_channels[-2] if token_stage == -2 else previous, embed_dim)
        self.axis_encoding = SinusoidalPositionalEncoding(embed_dim // 3)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        nn.init.normal_(self.cls_token, std=0.02)
        self.encoder = TransformerEncoder(embed_dim, num_heads, num_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout)
        self.head = nn.Sequential(nn.Dropout(dropout),
                                  nn.Linear(embed_dim * (1 if pool in ("cls", "trunk+gate") else 2), num_classes))
        if pool == "trunk+gate":
            self.trunk_head = nn.Linear(previous, num_classes)
            self.attention_gate = nn.Parameter(torch.zeros(()))
        if pool == "cls+mean":  # the [CLS] half starts at zero
            with torch.no_grad():
                self.head[1].weight[:, :embed_dim] = 0.0

    def start_from_resnet(self, resnet: nn.Module) -> HybridCT3D:
        """Copy a trained :class:`~bioattn.models.ct_resnet.ResNetCT3D` into the stem and ``trunk_head``; ``self``."""
        network = getattr(resnet, "network", resnet)
        if self.pool != "trunk+gate" or self.config["stem"] != "resnet" or len(self.stem) != 8:
            raise ValueError("start_from_resnet needs stem='resnet' with four stages and pool='trunk+gate'")
        if self.distance_channel != bool(getattr(resnet, "distance_channel", False)) or self.unshuffle != 1:
            raise ValueError("start_from_resnet: the ResNet and this model must read the same input (distance "
                             "channel, no unshuffle)")
        if getattr(network.conv1, "stride", (1,))[0] != self.config["conv1_stride"]:
            raise ValueError("start_from_resnet: the ResNet's conv1 stride differs from this model's conv1_stride")
        names = ["conv1", "bn1", "act", "maxpool", "layer1", "layer2", "layer3", "layer4"]
        try:
            for name, module in zip(names, self.stem):
                module.load_state_dict(getattr(network, name).state_dict())
            self.trunk_head.load_state_dict(network.fc.state_dict())
        except (RuntimeError, AttributeError) as exc:
            raise ValueError(f"start_from_resnet: the ResNet's layout differs from this model's stem: {exc}") from exc
        with torch.no_grad():
            self.attention_gate.zero_()
        return self

    def freeze_trunk(self, frozen: bool = True) -> HybridCT3D:
        """Freeze (``frozen``) the stem and ``trunk_head``: no gradient, the stem in eval mode; returns ``self``."""
        self._frozen_trunk = frozen
        for module in (self.stem, getattr(self, "trunk_head", None)):
            if module is not None:
                module.requires_grad_(not frozen)
        return self.train(self.training)

    def train(self, mode: bool = True) -> HybridCT3D:
        super().train(mode)
        if self._frozen_trunk:
            self.stem.eval()
        return self

    def channels_last_stem(self, enabled: bool = True) -> HybridCT3D:
        """Store the stem's weights channels-last (``enabled``; fp32 only) or contiguous; returns ``self``."""
        self.stem.to(memory_format=torch.channels_last_3d if enabled else torch.contiguous_format)
        self._channels_last_stem = enabled
        return self

    def token_grid(self, spatial_shape: Sequence[int]) -> tuple[int, int, int]:
        """The token grid ``(d, h, w)`` for an input of ``spatial_shape`` ``(D, H, W)``; checks divisibility."""
        if len(spatial_shape) != 3 or any(size % self.stride or size == 0 for size in spatial_shape):
            raise UserInputError(
                f"input spatial shape {tuple(spatial_shape)} must be 3 sizes divisible by the stem stride "
                f"{self.stride}; pad or crop it (e.g. monai.transforms.DivisiblePad(k={self.stride}))"
            )
        return tuple(size // self.stride for size in spatial_shape)  # type: ignore[return-value]

    def check_attention_size(self, spatial_shape: Sequence[int], source: str) -> None:
        """Refuse an input ``(D, H, W)`` whose attention maps exceed :data:`MAX_ATTENTION_TOKENS` or bytes."""
        grid_tokens = math.prod(self.token_grid(spatial_shape))
        needed = 4 * (1 + grid_tokens) ** 2 * self.config["num_heads"] * (self.config["num_layers"] + 2)
        if grid_tokens > MAX_ATTENTION_TOKENS or needed > MAX_ATTENTION_BYTES:
            raise UserInputError(
                f"{source}: the model input is {tuple(spatial_shape)}, {grid_tokens} tokens at stride {self.stride}, "
                f"whose attention maps need about {needed / 2**30:.1f} GiB; attention maps are limited to "
                f"{MAX_ATTENTION_TOKENS} tokens and {MAX_ATTENTION_BYTES / 2**30:.0f} GiB: shrink the input with "
                "--size and --fit resize (e.g. --size 64 64 64 --fit resize) or a coarser --spacing")

    def positions(self, grid: Sequence[int], device: torch.device) -> Tensor:
        """3D sinusoidal position codes ``(d*h*w, embed_dim)``: a third of the channels per axis, raster order."""
        axes = torch.meshgrid(*(torch.arange(n, device=device) for n in grid), indexing="ij")
        return torch.cat([self.axis_encoding.encode(axis.reshape(-1)) for axis in axes], dim=-1)

    @overload
    def forward(self, x: Tensor, *, need_weights: Literal[False] = ...) -> Tensor: ...

    @overload
    def forward(self, x: Tensor, *, need_weights: Literal[True]) -> HybridCTOutput: ...

    def forward(self, x: Tensor, *, need_weights: bool = False) -> Tensor | HybridCTOutput:
        """``x: (B, C, D, H, W)`` → logits ``(B, num_classes)``, or a :class:`HybridCTOutput` with ``need_weights``."""
        if x.dim() != 5 or x.shape[1] != self.in_channels:
            raise UserInputError(f"expected input (B, {self.in_channels}, D, H, W), got shape {tuple(x.shape)}")
        grid = self.token_grid(x.shape[2:])
        if self.distance_channel:
            x = with_distance_channel(x)
        if self.unshuffle > 1:
            x = unshuffle_3d(x, self.unshuffle, channels_last=self._channels_last_stem)
        if self.token_stage == -2:
            token_features = self.stem[:-1](x)
            features = self.stem[-1](token_features)
        else:
            features = token_features = self.stem(x)
        cnn_tokens = self.to_tokens(token_features.flatten(2).transpose(1, 2))  # (B, N, embed_dim)
        tokens = cnn_tokens + self.positions(grid, x.device).to(cnn_tokens.dtype)
        tokens = torch.cat([self.cls_token.expand(len(tokens), -1, -1).to(tokens.dtype), tokens], dim=1)
        encoded, attentions = self.encoder(tokens, need_weights=need_weights)
        pooled = encoded[:, 0]
        if self.pool == "trunk+gate":
            logits = self.trunk_head(features.mean(dim=(2, 3, 4))) + self.attention_gate * self.head(pooled)
        elif self.pool == "cls+max":
            logits = self.head(torch.cat([pooled, encoded[:, 1:].amax(dim=1)], dim=-1))
        elif self.pool == "cls+mean":
            logits = self.head(torch.cat([pooled, cnn_tokens.mean(dim=1).to(pooled.dtype)], dim=-1))
        else:
            logits = self.head(pooled)
        return logits if not need_weights else HybridCTOutput(logits=logits, attentions=attentions or [], grid=grid)

    def _queries_and_keys(self, x: Tensor) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Logits ``(B, num_classes)`` of the fused pass and each layer's scaled queries and keys ``(B, H, 1+N, d)``."""
        attention_inputs: list[Tensor] = []
        hooks = [layer.self_attn.register_forward_pre_hook(lambda _, args: attention_inputs.append(args[0]))
                 for layer in self.encoder.layers]
        try:
            logits = self.forward(x)
        finally:
            for hook in hooks:
                hook.remove()
        pairs = []
        for layer, h in zip(self.encoder.layers, attention_inputs):
            attention = layer.self_attn
            q = attention.q_proj(h).unflatten(-1, (attention.num_heads, attention.head_dim)).transpose(1, 2)
            k = attention.k_proj(h).unflatten(-1, (attention.kv_heads, attention.head_dim)).transpose(1, 2)
            pairs.append((q * attention.head_dim**-0.5, k.repeat_interleave(attention.num_heads // attention.kv_heads, dim=1)))
        return logits, pairs

    @torch.no_grad()
    def attention_map(
        self, x: Tensor, *, residual: bool = True, head_fusion: str = "mean", start_layer: int = 0,
        chunk_size: int | None = ATTENTION_MAP_CHUNK,
    ) -> tuple[Tensor, Tensor]:
        """Probabilities ``(B, num_classes)`` and the [CLS] rollout on the input grid ``(B, D, H, W)``, chunked."""
        grid = self.token_grid(x.shape[2:])
        logits, pairs = self._queries_and_keys(x.to(next(self.parameters()).device))
        row = rollout_row_from_queries(pairs, 0, residual=residual, head_fusion=head_fusion, start_layer=start_layer,
                                       chunk_size=chunk_size)
        grid_map = row[:, 1:].reshape(row.shape[0], *grid)
        return logits.float().softmax(dim=-1).cpu(), upsample_token_map(grid_map, x.shape[2:]).cpu()


def resnet_stem_problem(strides: Sequence[int]) -> str | None:
    """Why ``strides`` cannot be a ``stem="resnet"`` layout (1 to 4 stages of stride 2), or ``None``."""
    if not 1 <= len(strides) <= 4 or any(s != 2 for s in strides):
        return "a resnet stem has 1 to 4 stages of stride 2 (its max pooling, then ResNet layers)"
    return None


def _resnet_trunk(in_channels: int, channels: Sequence[int], blocks: int, norm: str, conv1_stride: int = 1) -> nn.Sequential:
    """MONAI ``ResNet``'s ``conv1``, ``bn1``, ``act``, ``maxpool`` and ``layer1 .. layer{len(channels)}``."""
    widths = list(channels) + [channels[-1]] * (4 - len(channels))  # MONAI builds four layers
    net = ResNet("basic", [blocks] * 4, widths, spatial_dims=3, n_input_channels=in_channels, norm=norm,
                 num_classes=1, feed_forward=False, conv1_t_stride=conv1_stride)
    names = ["conv1", "bn1", "act", "maxpool"] + [f"layer{k + 1}" for k in range(len(channels))]
    return nn.Sequential(*(getattr(net, name) for name in names))


def upsample_token_map(grid_map: Tensor, spatial_shape: Sequence[int]) -> Tensor:
    """``(B, d, h, w)`` → ``(B, D, H, W)`` by trilinear interpolation (token values at their blocks' centres)."""
    voxels = F.interpolate(grid_map[:, None].float(), size=tuple(spatial_shape), mode="trilinear", align_corners=False)
    return voxels[:, 0]


