"""The backend switch and what reaches torch's fused kernel (bioattn.attention.backends, sdpa)."""
from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend

import bioattn.attention.sdpa as sdpa_module
from bioattn.attention import (
    BACKENDS,
    AxialTransformerLayer,
    MultiHeadAttention,
    TransformerEncoder,
    get_backend,
    scaled_dot_product_attention,
    set_backend,
    use_backend,
)


@pytest.fixture(autouse=True)
def _seed_and_restore_backend():
    torch.manual_seed(0)
    yield
    set_backend("auto")


@pytest.fixture
def fused_calls(monkeypatch) -> list[dict]:
    """Keyword arguments of every call that reaches ``torch.nn.functional.scaled_dot_product_attention``."""
    calls: list[dict] = []
    fused = sdpa_module.F.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        calls.append(kwargs)
        return fused(q, k, v, **kwargs)

    monkeypatch.setattr(sdpa_module.F, "scaled_dot_product_attention", spy)
    return calls


@pytest.fixture
def kernels_chosen(monkeypatch) -> list[SDPBackend]:
    """The backends passed to ``torch.nn.attention.sdpa_kernel`` by bioattn."""
    chosen: list[SDPBackend] = []
    real = sdpa_module.sdpa_kernel

    def spy(backend):
        chosen.append(backend)
        return real(backend)

    monkeypatch.setattr(sdpa_module, "sdpa_kernel", spy)
    return chosen


def _padding(batch: int, length: int, pad_last: int = 0) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.bool)
    if pad_last:
        mask[-1, -pad_last:] = True
    return mask


# ------------------------------------------------------------------------------------------ masks reaching the kernel
def test_all_false_key_padding_mask_reaches_the_kernel_as_none(fused_calls):
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    unmasked, _ = mha(x)
    no_padding, _ = mha(x, key_padding_mask=_padding(2, 7))
    padded, _ = mha(x, key_padding_mask=_padding(2, 7, pad_last=3))
    assert [call["attn_mask"] is None for call in fused_calls] == [True, True, False]
    assert fused_calls[2]["attn_mask"].shape == (2, 1, 1, 7)
    torch.testing.assert_close(no_padding, unmasked, atol=0, rtol=0)
    assert not torch.allclose(padded[1], unmasked[1])  # the padded mask did reach the kernel and mask


def test_all_false_padding_with_causal_uses_the_kernels_causal_flag(fused_calls):
    encoder = TransformerEncoder(16, 4, 1, dropout=0.0).eval()
    x = torch.randn(2, 6, 16)
    encoder(x, key_padding_mask=_padding(2, 6), causal=True)
    assert fused_calls == [dict(fused_calls[0], attn_mask=None, is_causal=True)]


def test_float_mask_of_zeros_and_bool_mask_of_trues_are_dropped(fused_calls):
    q, k, v = torch.randn(3, 2, 5, 8).unbind(0)
    scaled_dot_product_attention(q, k, v, torch.zeros(5, 5))
    scaled_dot_product_attention(q, k, v, torch.ones(5, 5, dtype=torch.bool))
    bias = torch.zeros(5, 5)
    bias[0, 1] = 0.5  # a real bias is kept
    scaled_dot_product_attention(q, k, v, bias)
    assert [call["attn_mask"] is None for call in fused_calls] == [True, True, False]


@pytest.mark.parametrize("tied", [False, True])
def test_axial_masks_reach_the_kernel_only_when_something_is_padded(fused_calls, tied):
    layer = AxialTransformerLayer(16, 4, dropout=0.0, tied=tied).eval()
    x = torch.randn(2, 3, 5, 16)
    no_padding = {"sequence_padding_mask": _padding(2, 3), "position_padding_mask": _padding(2, 5)}
    layer(x, **no_padding)
    assert fused_calls and all(call["attn_mask"] is None for call in fused_calls)
    fused_calls.clear()
    layer(x, sequence_padding_mask=_padding(2, 3, pad_last=1), position_padding_mask=_padding(2, 5, pad_last=2))
    assert all(call["attn_mask"] is not None for call in fused_calls)  # rows see padded positions, columns padded rows


# ------------------------------------------------------------------------------------------ the switch
def test_backend_names_are_validated_and_the_context_manager_restores():
    assert get_backend() == "auto" and set(BACKENDS) == {"auto", "math", "flash", "efficient", "cudnn", "explicit"}
    with pytest.raises(ValueError, match="attention backend must be one of auto, math"):
        set_backend("fast")
    with pytest.raises(RuntimeError, match="boom"):
        with use_backend("math"):
            assert get_backend() == "math"
            raise RuntimeError("boom")
    assert get_backend() == "auto"


@pytest.mark.parametrize("name,expected", [("math", SDPBackend.MATH), ("flash", SDPBackend.FLASH_ATTENTION)])
def test_named_backend_is_passed_to_sdpa_kernel_and_agrees_with_auto(kernels_chosen, name, expected):
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 9, 32)
    padding = _padding(2, 9, pad_last=4)
    auto, _ = mha(x, key_padding_mask=padding)
    assert kernels_chosen == []  # "auto" leaves the choice to torch
    with use_backend(name):
        chosen, _ = mha(x, key_padding_mask=padding if name == "math" else None)
    assert kernels_chosen == [expected]
    reference = auto if name == "math" else mha(x)[0]
    torch.testing.assert_close(chosen, reference, atol=1e-5, rtol=1e-5)


def test_explicit_backend_never_calls_the_fused_kernel(fused_calls, monkeypatch):
    explicit_calls = []
    explicit = sdpa_module._explicit_attention
    monkeypatch.setattr(sdpa_module, "_explicit_attention", lambda *a: explicit_calls.append(1) or explicit(*a))
    encoder = TransformerEncoder(32, 4, 2, dropout=0.0).eval()
    axial = AxialTransformerLayer(32, 4, dropout=0.0).eval()
    x, msa = torch.randn(2, 9, 32), torch.randn(1, 3, 6, 32)
    padding = _padding(2, 9, pad_last=3)
    fused_out, weights = encoder(x, key_padding_mask=padding)
    fused_msa, _ = axial(msa)
    assert len(fused_calls) == 4 and weights is None and explicit_calls == []
    set_backend("explicit")
    out, weights = encoder(x, key_padding_mask=padding)
    out_msa, _ = axial(msa)
    assert len(fused_calls) == 4 and len(explicit_calls) == 4  # 2 encoder layers, 1 row + 1 column attention
    assert weights is None  # the explicit backend does not turn weights on
    torch.testing.assert_close(out, fused_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_msa, fused_msa, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the memory-efficient kernel exists on CUDA")
def test_a_backend_that_cannot_run_says_so():
    mha = MultiHeadAttention(16, 4).eval()
    with use_backend("efficient"), pytest.raises(RuntimeError, match="attention backend 'efficient' cannot run these inputs"):
        mha(torch.randn(2, 5, 16))
