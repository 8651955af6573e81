"""HybridCT3D: any input size divisible by the stride, attention on the 3D token grid, save/load."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from monai.networks.utils import pixelshuffle
from scipy import ndimage

from bioattn.errors import UserInputError
from bioattn.explain import attention_rollout
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.hybrid_ct import DistanceChannelInput, upsample_token_map


def tiny(**overrides) -> HybridCT3D:
    options = dict(stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=24, num_heads=2, num_layers=2, dropout=0.0)
    options.update(overrides)
    torch.manual_seed(0)
    return HybridCT3D(1, 3, **options).eval()


@pytest.mark.parametrize("shape", [(8, 8, 8), (4, 12, 20), (16, 8, 4)])
def test_any_size_divisible_by_the_stride(shape: tuple[int, int, int]) -> None:
    model = tiny()
    assert model.stride == 4
    logits = model(torch.rand(2, 1, *shape))
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()
    assert model.token_grid(shape) == tuple(s // 4 for s in shape)


@pytest.mark.parametrize("shape", [(8, 8, 6), (9, 8, 8), (2, 4, 4)])
def test_non_divisible_size_is_refused(shape: tuple[int, int, int]) -> None:
    with pytest.raises(UserInputError, match=r"divisible by the stem stride 4.*DivisiblePad\(k=4\)"):
        tiny()(torch.rand(1, 1, *shape))


def test_wrong_rank_or_channels_is_refused() -> None:
    with pytest.raises(UserInputError, match=r"expected input \(B, 1, D, H, W\), got shape \(1, 2, 8, 8, 8\)"):
        tiny()(torch.rand(1, 2, 8, 8, 8))
    with pytest.raises(UserInputError, match=r"got shape \(1, 1, 8, 8\)"):
        tiny()(torch.rand(1, 1, 8, 8))


def test_attention_weights_map_onto_the_3d_token_grid() -> None:
    model = tiny()
    captured = {}
    model.stem.register_forward_hook(lambda module, inputs, output: captured.update(features=output))
    model.to_tokens.register_forward_hook(lambda module, inputs, output: captured.update(tokens=inputs[0]))
    x = torch.rand(2, 1, 8, 12, 16)
    out = model(x, need_weights=True)
    d, h, w = out.grid
    assert out.grid == (2, 3, 4)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 2, 1 + d * h * w, 1 + d * h * w)
    assert torch.allclose(out.logits, model(x), atol=1e-5)  # same numbers with and without weights
    cls_map = out.cls_attention(layer=0)
    assert cls_map.shape == (2, 2, d, h, w)
    for i, j, k in [(0, 0, 0), (1, 2, 3), (0, 1, 2), (1, 0, 3)]:
        token = i * h * w + j * w + k  # raster order used by the reshape
        assert torch.equal(captured["tokens"][:, token], captured["features"][:, :, i, j, k])
        assert torch.equal(cls_map[..., i, j, k], out.attentions[0][:, :, 0, 1 + token])
    rollout = out.cls_rollout()
    assert rollout.shape == (2, d, h, w)
    expected = attention_rollout(out.attentions)[:, 0, 1:].reshape(2, d, h, w)
    assert torch.allclose(rollout, expected)
    assert (rollout.sum(dim=(1, 2, 3)) <= 1 + 1e-5).all()  # the rest of [CLS]'s share stays on itself


def test_positions_differ_per_axis() -> None:
    """The 3D code tells (i, j, k) from its permutations, so tokens know where they are."""
    model = tiny()
    codes = model.positions((3, 3, 3), torch.device("cpu"))
    assert codes.shape == (27, 24)
    assert len({tuple(row.tolist()) for row in codes}) == 27
    assert not torch.allclose(codes[1 * 9 + 2 * 3 + 0], codes[2 * 9 + 1 * 3 + 0])


def test_upsampled_map_keeps_each_token_inside_its_block() -> None:
    grid = torch.zeros(1, 2, 3, 4)
    grid[0, 1, 2, 1] = 1.0
    voxels = upsample_token_map(grid, (8, 12, 16))
    assert voxels.shape == (1, 8, 12, 16)
    peak = torch.nonzero(voxels[0] == voxels.max())
    assert ((peak // 4) == torch.tensor([1, 2, 1])).all()
    probs, attention = tiny().attention_map(torch.rand(1, 1, 8, 12, 16))
    assert probs.shape == (1, 3) and torch.allclose(probs.sum(), torch.tensor(1.0))
    assert attention.shape == (1, 8, 12, 16) and (attention >= 0).all()


@pytest.mark.parametrize("head_fusion, residual, start_layer", [("mean", True, 0), ("max", False, 1), ("min", True, 1)])
def test_chunked_attention_map_equals_the_rollout_of_the_full_maps(head_fusion: str, residual: bool, start_layer: int) -> None:
    model = tiny(num_layers=3)
    x = torch.rand(2, 1, 8, 12, 16)  # 2 x 3 x 4 = 24 tokens + [CLS]: chunks of 7 leave a partial last chunk
    with torch.no_grad():
        full = model(x, need_weights=True)
        expected = upsample_token_map(full.cls_rollout(residual=residual, head_fusion=head_fusion, start_layer=start_layer),
                                      x.shape[2:])
    for chunk_size in (7, None):
        probs, voxel_map = model.attention_map(x, residual=residual, head_fusion=head_fusion, start_layer=start_layer,
                                               chunk_size=chunk_size)
        torch.testing.assert_close(voxel_map, expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(probs, full.logits.softmax(dim=-1))
    assert expected.std() > 1e-4  # the map is not flat: the comparison is not vacuous


def test_from_pretrained_round_trip(tmp_path: Path) -> None:
    model = tiny(class_names=["a", "b", "c"])
    model.train()
    model(torch.rand(4, 1, 8, 8, 8))  # move the batch-norm running statistics off their defaults
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = HybridCT3D.from_pretrained(tmp_path)
    assert loaded.config == model.config and loaded.class_names == ["a", "b", "c"]
    x = torch.rand(2, 1, 8, 8, 12)
    assert torch.equal(loaded(x), model(x))


def test_unshuffle_hands_every_voxel_to_the_stem_and_maps_attention_back_onto_the_input(tmp_path: Path) -> None:
    model = tiny(unshuffle=2)
    assert model.stride == 8 and model.config["unshuffle"] == 2
    seen = {}
    model.stem.register_forward_pre_hook(lambda module, args: seen.update(stem_input=args[0]))
    x = torch.rand(2, 1, 8, 16, 24)
    probs, voxel_map = model.attention_map(x)
    assert seen["stem_input"].shape == (2, 8, 4, 8, 12)  # each 2³ block of voxels became 8 channels
    assert torch.equal(pixelshuffle(seen["stem_input"], 3, 2), x)  # lossless: undoing the fold gives the input back
    assert model.token_grid(x.shape[2:]) == (1, 2, 3) and voxel_map.shape == (2, 8, 16, 24)
    model.save_pretrained(tmp_path)
    assert torch.equal(HybridCT3D.from_pretrained(tmp_path)(x), model(x))
    with pytest.raises(UserInputError, match="divisible by the stem stride 8"):
        model(torch.rand(1, 1, 8, 8, 12))


def test_stem_depth_sets_the_convolutions_per_stage_and_older_configs_load_with_two(tmp_path: Path) -> None:
    for depth in (1, 2, 4):
        model = tiny(stem_depth=depth)
        convolutions = [m for m in model.stem.modules() if isinstance(m, torch.nn.Conv3d)]
        # each stage: `depth` convolutions in the residual branch plus the strided 1x1 (or 3x3) skip projection
        assert len(convolutions) == 2 * (depth + 1) and model.config["stem_depth"] == depth
    x = torch.rand(2, 1, 8, 8, 8)
    model.save_pretrained(tmp_path / "four")
    assert torch.equal(HybridCT3D.from_pretrained(tmp_path / "four")(x), model(x))
    two = tiny(stem_depth=2)
    two.save_pretrained(tmp_path / "two")
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    del config["stem_depth"]  # a model saved before stem_depth existed
    (tmp_path / "two" / "config.json").write_text(json.dumps(config))
    loaded = HybridCT3D.from_pretrained(tmp_path / "two")
    assert loaded.config["stem_depth"] == 2 and torch.equal(loaded(x), two(x))


def test_distance_channel_feeds_the_stem_the_depth_inside_the_mask(tmp_path: Path) -> None:
    """``distance_channel=True`` is the same network as a 2-channel model given [mask, depth / 8] explicitly."""
    model = tiny(distance_channel=True, unshuffle=2)
    assert model.config["distance_channel"] and model.in_channels == 1
    torch.manual_seed(0)
    reference = HybridCT3D(2, 3, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=24, num_heads=2, num_layers=2,
                           dropout=0.0, unshuffle=2).eval()
    reference.load_state_dict(model.state_dict())
    masks = torch.zeros(2, 1, 16, 16, 16)
    masks[0, 0, 2:14, 3:9, 4:12] = 1.0
    masks[1, 0, 5:11, 5:11, 5:11] = 1.0
    depth = torch.from_numpy(np.stack([
        ndimage.distance_transform_cdt(np.pad(m[0].numpy() > 0.5, 1), metric="taxicab")[1:-1, 1:-1, 1:-1]
        for m in masks])[:, None]).float()
    assert torch.allclose(model(masks), reference(torch.cat([masks, depth / 8.0], dim=1)), atol=1e-6)
    # any other network gets the same two channels through DistanceChannelInput
    assert torch.allclose(DistanceChannelInput(reference)(masks), model(masks), atol=1e-6)
    model.save_pretrained(tmp_path)
    assert torch.equal(HybridCT3D.from_pretrained(tmp_path)(masks), model(masks))
    plain = tiny()
    plain.save_pretrained(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["distance_channel"]  # a model saved before distance_channel existed: loads without it
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = HybridCT3D.from_pretrained(tmp_path / "old")
    assert not loaded.config["distance_channel"] and torch.equal(loaded(masks), plain(masks))


def test_invalid_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="unshuffle and stem_depth must be >= 1"):
        HybridCT3D(unshuffle=0)
    with pytest.raises(ValueError, match="stem_depth must be >= 1"):
        HybridCT3D(stem_depth=0)
    with pytest.raises(ValueError, match="divisible by 6"):
        HybridCT3D(embed_dim=128)
    with pytest.raises(ValueError, match="one entry per stage"):
        HybridCT3D(stem_channels=(8, 16), stem_strides=(2,))
    with pytest.raises(ValueError, match="class_names needs 2 names"):
        HybridCT3D(class_names=["only one"])


def test_flip_tta_is_the_mean_over_the_eight_flips_and_makes_predictions_flip_invariant() -> None:
    from torch.utils.data import TensorDataset

    from bioattn.models.ct_classifier import flip_axis_sets, predict_probabilities

    flips = flip_axis_sets()
    assert len(flips) == 8 and len(set(flips)) == 8 and () in flips and (2, 3, 4) in flips
    model = tiny()
    volumes = torch.rand(3, 1, 8, 8, 12)
    dataset = TensorDataset(volumes, torch.zeros(3, dtype=torch.long))
    with torch.no_grad():
        expected = torch.stack([model(volumes.flip(axes) if axes else volumes).softmax(-1) for axes in flips]).mean(0)
    averaged = predict_probabilities(model, dataset, batch_size=2, flip_tta=True)
    assert averaged.shape == (3, 3)
    assert torch.allclose(torch.from_numpy(averaged), expected, atol=1e-6)
    # the 8 flips form a group, so the averaged prediction of a flipped volume is that of the volume
    flipped = TensorDataset(volumes.flip(3), torch.zeros(3, dtype=torch.long))
    assert torch.allclose(torch.from_numpy(predict_probabilities(model, flipped, flip_tta=True)),
                          torch.from_numpy(averaged), atol=1e-5)
    plain, plain_flipped = (predict_probabilities(model, data) for data in (dataset, flipped))
    assert not torch.allclose(torch.from_numpy(plain), torch.from_numpy(plain_flipped), atol=1e-4)


def test_stem_weights_are_contiguous_and_bf16_gradients_stay_close_to_fp32() -> None:
    """Channels-last stem weights made bf16 3D-convolution weight gradients wrong by ~1e30 on this project's CPU
    (oneDNN, torch 2.13) for 5 of 8 seeds of this model; contiguous weights: none."""
    for seed in range(4):
        torch.manual_seed(seed)
        model = tiny()
        assert all(p.is_contiguous() for p in model.stem.parameters())
        x = torch.rand(2, 1, 8, 8, 12)

        def gradients() -> list[torch.Tensor]:
            return list(torch.autograd.grad(model(x).float().square().sum(), list(model.parameters())))

        want = gradients()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = gradients()
        scale = max(float(w.abs().max()) for w in want)
        assert max(float((g.float() - w).abs().max()) for g, w in zip(got, want)) <= 0.05 * scale


def test_channels_last_stem_is_the_same_function_and_saves_contiguous_weights(tmp_path: Path) -> None:
    """fp32 training keeps the stem channels-last (faster oneDNN convolutions): same outputs and gradients up to
    float rounding, and the saved file is the contiguous model's."""
    from bioattn.tasks.ct.fit import prepare_for_training
    from bioattn.training import TrainConfig

    x = torch.rand(2, 1, 8, 8, 12)
    contiguous, channels_last = tiny(), tiny()
    prepare_for_training(channels_last, TrainConfig(precision="fp32"))
    conv_weights = [p for p in channels_last.stem.parameters() if p.dim() == 5]
    assert all(p.is_contiguous(memory_format=torch.channels_last_3d) for p in conv_weights)
    assert any(not p.is_contiguous() for p in conv_weights)  # (1-channel inputs look the same in both formats)
    for model in (contiguous, channels_last):
        model.train()
    grads = [torch.autograd.grad(m(x).square().sum(), list(m.parameters())) for m in (contiguous, channels_last)]
    for want, got in zip(*grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    channels_last.save_pretrained(tmp_path / "saved")
    reloaded = HybridCT3D.from_pretrained(tmp_path / "saved")
    assert all(p.is_contiguous() for p in reloaded.parameters())
    assert all(torch.equal(a, b) for a, b in zip(reloaded.state_dict().values(), channels_last.state_dict().values()))
    prepare_for_training(channels_last, TrainConfig(precision="bf16"))  # bf16: back to contiguous weights
    assert all(p.is_contiguous() for p in channels_last.stem.parameters())


@pytest.mark.parametrize("channels", [1, 3])
def test_unshuffle_3d_is_monais_pixelunshuffle_in_either_layout(channels: int) -> None:
    """The channels-last unshuffle gives MONAI's values in MONAI's channel order (saved models depend on it)."""
    from monai.networks.utils import pixelunshuffle

    from bioattn.models.hybrid_ct import unshuffle_3d

    x = torch.randn(2, channels, 8, 4, 12)
    want = pixelunshuffle(x, 3, 2)
    got = unshuffle_3d(x, 2, channels_last=True)
    assert got.shape == want.shape == (2, channels * 8, 4, 2, 6)
    assert torch.equal(got, want)
    assert got.is_contiguous(memory_format=torch.channels_last_3d)
    assert torch.equal(unshuffle_3d(x, 2), want)


def test_channels_last_stem_with_unshuffle_keeps_outputs_and_input_gradients() -> None:
    """An unshuffling model trained channels-last computes what the contiguous one does, input gradients included
    (gradient attributions of ``explain ct`` read them)."""
    from bioattn.tasks.ct.fit import prepare_for_training
    from bioattn.training import TrainConfig

    contiguous, channels_last = tiny(unshuffle=2), tiny(unshuffle=2)
    prepare_for_training(channels_last, TrainConfig(precision="fp32"))
    stem_inputs = {}
    for name, model in (("contiguous", contiguous), ("channels_last", channels_last)):
        model.stem.register_forward_pre_hook(lambda module, args, name=name: stem_inputs.__setitem__(name, args[0]))
    x = torch.rand(2, 1, 16, 16, 8)
    outputs, grads = [], []
    for model in (contiguous, channels_last):
        inputs = x.clone().requires_grad_(True)
        out = model(inputs)
        grads.append(torch.autograd.grad(out.square().sum(), inputs)[0])
        outputs.append(out.detach())
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grads[1], grads[0], atol=1e-5, rtol=1e-4)
    # the stem of the channels-last model reads its input channels-last (converted once, not by each convolution)
    assert stem_inputs["channels_last"].is_contiguous(memory_format=torch.channels_last_3d)
    assert not stem_inputs["channels_last"].is_contiguous()
    assert stem_inputs["contiguous"].is_contiguous()
    prepare_for_training(channels_last, TrainConfig(precision="bf16"))
    assert not channels_last._channels_last_stem


