"""The attention model a ``train ct`` run on your own volumes starts from (``--init resnet``, the default there): the
same-run ResNet, trained first, copied into the hybrid's trunk and readout, with the attention branch behind a gate
at 0. At that start it computes exactly what the ResNet computes; only the attention branch and the gate train (the
trunk's weights and batch-normalisation statistics stay the ResNet's); the starting weights compete with the trained
ones on the validation split, so the run keeps the ResNet's weights unless attention improves on them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from bioattn.cli import main as cli_main
from bioattn.models.ct_resnet import ResNetCT3D
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.training import TrainConfig, Trainer
from safetensors.torch import load_file


def _pair(conv1_stride: int, distance_channel: bool = False) -> tuple[ResNetCT3D, HybridCT3D]:
    torch.manual_seed(0)
    resnet = ResNetCT3D(1, 2, widths=[4, 8, 8, 16], layers=[1, 1, 1, 1], conv1_stride=conv1_stride,
                        distance_channel=distance_channel).eval()
    for module in resnet.modules():  # statistics a trained ResNet would have, not the initial 0 / 1
        if isinstance(module, nn.BatchNorm3d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    hybrid = HybridCT3D(1, 2, stem="resnet", stem_channels=[4, 8, 8, 16], stem_strides=[2, 2, 2, 2], stem_depth=2,
                        conv1_stride=conv1_stride, pool="trunk+gate", token_stage=-2, embed_dim=24, num_heads=2,
                        num_layers=1, dropout=0.0, distance_channel=distance_channel)
    return resnet, hybrid


@pytest.mark.parametrize("conv1_stride, distance_channel", [(1, False), (2, False), (2, True)])
def test_started_from_a_resnet_the_hybrid_computes_exactly_what_the_resnet_computes(
        conv1_stride: int, distance_channel: bool) -> None:
    resnet, hybrid = _pair(conv1_stride, distance_channel)
    hybrid.start_from_resnet(resnet).eval()
    edge = 16 * conv1_stride
    x = torch.rand(2, 1, edge, edge, edge)
    if distance_channel:
        x = (x > 0.5).float()
    with torch.no_grad():
        assert torch.equal(hybrid(x), resnet(x))
        output = hybrid(x, need_weights=True)
    assert torch.equal(output.logits, resnet(x).detach())
    # the tokens are the third stage's grid (stride 8 times conv1's), twice as fine as the readout's
    assert output.grid == (2, 2, 2) and hybrid.stride == 8 * conv1_stride
    with torch.no_grad():
        hybrid.attention_gate.fill_(1.0)
        assert not torch.allclose(hybrid(x), resnet(x))  # an open gate adds the attention branch


def test_a_resnet_of_another_layout_is_refused() -> None:
    resnet, hybrid = _pair(1)
    other = ResNetCT3D(1, 2, widths=[4, 8, 16, 16], layers=[1, 1, 1, 1])
    with pytest.raises(ValueError, match="layout differs"):
        hybrid.start_from_resnet(other)
    with pytest.raises(ValueError, match="conv1 stride"):
        _pair(2)[1].start_from_resnet(resnet)


def test_a_frozen_trunk_gets_no_gradient_and_keeps_its_statistics() -> None:
    resnet, hybrid = _pair(1)
    hybrid.start_from_resnet(resnet).freeze_trunk().train()
    before = {k: v.clone() for k, v in hybrid.stem.state_dict().items()}
    x, labels = torch.rand(4, 1, 16, 16, 16), torch.tensor([0, 1, 0, 1])
    nn.functional.cross_entropy(hybrid(x), labels).backward()
    assert all(p.grad is None for p in [*hybrid.stem.parameters(), *hybrid.trunk_head.parameters()])
    assert hybrid.attention_gate.grad is not None and float(hybrid.attention_gate.grad.abs()) > 0
    assert not hybrid.stem.training and hybrid.encoder.training
    assert all(torch.equal(before[k], v) for k, v in hybrid.stem.state_dict().items())  # running stats unchanged


def test_the_starting_weights_compete_for_selection(tmp_path: Path) -> None:
    """A model whose training only makes validation worse keeps its starting weights (epoch 0) with
    ``evaluate_start``; without it the trained weights are kept."""
    data = TensorDataset(torch.randn(16, 3), torch.randint(0, 2, (16,)))
    calls = []

    def evaluate(module: nn.Module) -> dict[str, float]:
        calls.append(len(calls))
        return {"val_auroc": 1.0 / (1 + len(calls))}  # every evaluation worse than the one before

    def loss(module: nn.Module, batch) -> torch.Tensor:
        return nn.functional.cross_entropy(module(batch[0]), batch[1])

    config = TrainConfig(max_epochs=2, batch_size=8, lr=0.1, monitor="val_auroc", device="cpu")
    for start, expected_epoch in ((True, 0), (False, 1)):
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        calls.clear()
        result = Trainer(model, data, config, tmp_path / str(start), loss_fn=loss, evaluate=evaluate,
                         evaluate_start=start).fit()
        assert result.best_epoch == expected_epoch
        assert all(torch.equal(initial[k], v) for k, v in model.state_dict().items()) == start


def test_init_resnet_refuses_flags_that_shape_another_model(ct_own_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    base = ["train", "ct", "--manifest", str(ct_own_data), "--out", str(out), "--quick", "--init", "resnet"]
    assert cli_main([*base, "--pool", "cls+max"]) == 2 and not out.exists()
    assert capsys.readouterr().err.strip() == (
        "error: --init resnet builds the attention model on the same-run ResNet's trunk and readout, so --pool cannot "
        "be set; use --init scratch for a CNN of your own")
    assert cli_main([*base, "--baseline", "none"]) == 2 and not out.exists()
    assert "needs --baseline resnet" in capsys.readouterr().err


@pytest.mark.slow  # two quick models: the full suite runs it
def test_a_default_own_volume_run_starts_its_hybrid_from_its_resnet(ct_own_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli_main(["train", "ct", "--manifest", str(ct_own_data), "--out", str(out), "--quick", "--epochs", "2",
                     "--tta", "none"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    hybrid, resnet = (metrics["models"][name] for name in (
        "hybrid CNN+attention (bioattn)", "MONAI ResNet-18 layout, 1/8 width"))
    assert hybrid["init"] == "resnet"
    # epoch 0 of the attention model is the kept ResNet: the same validation AUROC
    assert hybrid["val_history"][0]["epoch"] == 0
    assert hybrid["val_history"][0]["val_auroc"] == pytest.approx(resnet["val_auroc"], abs=1e-12)
    hybrid_dir = out if metrics["kept_model"]["model_type"] == "HybridCT3D" else out / "hybrid_attention"
    resnet_dir = out / "baseline_resnet" if hybrid_dir == out else out
    model = HybridCT3D.from_pretrained(hybrid_dir)
    assert (model.config["pool"], model.config["stem"], model.config["token_stage"]) == ("trunk+gate", "resnet", -2)
    # the saved trunk and readout are the saved ResNet's, weight for weight (frozen while attention trained)
    saved_resnet = load_file(resnet_dir / "model.safetensors")
    names = ["conv1", "bn1", "act", "maxpool", "layer1", "layer2", "layer3", "layer4"]
    for key, value in load_file(hybrid_dir / "model.safetensors").items():
        part, _, rest = key.partition(".")
        if part == "stem":
            index, _, tail = rest.partition(".")
            assert torch.equal(value, saved_resnet[f"network.{names[int(index)]}.{tail}"]), key
        elif part == "trunk_head":
            assert torch.equal(value, saved_resnet[f"network.fc.{rest}"]), key
    assert "started as the same-run ResNet" in (out / "summary.md").read_text()
