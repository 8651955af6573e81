"""Attention API inputs: mask conventions, clear errors for wrong dtypes / shapes / layouts, docstrings."""
from __future__ import annotations

import inspect
import re

import pytest
import torch

import bioattn.attention as attention
from bioattn.attention import (
    AxialTransformerLayer,
    ColumnAttention,
    LearnedPositionalEncoding,
    MultiHeadAttention,
    RowAttention,
    SinusoidalPositionalEncoding,
    TransformerEncoder,
    TransformerEncoderLayer,
    scaled_dot_product_attention,
)

E, H = 16, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ------------------------------------------------------------------------------------------ integer masks
def hf_attention_mask() -> torch.Tensor:
    """A Hugging Face-style int64 mask (B=2, L=5): 1 = keep, 0 = padding."""
    return torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


@pytest.mark.parametrize(
    "call, name, conversion",
    [
        (lambda m, x: m(x, key_padding_mask=hf_attention_mask()), "key_padding_mask", "attention_mask == 0"),
        (lambda m, x: m(x, attn_mask=torch.ones(5, 5, dtype=torch.int64)), "attn_mask", "attention_mask == 0"),
    ],
)
@pytest.mark.parametrize("module", [MultiHeadAttention(E, H), TransformerEncoder(E, H, 1), TransformerEncoderLayer(E, H)])
def test_integer_masks_are_refused_with_the_convention_to_use(module, call, name, conversion):
    with pytest.raises(ValueError, match=rf"{name} must be bool \(True = .*\).* Hugging Face .*{re.escape(conversion)}"):
        call(module, torch.randn(2, 5, E))


def test_integer_masks_are_refused_by_the_function_and_the_axial_blocks():
    q = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"mask must be bool \(True = may attend\).*mask = attention_mask.bool\(\)"):
        scaled_dot_product_attention(q, q, q, torch.ones(5, 5, dtype=torch.int64))
    x = torch.randn(2, 3, 5, E)
    for module in (AxialTransformerLayer(E, H), RowAttention(E, H), ColumnAttention(E, H)):
        with pytest.raises(ValueError, match=r"position_padding_mask must be a bool tensor of shape \(2, 5\).*attention_mask == 0"):
            module(x, position_padding_mask=hf_attention_mask())


def test_hugging_face_mask_converted_as_told_gives_the_padding_result():
    mha = MultiHeadAttention(E, H).eval()
    x = torch.randn(2, 5, E)
    expected, _ = mha(x, key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2]))
    converted, _ = mha(x, key_padding_mask=hf_attention_mask() == 0)
    torch.testing.assert_close(converted, expected, atol=0, rtol=0)


# ------------------------------------------------------------------------------------------ float "blocked" values
BLOCKING_VALUES = [float("-inf"), torch.finfo(torch.float32).min, -1e9, -1e4]


@pytest.mark.parametrize("value", BLOCKING_VALUES)
@pytest.mark.parametrize("need_weights", [False, True])
def test_large_negative_float_masks_block_like_bool_masks(value, need_weights):
    q, k, v = torch.randn(3, 2, 3, 6, 8).unbind(0)
    keep = torch.rand(6, 6) > 0.4
    keep[:, 0] = True
    keep[4] = False  # query 4 sees no key
    additive = torch.zeros(6, 6).masked_fill(~keep, value)
    out, weights = scaled_dot_product_attention(q, k, v, additive, need_weights=need_weights)
    expected, expected_weights = scaled_dot_product_attention(q, k, v, keep, need_weights=need_weights)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    assert torch.all(out[..., 4, :] == 0)  # zeros, not the uniform average of the values
    if need_weights:
        torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
        assert torch.all(weights[..., 4, :] == 0)