def test_resnet_stem_is_monais_resnet_trunk_and_keeps_the_stride() -> None:
    """``stem="resnet"`` runs exactly the trunk of MONAI's ResNet (``conv1`` .. ``layer{n}``, basic blocks) given the
    same weights, one ResNet layer per stage, total stride ``unshuffle · 2^stages``; it saves and loads."""
    from monai.networks.nets import ResNet

    model = tiny(stem="resnet", stem_channels=(4, 8, 8), stem_strides=(2, 2, 2), stem_depth=4)
    assert model.stride == 8 and model.config["stem"] == "resnet"
    torch.manual_seed(1)
    reference = ResNet("basic", [2, 2, 2, 2], [4, 8, 8, 8], spatial_dims=3, n_input_channels=1, num_classes=1).eval()
    names = ["conv1", "bn1", "act", "maxpool", "layer1", "layer2", "layer3"]
    for index, name in enumerate(names):
        model.stem[index].load_state_dict(getattr(reference, name).state_dict())
    x = torch.rand(2, 1, 16, 8, 24)
    expected = x
    for name in names:
        expected = getattr(reference, name)(expected)
    assert torch.equal(model.stem(x), expected) and expected.shape[2:] == (2, 1, 3)
    assert model(x).shape == (2, 3) and model(x, need_weights=True).grid == (2, 1, 3)
    blocks = [m for m in model.stem.modules() if type(m).__name__ == "ResNetBlock"]
    assert len(blocks) == 3 * 2  # stem_depth 4 = two basic blocks of two convolutions per stage


