"""Attention rollout: a hand-computed two-layer example, invariants, masks, fusion variants, errors."""
from __future__ import annotations

import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.explain import attention_rollout, fuse_heads


def _random_maps(batch: int, heads: int, length: int, layers: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.softmax(torch.randn(batch, heads, length, length, generator=generator), dim=-1) for _ in range(layers)]


def _hand_example() -> list[torch.Tensor]:
    """Two layers, two heads, two tokens (batch 1)."""
    layer1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]])
    layer2 = torch.tensor([[[1.0, 0.0], [0.2, 0.8]], [[1.0, 0.0], [0.2, 0.8]]])
    return [layer1[None], layer2[None]]


@pytest.mark.parametrize(
    ("head_fusion", "expected"),
    [
        # mean: A1 = ([[.5,.5],[.5,.5]] + I)/2 = [[.75,.25],[.25,.75]]; A2 = ([[1,0],[.2,.8]] + I)/2 = [[1,0],[.1,.9]]
        ("mean", [[0.75, 0.25], [0.30, 0.70]]),
        # max: A1 = normalise([[1,1],[.5,.5]] + I) = [[2/3,1/3],[.25,.75]]
        ("max", [[2 / 3, 1 / 3], [0.1 * 2 / 3 + 0.9 * 0.25, 0.1 / 3 + 0.9 * 0.75]]),
        # min: A1 = normalise([[0,0],[.5,.5]] + I) = [[1,0],[.25,.75]]
        ("min", [[1.0, 0.0], [0.325, 0.675]]),
    ],
)
def test_hand_computed_two_layer_example(head_fusion: str, expected: list[list[float]]) -> None:
    rollout = attention_rollout(_hand_example(), head_fusion=head_fusion)
    torch.testing.assert_close(rollout[0], torch.tensor(expected), atol=1e-6, rtol=0)


def test_hand_example_without_residual_and_from_second_layer() -> None:
    # no residual: [[1,0],[.2,.8]] @ [[.5,.5],[.5,.5]] = all 0.5
    no_residual = attention_rollout(_hand_example(), residual=False)
    torch.testing.assert_close(no_residual[0], torch.full((2, 2), 0.5))
    # start_layer=1 ignores layer 1 entirely: only A2 = [[1,0],[.1,.9]]
    second_only = attention_rollout(_hand_example(), start_layer=1)
    torch.testing.assert_close(second_only[0], torch.tensor([[1.0, 0.0], [0.1, 0.9]]))


@pytest.mark.parametrize("head_fusion", ["mean", "max", "min"])
@pytest.mark.parametrize("residual", [True, False])
def test_rows_sum_to_one_and_are_non_negative(head_fusion: str, residual: bool) -> None:
    rollout = attention_rollout(_random_maps(3, 4, 7, 3), head_fusion=head_fusion, residual=residual)
    assert rollout.shape == (3, 7, 7)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(3, 7))
    assert (rollout >= 0).all()


def test_uniform_attention_gives_uniform_rollout_without_residual() -> None:
    uniform = [torch.full((1, 2, 5, 5), 0.2) for _ in range(3)]
    torch.testing.assert_close(attention_rollout(uniform, residual=False)[0], torch.full((5, 5), 0.2))


def test_matches_explicit_matrix_product() -> None:
    weights = _random_maps(2, 3, 6, 4, seed=1)
    expected = torch.eye(6).expand(2, 6, 6)
    for layer in weights:
        fused = layer.mean(1) + torch.eye(6)
        expected = (fused / fused.sum(-1, keepdim=True)) @ expected
    torch.testing.assert_close(attention_rollout(weights), expected)


def test_batched_equals_per_sample() -> None:
    weights = _random_maps(4, 2, 5, 3, seed=2)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[1, 3:] = True
    mask[3, 4:] = True
    batched = attention_rollout(weights, head_fusion="max", key_padding_mask=mask)
    for b in range(4):
        single = attention_rollout([w[b : b + 1] for w in weights], head_fusion="max", key_padding_mask=mask[b : b + 1])
        torch.testing.assert_close(batched[b : b + 1], single)


def test_padding_gets_zero_influence_and_padding_rows_are_ignored() -> None:
    # The maps deliberately put attention on the padding keys: the mask must remove it.
    weights = _random_maps(2, 3, 6, 2, seed=3)
    mask = torch.tensor([[False] * 6, [False, False, False, False, True, True]])
    rollout = attention_rollout(weights, key_padding_mask=mask)
    assert (rollout[1, :, 4:] == 0).all(), "padding columns must receive zero influence"
    assert (rollout[1, 4:, :] == 0).all(), "padding rows must be zero"
    torch.testing.assert_close(rollout[1, :4].sum(-1), torch.ones(4))
    # The real tokens' rollout equals that of the unpadded sequence.
    unpadded = attention_rollout([w[1:2, :, :4, :4] for w in weights])
    torch.testing.assert_close(rollout[1:2, :4, :4], unpadded)
    # Changing what padding attends to or what attends to padding changes nothing.
    perturbed = [w.clone() for w in weights]
    for w in perturbed:
        w[1, :, 4:, :] = torch.rand(3, 2, 6)
        w[1, :, :, 4:] *= 5.0
    torch.testing.assert_close(attention_rollout(perturbed, key_padding_mask=mask), rollout)
    # Without the mask, the attention on padding does leak into the result.
    assert (attention_rollout(weights)[1, :, 4:] > 0).all()