def test_bfloat16_minus_ten_thousand_still_blocks():
    q = torch.randn(1, 4, 8, dtype=torch.bfloat16)
    mask = torch.zeros(4, 4, dtype=torch.bfloat16)
    mask[2] = -10000.0  # rounds to -9984 in bfloat16
    out, _ = scaled_dot_product_attention(q, q, q, mask)
    assert torch.all(out[:, 2] == 0) and out[:, [0, 1, 3]].abs().sum() > 0


@pytest.mark.parametrize("value", [torch.finfo(torch.float32).min, -10000.0])
def test_hugging_face_additive_padding_mask_zeroes_a_fully_padded_sequence(value):
    mha = MultiHeadAttention(E, H).eval()
    x = torch.randn(2, 5, E)
    additive = torch.zeros(2, 5)
    additive[1] = value  # sequence 1 is all padding
    additive[0, 3:] = value
    out, weights = mha(x, key_padding_mask=additive, need_weights=True)
    fused, _ = mha(x, key_padding_mask=additive)
    bool_mask = additive == value
    expected, _ = mha(x, key_padding_mask=bool_mask)
    for got in (out, fused):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(got[1], mha.out_proj.bias.expand(5, E))  # zero attention, then the output bias
    assert torch.all(weights[1] == 0) and torch.all(weights[0, ..., 3:] == 0)


# ------------------------------------------------------------------------------------------ dtypes, widths, layouts
ENCODERS = [MultiHeadAttention(E, H), TransformerEncoderLayer(E, H), TransformerEncoder(E, H, 2)]


@pytest.mark.parametrize("module", ENCODERS)
def test_token_ids_instead_of_embeddings_are_explained(module):
    with pytest.raises(ValueError, match=r"must be float embeddings of shape \(B, L.?, 16\), got torch.int64 .*token ids"):
        module(torch.randint(0, 4, (2, 5)))


@pytest.mark.parametrize("module", ENCODERS)
def test_float64_input_into_float32_weights_is_explained_outside_autocast(module):
    x = torch.randn(2, 5, E, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"is torch.float64 but the module's parameters are torch.float32.*autocast"):
        module(x)
    module.double()
    assert module(x)[0].dtype == torch.float64  # after converting the module it runs
    module.float()


@pytest.mark.parametrize("module", ENCODERS)
def test_wrong_width_names_the_expected_shape(module):
    with pytest.raises(ValueError, match=r"must be of shape \(B, L.?, 16\), got \(2, 5, 12\) \(bioattn blocks are batch-first"):
        module(torch.randn(2, 5, 12))


@pytest.mark.parametrize("module", ENCODERS)
def test_sequence_first_input_is_detected_from_the_padding_mask(module):
    x = torch.randn(7, 2, E)  # (L, B, E)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"key_padding_mask is \(2, 7\).*looks sequence-first.*transpose\(0, 1\)"):
        module(x, key_padding_mask=padding)
    module(x.transpose(0, 1), key_padding_mask=padding)  # the suggested fix works


def test_cross_attention_key_width_and_dtype_are_checked():
    mha = MultiHeadAttention(E, H, kdim=10, vdim=6)
    q, k, v = torch.randn(2, 5, E), torch.randn(2, 7, 10), torch.randn(2, 7, 6)
    assert mha(q, k, v)[0].shape == (2, 5, E)
    with pytest.raises(ValueError, match=r"key must be of shape \(B, Lk, 10\)"):
        mha(q, v, v)
    with pytest.raises(ValueError, match=r"value is torch.float64"):
        mha(q, k, v.double())


def test_function_checks_dtypes_and_mask_shapes():
    q = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="one dtype and device"):
        scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(ValueError, match="floating point"):
        scaled_dot_product_attention(q.long(), q.long(), q.long())
    with pytest.raises(ValueError, match=r"mask \(4, 5\) must broadcast to the scores' shape \(\.\.\., Lq, Lk\) = \(2, 5, 5\)"):
        scaled_dot_product_attention(q, q, q, torch.ones(4, 5, dtype=torch.bool))


