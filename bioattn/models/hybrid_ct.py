"""Hybrid 3D CNN + attention classifier for CT volumes.

A CT volume has millions of voxels, far too many tokens for attention. A small 3D CNN (MONAI residual
units) learns local patterns and downsamples by its total stride ``s``; each voxel of its output grid
``(D/s, H/s, W/s)`` becomes a token with a 3D sinusoidal position code; a [CLS] token is prepended and a
:class:`~bioattn.attention.TransformerEncoder` relates all tokens across the whole volume; the [CLS]
output feeds the classifier. Any input size divisible by ``s`` works.

With ``need_weights=True`` the model also returns every layer's attention, and
:meth:`HybridCTOutput.cls_rollout` / :meth:`HybridCT3D.attention_map` put the [CLS] attention rollout
back on the token grid and on the input's voxel grid (one row of the rollout, O(tokens²) per layer);
:meth:`HybridCT3D.check_attention_size` refuses inputs whose explicit attention maps would be too large;
:meth:`HybridCT3D.attention_map` holds none (it recomputes attention in chunks of query tokens), so it has no limit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence, overload

import numpy as np
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
    "MAX_ATTENTION_BYTES",
    "MAX_ATTENTION_TOKENS",
    "POOLS",
    "STEMS",
    "resnet_stem_problem",
    "HybridCT3D",
    "HybridCTOutput",
    "DistanceChannelInput",
    "with_distance_channel",
    "unshuffle_3d",
    "upsample_token_map",
]

# need_weights=True materialises every layer's (H, 1 + N, 1 + N) map: limit the grid tokens N and the bytes.
MAX_ATTENTION_TOKENS = 4096
MAX_ATTENTION_BYTES = 4 * 2**30
# distance_channel: the depth channel is the voxel distance divided by this (a mask 16 voxels thick gives 1)
DISTANCE_UNIT = 8.0
#: What the classifier reads: the [CLS] token alone ("cls", the model's first layout, kept by runs saved without a
#: ``pool`` entry), or beside it each channel's maximum over the encoded grid tokens ("cls+max": a small finding in
#: one token reaches the classifier directly, where [CLS] attention still has to learn to find it), or beside it the
#: mean of the CNN's tokens before attention ("cls+mean": a direct CNN path, as a ResNet's head reads its trunk), or
#: a ResNet's readout plus a gated attention branch ("trunk+gate": ``fc(mean of the CNN's output grid) + g ·
#: head([CLS])`` with the scalar gate ``g`` starting at 0, so that at initialisation the model computes what a ResNet
#: with its trunk computes and attention adds only as far as the gate learns to open).
POOLS = ("cls", "cls+max", "cls+mean", "trunk+gate")
#: The CNN stem: MONAI ``ResidualUnit`` stages ("residual", the model's first layout, kept by runs saved without a
#: ``stem`` entry) or a MONAI ResNet's trunk ("resnet": a 7³ convolution at full resolution, max pooling, then
#: stages of basic blocks, the first of them at the pooled resolution).
STEMS = ("residual", "resnet")
# HybridCT3D.attention_map recomputes attention this many query tokens at a time instead (no N x N map).
ATTENTION_MAP_CHUNK = 256


def unshuffle_3d(x: Tensor, factor: int, *, channels_last: bool = False) -> Tensor:
    """``(B, C, D, H, W)`` → ``(B, C·f³, D/f, H/f, W/f)`` for ``factor`` f: MONAI's ``pixelunshuffle``.
    ``channels_last``: the result is laid out channels-last (``torch.channels_last_3d``, the same values), converted
    once here rather than by each convolution with channels-last weights that reads it (leave it False with
    contiguous weights)."""
    out = pixelunshuffle(x, 3, factor)
    return out.contiguous(memory_format=torch.channels_last_3d) if channels_last else out


def with_distance_channel(volumes: Tensor) -> Tensor:
    """``(B, C, D, H, W)`` → ``(B, C + 1, D, H, W)``: the volumes and, as the last channel, how deep each voxel lies
    inside the mask of channel 0 (:func:`~bioattn.data.ct.foreground_distance`, in units of ``DISTANCE_UNIT``
    voxels)."""
    return torch.cat([volumes, foreground_distance(volumes) / DISTANCE_UNIT], dim=1)


class DistanceChannelInput(nn.Module):
    """Gives any 3D network the input of ``HybridCT3D(distance_channel=True)``: ``forward(x (B, C, D, H, W))`` runs
    ``network`` on :func:`with_distance_channel` of ``x``, so ``network`` must take ``C + 1`` input channels. The
    baseline of ``bioattn train ct`` gets the same input as the attention model this way."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, x: Tensor) -> Tensor:
        return self.network(with_distance_channel(x))