def test_head_fusion_variants_differ_and_are_ordered() -> None:
    layer = _random_maps(1, 4, 5, 1, seed=4)[0]
    assert (fuse_heads(layer, "min") <= fuse_heads(layer, "mean")).all()
    assert (fuse_heads(layer, "mean") <= fuse_heads(layer, "max")).all()
    torch.testing.assert_close(fuse_heads(layer, "mean"), layer.mean(1))


def test_works_with_encoder_weights_and_low_precision() -> None:
    weights = [w.to(torch.bfloat16) for w in _random_maps(1, 2, 4, 2)]
    rollout = attention_rollout(weights)
    assert rollout.dtype == torch.float32
    torch.testing.assert_close(rollout.sum(-1), torch.ones(1, 4), atol=1e-3, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": []}, "non-empty"),
        ({"weights": [torch.rand(1, 2, 3, 4)]}, "square"),
        ({"weights": [torch.rand(1, 2, 3, 3), torch.rand(1, 2, 4, 4)]}, "weights\\[1\\]"),
        ({"weights": [torch.rand(1, 2, 3, 3)], "head_fusion": "median"}, "head_fusion"),
        ({"weights": [torch.rand(1, 2, 3, 3)], "start_layer": 1}, "start_layer"),
        ({"weights": [torch.rand(1, 2, 3, 3)], "key_padding_mask": torch.zeros(1, 3)}, "bool"),
        ({"weights": [torch.rand(1, 2, 3, 3)], "key_padding_mask": torch.zeros(2, 3, dtype=torch.bool)}, "\\(1, 3\\)"),
    ],
)
def test_clear_errors(kwargs: dict, message: str) -> None:
    weights = kwargs.pop("weights")
    with pytest.raises(UserInputError, match=message):
        attention_rollout(weights, **kwargs)


def test_rollout_of_a_real_encoder_ignores_padding_content() -> None:
    from bioattn.attention import TransformerEncoder

    torch.manual_seed(0)
    encoder = TransformerEncoder(16, 4, 2, dropout=0.0).eval()
    tokens = torch.randn(2, 7, 16)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 5:] = True
    with torch.no_grad():
        _, weights = encoder(tokens, key_padding_mask=mask, need_weights=True)
        changed = tokens.clone()
        changed[0, 5:] = torch.randn(2, 16) * 10
        _, weights_changed = encoder(changed, key_padding_mask=mask, need_weights=True)
    rollout = attention_rollout(weights, key_padding_mask=mask)
    torch.testing.assert_close(attention_rollout(weights_changed, key_padding_mask=mask), rollout)
    assert (rollout[0, :, 5:] == 0).all()
    torch.testing.assert_close(rollout[0, :5].sum(-1), torch.ones(5))
    torch.testing.assert_close(rollout[1].sum(-1), torch.ones(7))


def test_missing_weights_name_need_weights() -> None:
    with pytest.raises(UserInputError, match="need_weights=True"):
        attention_rollout(None)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- row-only rollout


def _padding_mask(batch: int, length: int) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.bool)
    mask[1, length - 2 :] = True
    mask[-1, length - 3 :] = True
    return mask


@pytest.mark.parametrize("head_fusion", ["mean", "max", "min"])
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("start_layer", [0, 2])
@pytest.mark.parametrize("padded", [False, True])
def test_rollout_rows_equal_rows_of_the_full_rollout(head_fusion: str, residual: bool, start_layer: int, padded: bool) -> None:
    from bioattn.explain import rollout_rows

    weights = _random_maps(3, 4, 9, 3, seed=5)
    mask = _padding_mask(3, 9) if padded else None
    options = {"residual": residual, "head_fusion": head_fusion, "start_layer": start_layer, "key_padding_mask": mask}
    full = attention_rollout(weights, **options)
    torch.testing.assert_close(rollout_rows(weights, 0, **options), full[:, 0])
    rows = [8, 0, 3]  # includes a padding row (8) in the padded samples: it must come out zero
    torch.testing.assert_close(rollout_rows(weights, rows, **options), full[:, rows])
    if padded:
        assert (rollout_rows(weights, 8, **options)[1] == 0).all()


def test_rollout_rows_hand_example_and_float64() -> None:
    from bioattn.explain import rollout_rows

    torch.testing.assert_close(rollout_rows(_hand_example(), 1)[0], torch.tensor([0.30, 0.70]))
    weights = [w.double() for w in _random_maps(2, 2, 5, 2, seed=6)]
    rows = rollout_rows(weights, [0, 4])
    assert rows.dtype == torch.float64 and rows.shape == (2, 2, 5)
    torch.testing.assert_close(rows, attention_rollout(weights)[:, [0, 4]])


@pytest.mark.parametrize("rows", [5, -1, [0, 7], []])
def test_rollout_rows_rejects_rows_outside_the_sequence(rows) -> None:
    from bioattn.explain import rollout_rows

    with pytest.raises(UserInputError, match="rows must be token indices in \\[0, 4\\]"):
        rollout_rows(_random_maps(1, 2, 5, 2), rows)
