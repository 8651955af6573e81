"""``HybridCT3D(pool="trunk+gate")``: at initialisation its logits are a ResNet's readout of its own trunk (average
pooling of the stem's output grid, then a linear layer), because the attention branch sits behind a scalar gate
that starts at 0; the gate is what learns first, the branch is live once it opens, and the model saves and loads."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from bioattn.models.hybrid_ct import HybridCT3D, unshuffle_3d


def _model(stem: str, **options) -> HybridCT3D:
    torch.manual_seed(0)
    strides = (2, 2, 2) if stem == "resnet" else (1, 2, 2)
    return HybridCT3D(1, 2, stem=stem, stem_channels=(4, 8, 8), stem_strides=strides, stem_depth=2, embed_dim=24,
                      num_heads=2, num_layers=1, dropout=0.0, pool="trunk+gate", **options)


@pytest.mark.parametrize("stem, options", [("resnet", {}), ("residual", {}), ("resnet", {"unshuffle": 2})])
def test_at_initialisation_the_logits_are_a_resnet_readout_of_the_trunk(stem: str, options: dict) -> None:
    model = _model(stem, **options).eval()
    x = torch.randn(3, 1, 32, 32, 32)
    # what a MONAI ResNet computes after its trunk: adaptive average pooling, flatten, fc
    readout = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), model.trunk_head)
    trunk_input = unshuffle_3d(x, model.unshuffle) if model.unshuffle > 1 else x
    with torch.no_grad():
        expected = readout(model.stem(trunk_input))
        assert torch.equal(model(x), expected)
        assert torch.equal(model(x, need_weights=True).logits, expected)
    assert float(model.attention_gate) == 0.0


def test_the_gate_learns_first_and_opens_the_attention_branch() -> None:
    model = _model("resnet").train()
    x, labels = torch.randn(4, 1, 16, 16, 16), torch.tensor([0, 1, 0, 1])
    nn.functional.cross_entropy(model(x), labels).backward()
    assert model.attention_gate.grad is not None and float(model.attention_gate.grad.abs()) > 0
    assert all(p.grad is None or not p.grad.any() for p in model.encoder.parameters())  # closed gate: no gradient yet
    assert model.trunk_head.weight.grad.abs().sum() > 0 and any(p.grad.abs().sum() > 0 for p in model.stem.parameters())
    model.eval()
    with torch.no_grad():
        closed = model(x)
        model.attention_gate.fill_(0.5)
        assert not torch.allclose(model(x), closed)  # the attention branch contributes once the gate opens


def test_a_trunk_gate_model_saves_and_loads(tmp_path: Path) -> None:
    model = _model("resnet").eval()
    with torch.no_grad():
        model.attention_gate.fill_(0.25)
    model.save_pretrained(tmp_path / "run")
    loaded = HybridCT3D.from_pretrained(tmp_path / "run").eval()
    assert loaded.config["pool"] == "trunk+gate" and float(loaded.attention_gate) == 0.25
    x = torch.randn(2, 1, 16, 16, 16)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