@dataclass
class HybridCTOutput:
    """Logits plus attention. Token 0 is [CLS]; tokens ``1..N`` are the CNN grid in ``(d, h, w)`` raster order.

    logits: ``(B, num_classes)``; attentions: per layer ``(B, H, 1 + N, 1 + N)``; grid: ``(d, h, w)``, ``N = d*h*w``.
    """

    logits: Tensor
    attentions: list[Tensor]
    grid: tuple[int, int, int]

    def cls_attention(self, layer: int = -1) -> Tensor:
        """What [CLS] attends to in one layer, per head, on the token grid: ``(B, H, d, h, w)``."""
        weights = self.attentions[layer]
        return weights[:, :, 0, 1:].reshape(*weights.shape[:2], *self.grid)

    def cls_rollout(self, *, residual: bool = True, head_fusion: str = "mean", start_layer: int = 0) -> Tensor:
        """[CLS] attention rolled out over the layers from ``start_layer``, on the token grid: ``(B, d, h, w)``.

        Each map sums to ``1 - R[0, 0]`` (≤ 1): the share of [CLS]'s final state that flows from the CNN tokens.
        Only the [CLS] row of the rollout is computed (vector-matrix products, O(tokens²) per layer).
        """
        row = rollout_rows(self.attentions, 0, residual=residual, head_fusion=head_fusion, start_layer=start_layer)
        return row[:, 1:].reshape(row.shape[0], *self.grid)