def test_axial_blocks_explain_dtype_and_layout():
    x = torch.randn(2, 3, 5, E)
    for module in (AxialTransformerLayer(E, H), RowAttention(E, H), ColumnAttention(E, H)):
        with pytest.raises(ValueError, match="x is torch.float64 but the module's parameters are torch.float32"):
            module(x.double())
        with pytest.raises(ValueError, match=r"x must be float embeddings of shape \(B, N, L, 16\)"):
            module(torch.randint(0, 4, (2, 3, 5, E)))
        with pytest.raises(ValueError, match=r"sequence_padding_mask must be a bool tensor of shape \(2, 3\).*ESM's \(N, L, B, D\)"):
            module(x, sequence_padding_mask=torch.zeros(3, 2, dtype=torch.bool))


def test_positional_encodings_refuse_token_ids():
    for module in (SinusoidalPositionalEncoding(E), LearnedPositionalEncoding(10, E)):
        with pytest.raises(ValueError, match="float embeddings"):
            module(torch.randint(0, 4, (2, 5, E)))


def test_autocast_accepts_inputs_of_another_float_dtype():
    mha = MultiHeadAttention(E, H)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = mha(torch.randn(2, 5, E, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16


# ------------------------------------------------------------------------------------------ public names and docs
def test_no_exported_causal_keep_mask_helper():
    """A bool keep-mask helper would mean the opposite of the modules' bool attn_mask (True = not allowed)."""
    assert not hasattr(attention, "causal_mask") and "causal_mask" not in attention.__all__
    import bioattn.attention.sdpa as sdpa_module

    assert not hasattr(sdpa_module, "causal_mask")


PUBLIC_CLASSES = [getattr(attention, name) for name in attention.__all__ if inspect.isclass(getattr(attention, name))]
PUBLIC_FUNCTIONS = [getattr(attention, name) for name in attention.__all__ if inspect.isfunction(getattr(attention, name))]


def _undocumented(function, doc: str) -> list[str]:
    names = [p for p in inspect.signature(function).parameters if p not in ("self", "args", "kwargs")]
    return [name for name in names if not re.search(rf"\b{name}\b", doc)]


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_help_shows_every_argument_and_tensor_shapes(cls):
    assert not _undocumented(cls.__init__, inspect.getdoc(cls) or ""), f"{cls.__name__} docstring misses arguments"
    forward_doc = inspect.getdoc(cls.forward) or ""
    assert not _undocumented(cls.forward, forward_doc), f"{cls.__name__}.forward docstring misses arguments"
    assert re.search(r"\((B|\.\.\.), ", forward_doc), f"{cls.__name__}.forward docstring states no tensor shape"


@pytest.mark.parametrize("function", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_help_on_public_functions_shows_every_argument(function):
    assert not _undocumented(function, inspect.getdoc(function) or ""), f"{function.__name__} docstring misses arguments"


@pytest.mark.parametrize("bad", [[[3, 4, 99]], [[3, -1, 4]]])
def test_promoter_model_refuses_token_ids_out_of_range_naming_the_range(bad):
    from bioattn.models.promoter import PromoterClassifier

    with pytest.raises(ValueError, match=r"ids \(B, L\) must hold token ids in \[0, 8\)"):
        PromoterClassifier(max_len=10)(torch.tensor(bad))


def test_promoter_model_refuses_float_input_as_token_ids():
    from bioattn.models.promoter import PromoterClassifier

    with pytest.raises(ValueError, match="integer token ids"):
        PromoterClassifier(max_len=10)(torch.randn(1, 5))


def test_msa_model_refuses_token_ids_out_of_range_naming_the_range():
    from bioattn.models.msa_contact import MSAContactModel

    model = MSAContactModel(max_len=10, embed_dim=16, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match=r"tokens \(B, N, L\) must hold token ids in \[0, "):
        model(torch.tensor([[[3, 4, 99]]]))
