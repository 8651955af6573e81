"""The MONAI 3D ResNet that ``bioattn train ct`` trains beside the attention model, as a saved model of its own."""
from __future__ import annotations

from typing import Sequence

from monai.networks.nets import ResNet
from torch import Tensor

from bioattn.models.ct_classifier import CTClassifier
from bioattn.models.hybrid_ct import with_distance_channel

__all__ = ["ResNetCT3D"]


class ResNetCT3D(CTClassifier):
    """MONAI ``ResNet("basic", layers, widths, spatial_dims=3)`` with bioattn's save/load and prediction; inputs are
    zero-padded to a multiple of ``input_multiple``."""

    def __init__(self, in_channels: int = 1, num_classes: int = 2, *, widths: Sequence[int] = (8, 16, 32, 64),
                 layers: Sequence[int] = (2, 2, 2, 2), conv1_stride: int = 1, distance_channel: bool = False,
                 input_multiple: int = 1, class_names: Sequence[str] | None = None) -> None:
        super().__init__()
        self.network = ResNet("basic", list(layers), list(widths), spatial_dims=3,
                              n_input_channels=in_channels + bool(distance_channel), num_classes=num_classes,
                              conv1_t_stride=conv1_stride)
        self.config = {"in_channels": in_channels, "num_classes": num_classes, "widths": list(widths),
                       "layers": list(layers), "conv1_stride": conv1_stride, "distance_channel": distance_channel,
                       "input_multiple": input_multiple,
                       "class_names": list(class_names) if class_names is not None else None}
        self.in_channels, self.distance_channel, self.stride = in_channels, distance_channel, input_multiple
        self.class_names = list(class_names) if class_names is not None else [f"class_{k}" for k in range(num_classes)]
        self.init_run_settings()

    gradcam_layer = "network.layer4"

    def forward(self, x: Tensor) -> Tensor:
        """``x: (B, C, D, H, W)`` → logits ``(B, num_classes)``."""
        return self.network(with_distance_channel(x) if self.distance_channel else x)