class HybridCT3D(CTClassifier):
    """3D CNN stem → tokens + 3D positions → [CLS] + Transformer encoder → linear classifier.

    Args:
        in_channels: image channels ``C`` of the input ``(B, C, D, H, W)``.
        num_classes: number of output logits.
        stem_channels: output channels of each residual CNN stage.
        stem_strides: stride of each stage; the input size must be divisible by ``unshuffle`` times their product.
        stem_depth: convolutions per stage (each stage is one MONAI ``ResidualUnit`` with this many conv
            subunits and a skip connection): 2 (the default) or 4, as deep as a ResNet-18 stage of two blocks.
            With ``stem="resnet"``: ``stem_depth // 2`` basic blocks (two convolutions each) per stage, at least one.
        stem: ``"residual"`` (the default) or ``"resnet"``: the trunk of MONAI's ``ResNet`` (``conv1`` 7³ at stride
            1, ``bn1``, ``act``, ``maxpool``, then ``layer1 ..``), one ResNet layer per entry of ``stem_channels``;
            the max pooling is the first stage's stride, so every ``stem_strides`` entry must be 2.
        unshuffle: fold each ``unshuffle³`` block of voxels into channels before the stem (MONAI's
            ``pixelunshuffle``): a lossless downsampling by ``unshuffle`` that lets a large volume keep its detail
            at the stem cost of a smaller one; the stem then sees ``in_channels · unshuffle³`` channels.
        distance_channel: for binary masks: append to the input, before the stem, how deep each voxel lies inside
            the mask of channel 0 (:func:`~bioattn.data.ct.foreground_distance`, in units of 8 voxels), so the
            CNN sees the structure's thickness directly; computed inside ``forward`` (on the CPU, no gradient),
            so every caller, flip averaging included, gets it; gradient attributions (``explain ct``) therefore
            credit the mask only through its direct path, not through its depth. The stem then sees
            ``(in_channels + 1) · unshuffle³`` channels.
        embed_dim, num_heads, num_layers, dim_feedforward, dropout: the Transformer encoder.
        norm: normalisation in the CNN stem (a MONAI name: ``"batch"``, ``"instance"``, ...).
        class_names: optional name of each class, saved with the model for ``bioattn predict ct``.
        pool: what the classifier reads (:data:`POOLS`): ``"cls"`` (the default), ``"cls+max"``, ``"cls+mean"`` or
            ``"trunk+gate"`` (``trunk_head``, a linear layer on the mean of the stem's output grid as a ResNet's
            ``fc`` reads its average pooling, plus ``attention_gate`` times the [CLS] head; the gate, a learnable
            scalar, starts at 0).
        conv1_stride: with ``stem="resnet"``: the stride of ``conv1`` (MONAI's ``conv1_t_stride``), as the
            baseline of ``bioattn train ct`` downsamples instead of ``unshuffle``.
        token_stage: with ``pool="trunk+gate"``: the stem stage whose output grid becomes the tokens, ``-1`` (the
            last, the default) or ``-2`` (the one before: twice as fine a grid; the readout still reads the last; inputs
            then need only be a multiple of the token grid's stride).

    A ``stem="resnet"``, ``pool="trunk+gate"`` model whose stem has four stages is a MONAI ResNet plus a gated
    attention branch: :meth:`start_from_resnet` copies a trained :class:`~bioattn.models.ct_resnet.ResNetCT3D` of
    the same layout into it (the model then computes exactly what that ResNet computes) and :meth:`freeze_trunk`
    leaves only the attention branch and its gate to train.
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 2,
        *,
        stem_channels: Sequence[int] = (8, 16, 64),
        stem_strides: Sequence[int] = (1, 2, 2),
        stem_depth: int = 2,
        unshuffle: int = 1,
        distance_channel: bool = False,
        embed_dim: int = 144,
        num_heads: int = 4,
        num_layers: int = 4,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        norm: str = "batch",
        class_names: Sequence[str] | None = None,
        pool: str = "cls",
        stem: str = "residual",
        conv1_stride: int = 1,
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
            raise ValueError(
                "stem_channels and stem_strides need one entry per stage, "
                f"got {list(stem_channels)}, {list(stem_strides)}"
            )
        if token_stage not in (-1, -2) or (token_stage == -2 and (pool != "trunk+gate" or len(stem_strides) < 2)):
            raise ValueError(f"token_stage must be -1, or -2 with pool='trunk+gate' and two or more stem stages, got {token_stage}")
        if conv1_stride < 1 or (conv1_stride != 1 and stem != "resnet"):
            raise ValueError(f"conv1_stride must be >= 1, and 1 unless stem='resnet', got {conv1_stride}")
        if class_names is not None and len(class_names) != num_classes:
            raise ValueError(f"class_names needs {num_classes} names, got {list(class_names)}")
        if embed_dim % 6:
            raise ValueError(f"embed_dim must be divisible by 6 (a sin/cos pair per axis), got {embed_dim}")
        self.config = {
            "in_channels": in_channels,
            "num_classes": num_classes,
            "stem_channels": list(stem_channels),
            "stem_strides": list(stem_strides),
            "stem_depth": stem_depth,
            "unshuffle": unshuffle,
            "distance_channel": distance_channel,
            "embed_dim": embed_dim,
            "num_heads": num_heads,
            "num_layers": num_layers,
            "dim_feedforward": dim_feedforward,
            "dropout": dropout,
            "norm": norm,
            "class_names": list(class_names) if class_names is not None else None,
            "pool": pool,
            "stem": stem,
            "conv1_stride": conv1_stride,
            "token_stage": token_stage,
        }
        self.pool = pool
        self.class_names = list(class_names) if class_names is not None else [f"class_{k}" for k in range(num_classes)]
        self.init_run_settings()
        self.in_channels = in_channels
        self.unshuffle = unshuffle
        self.distance_channel = distance_channel
        # the token grid's downsampling, a multiple of which every input must be: the whole stem's, or without the
        # last stage's stride (that stage only feeds the readout, whose average pooling takes any grid)
        self.stride = unshuffle * conv1_stride * math.prod(stem_strides[:-1] if token_stage == -2 else stem_strides)
        self.token_stage = token_stage
        self._frozen_trunk = False
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
        # contiguous conv weights by default; see channels_last_stem for fp32 training
        self._channels_last_stem = False
        self.to_tokens = nn.Linear(stem_channels[-2] if token_stage == -2 else previous, embed_dim)
        self.axis_encoding = SinusoidalPositionalEncoding(embed_dim // 3)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        nn.init.normal_(self.cls_token, std=0.02)
        self.encoder = TransformerEncoder(
            embed_dim, num_heads, num_layers, dim_feedforward=dim_feedforward, dropout=dropout
        )
        self.head = nn.Sequential(nn.Dropout(dropout),
                                  nn.Linear(embed_dim * (1 if pool in ("cls", "trunk+gate") else 2), num_classes))
        if pool == "trunk+gate":  # a ResNet's readout of the trunk, and attention's [CLS] head behind a closed gate
            self.trunk_head = nn.Linear(previous, num_classes)
            self.attention_gate = nn.Parameter(torch.zeros(()))
        if pool == "cls+mean":  # the [CLS] half starts at zero: the model starts as its CNN alone, attention joins as it learns
            with torch.no_grad():
                self.head[1].weight[:, :embed_dim] = 0.0

    def start_from_resnet(self, resnet: nn.Module) -> HybridCT3D:
        """Copy a trained :class:`~bioattn.models.ct_resnet.ResNetCT3D` (its MONAI ``network``) into the stem and
        ``trunk_head`` of this ``stem="resnet"``, ``pool="trunk+gate"`` model of the same layout, and close the gate:
        the model then computes exactly what ``resnet`` computes. Returns ``self``; a layout that differs raises
        ``ValueError``."""
        network = getattr(resnet, "network", resnet)
        if self.pool != "trunk+gate" or self.config["stem"] != "resnet" or len(self.stem) != 8:
            raise ValueError("start_from_resnet needs stem='resnet' with four stages and pool='trunk+gate'")
        if self.distance_channel != bool(getattr(resnet, "distance_channel", False)) or self.unshuffle != 1:
            raise ValueError("start_from_resnet: the ResNet and this model must read the same input (distance "
                             "channel, no unshuffle)")
        names = ["conv1", "bn1", "act", "maxpool", "layer1", "layer2", "layer3", "layer4"]
        try:
            for name, module in zip(names, self.stem):
                module.load_state_dict(getattr(network, name).state_dict())
            self.trunk_head.load_state_dict(network.fc.state_dict())
        except (RuntimeError, AttributeError) as exc:
            raise ValueError(f"start_from_resnet: the ResNet's layout differs from this model's stem: {exc}") from exc
        if getattr(network.conv1, "stride", (1,))[0] != self.config["conv1_stride"]:
            raise ValueError("start_from_resnet: the ResNet's conv1 stride differs from this model's conv1_stride")
        with torch.no_grad():
            self.attention_gate.zero_()
        return self

    def freeze_trunk(self, frozen: bool = True) -> HybridCT3D:
        """Train only the attention branch and its gate (``frozen``): the stem and ``trunk_head`` get no gradient
        and the stem's batch normalisation keeps its statistics (it stays in eval mode under :meth:`train`).
        Returns ``self``."""
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
        """Store the CNN stem's weights channels-last (``enabled``) or contiguous; returns ``self``.

        Channels-last 3D-convolution weights make oneDNN's fp32 CPU convolutions faster (one training step of the
        default 28³ model about 1.2x, forward and backward; the same function up to float rounding). Use them in
        fp32 only: under bf16 autocast they made oneDNN's 3D-convolution weight gradients wrong by up to ~1e30 on an
        AVX-512-BF16 CPU (torch 2.13). Saved files hold contiguous copies either way.
        """
        self.stem.to(memory_format=torch.channels_last_3d if enabled else torch.contiguous_format)
        self._channels_last_stem = enabled  # the unshuffled input is then made channels-last too (unshuffle_3d)
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
        """Refuse a model input ``(D, H, W)`` whose attention maps (``need_weights=True``) would be too large.

        Limits: at most :data:`MAX_ATTENTION_TOKENS` grid tokens ``N``, and at most :data:`MAX_ATTENTION_BYTES`
        for ``4 * (1 + N)² * heads * (layers + 2)`` bytes (every layer's float32 maps, plus the scores and
        softmax of the layer being computed). Raises :class:`~bioattn.errors.UserInputError` naming ``source``.
        """
        grid_tokens = math.prod(self.token_grid(spatial_shape))
        needed = 4 * (1 + grid_tokens) ** 2 * self.config["num_heads"] * (self.config["num_layers"] + 2)
        if grid_tokens > MAX_ATTENTION_TOKENS or needed > MAX_ATTENTION_BYTES:
            raise UserInputError(
                f"{source}: the model input is {tuple(spatial_shape)}, {grid_tokens} tokens at stride {self.stride}, "
                f"whose attention maps need about {needed / 2**30:.1f} GiB; attention maps are limited to "
                f"{MAX_ATTENTION_TOKENS} tokens and {MAX_ATTENTION_BYTES / 2**30:.0f} GiB: shrink the input with "
                "--size and --fit resize (e.g. --size 64 64 64 --fit resize) or a coarser --spacing"
            )

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
            raise UserInputError(
                f"expected input (B, {self.in_channels}, D, H, W), got shape {tuple(x.shape)}"
            )
        grid = self.token_grid(x.shape[2:])
        if self.distance_channel:
            x = with_distance_channel(x)  # (B, C + 1, D, H, W)
        if self.unshuffle > 1:
            x = unshuffle_3d(x, self.unshuffle, channels_last=self._channels_last_stem)  # (B, C·u³, D/u, H/u, W/u)
        if self.token_stage == -2:  # the tokens from the stage before the last; the readout from the last
            token_features = self.stem[:-1](x)  # (B, C'', 2d, 2h, 2w)
            features = self.stem[-1](token_features)
        else:
            features = token_features = self.stem(x)  # (B, C', d, h, w)
        cnn_tokens = self.to_tokens(token_features.flatten(2).transpose(1, 2))  # (B, N, embed_dim)
        tokens = cnn_tokens + self.positions(grid, x.device).to(cnn_tokens.dtype)
        tokens = torch.cat([self.cls_token.expand(len(tokens), -1, -1).to(tokens.dtype), tokens], dim=1)
        encoded, attentions = self.encoder(tokens, need_weights=need_weights)
        pooled = encoded[:, 0]
        if self.pool == "trunk+gate":  # what a ResNet with this trunk computes, plus the gated attention branch
            logits = self.trunk_head(features.mean(dim=(2, 3, 4))) + self.attention_gate * self.head(pooled)
            return logits if not need_weights else HybridCTOutput(logits=logits, attentions=attentions or [], grid=grid)
        if self.pool == "cls+max":  # and the strongest response of each channel over the grid tokens
            pooled = torch.cat([pooled, encoded[:, 1:].amax(dim=1)], dim=-1)
        elif self.pool == "cls+mean":  # and the mean of the CNN's tokens, before attention
            pooled = torch.cat([pooled, cnn_tokens.mean(dim=1).to(pooled.dtype)], dim=-1)
        logits = self.head(pooled)
        if not need_weights:
            return logits
        return HybridCTOutput(logits=logits, attentions=attentions or [], grid=grid)

    def _queries_and_keys(self, x: Tensor) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Logits ``(B, num_classes)`` of the normal (fused) pass and each layer's scaled queries and keys
        ``(B, H, 1 + N, Dh)`` (key heads repeated to H), recomputed from the inputs of its attention."""
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
        """Probabilities ``(B, num_classes)`` and the [CLS] rollout upsampled to the input grid ``(B, D, H, W)``.

        No attention map is held: each layer's attention is recomputed ``chunk_size`` query tokens at a time
        (:func:`~bioattn.attention.rollout.rollout_row_from_queries`), so memory grows with ``chunk_size × N``
        rather than ``layers × heads × N²``; the numbers equal ``forward(x, need_weights=True).cls_rollout(...)``.
        The token-grid rollout is trilinearly upsampled by the stem stride (token centres land on the
        centres of the ``stride³`` blocks they summarise), so the map overlays the input voxel for voxel.
        """
        grid = self.token_grid(x.shape[2:])
        logits, pairs = self._queries_and_keys(x.to(next(self.parameters()).device))
        row = rollout_row_from_queries(pairs, 0, residual=residual, head_fusion=head_fusion, start_layer=start_layer,
                                       chunk_size=chunk_size)
        grid_map = row[:, 1:].reshape(row.shape[0], *grid)
        return logits.float().softmax(dim=-1).cpu(), upsample_token_map(grid_map, x.shape[2:]).cpu()