def test_resnet_stem_refuses_strides_other_than_two_and_more_than_four_stages() -> None:
    with pytest.raises(ValueError, match="resnet stem has 1 to 4 stages of stride 2"):
        HybridCT3D(stem="resnet", stem_channels=(8, 16), stem_strides=(1, 2))
    with pytest.raises(ValueError, match="resnet stem has 1 to 4 stages"):
        HybridCT3D(stem="resnet", stem_channels=(8,) * 5, stem_strides=(2,) * 5)
    with pytest.raises(ValueError, match="stem must be one of residual, resnet"):
        HybridCT3D(stem="vit")


def test_cls_mean_pool_reads_cls_and_the_mean_of_the_cnn_tokens_before_attention() -> None:
    """``pool="cls+mean"``: the head reads [CLS] after attention beside the mean over the grid of the CNN's tokens
    (before position codes and attention), the two concatenated; its [CLS] half starts at zero."""
    model = tiny(pool="cls+mean", stem="resnet", stem_channels=(4, 8), stem_strides=(2, 2))
    x = torch.rand(2, 1, 8, 12, 8)
    seen = {}
    model.encoder.register_forward_hook(lambda _m, _a, out: seen.update(encoded=out[0]))
    logits = model(x)
    cnn_tokens = model.to_tokens(model.stem(x).flatten(2).transpose(1, 2))
    expected = model.head(torch.cat([seen["encoded"][:, 0], cnn_tokens.mean(dim=1)], dim=-1))
    torch.testing.assert_close(logits, expected)
    # the [CLS] half of the head starts at zero: a new model is its CNN alone, whatever attention computes
    assert torch.count_nonzero(tiny(pool="cls+mean").head[1].weight[:, :24]) == 0
    before = model(x)
    with torch.no_grad():
        for parameter in model.encoder.parameters():
            parameter.add_(torch.randn_like(parameter))
    torch.testing.assert_close(model(x), before)
    shifted = x.clone()
    shifted[:, :, :4] += 1.0
    assert not torch.allclose(model(x), model(shifted))  # while the CNN path does reach the logits
    # once trained, attention counts too (the [CLS] half is an ordinary weight)
    with torch.no_grad():
        model.head[1].weight[:, :24] = 1.0
    assert not torch.allclose(model(x), before)


def test_models_saved_before_the_stem_option_load_with_the_residual_stem(tmp_path: Path) -> None:
    model = tiny()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["stem"] == "residual"
    del config["stem"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = HybridCT3D.from_pretrained(tmp_path)
    x = torch.rand(1, 1, 8, 8, 8)
    assert loaded.config["stem"] == "residual" and torch.equal(loaded(x), model(x))