def resnet_stem_problem(strides: Sequence[int]) -> str | None:
    """Why ``strides`` cannot be a ``stem="resnet"`` layout (one stride per CNN stage), or ``None`` when they can: the
    trunk has its max pooling, then ResNet layers, so 1 to 4 stages, each of stride 2."""
    if not 1 <= len(strides) <= 4 or any(s != 2 for s in strides):
        return "a resnet stem has 1 to 4 stages of stride 2 (its max pooling, then ResNet layers)"
    return None


def _resnet_trunk(in_channels: int, channels: Sequence[int], blocks: int, norm: str, conv1_stride: int = 1) -> nn.Sequential:
    """The trunk of MONAI's ``ResNet`` (basic blocks): ``conv1`` (7³, stride ``conv1_stride``), ``bn1``, ``act``, ``maxpool``
    (stride 2), then ``layer1 .. layer{len(channels)}`` of ``blocks`` blocks with ``channels`` outputs (``conv1``
    has ``channels[0]``); total stride ``2 ** len(channels)``, ``channels[-1]`` output channels. The layout is
    checked by :func:`resnet_stem_problem` first."""
    widths = list(channels) + [channels[-1]] * (4 - len(channels))  # MONAI builds four layers; the unused are dropped
    net = ResNet("basic", [blocks] * 4, widths, spatial_dims=3, n_input_channels=in_channels, norm=norm,
                 num_classes=1, feed_forward=False, conv1_t_stride=conv1_stride)
    names = ["conv1", "bn1", "act", "maxpool"] + [f"layer{k + 1}" for k in range(len(channels))]
    return nn.Sequential(*(getattr(net, name) for name in names))


def upsample_token_map(grid_map: Tensor, spatial_shape: Sequence[int]) -> Tensor:
    """Token-grid values ``(B, d, h, w)`` → voxel grid ``(B, D, H, W)`` by trilinear interpolation.

    With ``align_corners=False`` each token's value sits at the centre of the ``D/d × H/h × W/w`` block of
    voxels it summarises, so a token's peak stays inside its own block.
    """
    voxels = F.interpolate(grid_map[:, None].float(), size=tuple(spatial_shape), mode="trilinear", align_corners=False)
    return voxels[:, 0]


