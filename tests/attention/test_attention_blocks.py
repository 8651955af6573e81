"""Behaviour of the shared attention blocks."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bioattn.attention import (
    LearnedPositionalEncoding,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TransformerEncoder,
    TransformerEncoderLayer,
    scaled_dot_product_attention,
)


def _qkv(lq=13, lk=17, d=24, dv=24, lead=(2, 3), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*lead, *s, generator=g, dtype=dtype)  # noqa: E731
    return make(lq, d), make(lk, d), make(lk, dv)


def _reference(q, k, v, keep=None, scale=None):
    """Textbook attention in float64: softmax(q kᵀ / sqrt(d) masked) v."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    s = (q.double() @ k.double().transpose(-2, -1)) * scale
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.double()


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal", "causal+bool"])
def test_fused_and_explicit_paths_agree_with_reference(kind):
    q, k, v = _qkv(dv=20)
    g = torch.Generator().manual_seed(1)
    keep = torch.rand(2, 1, 13, 17, generator=g) > 0.3
    keep[..., 0] = True  # every row keeps a key here; empty rows are tested separately
    causal = kind.startswith("causal")
    mask = {"none": None, "bool": keep, "float": torch.zeros(keep.shape).masked_fill(~keep, float("-inf")),
            "causal": None, "causal+bool": keep}[kind]
    ref_keep = keep if kind in ("bool", "float", "causal+bool") else None
    if causal:
        tri = torch.ones(13, 17, dtype=torch.bool).tril()
        ref_keep = tri if ref_keep is None else ref_keep & tri
    fused, none = scaled_dot_product_attention(q, k, v, mask, causal=causal)
    explicit, weights = scaled_dot_product_attention(q, k, v, mask, causal=causal, need_weights=True)
    assert none is None and weights.shape == (2, 3, 13, 17)
    ref = _reference(q, k, v, ref_keep)
    torch.testing.assert_close(fused.double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 13), atol=1e-5, rtol=0)
    if ref_keep is not None:
        assert torch.all(weights.masked_select(~ref_keep.expand_as(weights)) == 0)


def test_explicit_scale_is_used():
    q, k, v = _qkv()
    out, _ = scaled_dot_product_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(out.double(), _reference(q, k, v, scale=0.5), atol=1e-5, rtol=1e-5)


def test_float64_gradients_match_between_paths():
    q, k, v = (t.requires_grad_() for t in _qkv(dtype=torch.float64))
    keep = torch.rand(2, 1, 13, 17, generator=torch.Generator().manual_seed(3)) > 0.4
    keep[..., 5] = True
    grads = []
    for need in (False, True):
        out, _ = scaled_dot_product_attention(q, k, v, keep, need_weights=need)
        grads.append(torch.autograd.grad(out.pow(2).sum(), (q, k, v)))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)
    assert torch.autograd.gradcheck(
        lambda q_, k_, v_: scaled_dot_product_attention(q_, k_, v_, keep[:1, :, :4], need_weights=True)[0],
        (q[:1, :1, :4].detach().requires_grad_(), k[:1, :1].detach().requires_grad_(), v[:1, :1].detach().requires_grad_()),
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_rows_give_zeros_and_finite_gradients(need_weights):
    q, k, v = (t.requires_grad_() for t in _qkv())
    keep = torch.ones(2, 3, 13, 17, dtype=torch.bool)
    keep[0, 1, 4] = False  # query 4 of head 1 sees no key
    out, weights = scaled_dot_product_attention(q, k, v, keep, need_weights=need_weights)
    assert torch.isfinite(out).all()
    assert torch.all(out[0, 1, 4] == 0)
    if need_weights:
        assert torch.all(weights[0, 1, 4] == 0)
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_float_mask_all_minus_inf_row_gives_zeros():
    q, k, v = _qkv()
    mask = torch.zeros(13, 17)
    mask[2] = float("-inf")
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.all(out[..., 2, :] == 0)


def test_causal_outputs_ignore_future_keys():
    q, k, v = _qkv(lq=9, lk=9)
    out, _ = scaled_dot_product_attention(q, k, v, causal=True)
    k2, v2 = k.clone(), v.clone()
    k2[..., 5:, :] += 10
    v2[..., 5:, :] -= 10
    out2, _ = scaled_dot_product_attention(q, k2, v2, causal=True)
    torch.testing.assert_close(out[..., :5, :], out2[..., :5, :])
    assert not torch.allclose(out[..., 5:, :], out2[..., 5:, :])


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_scaled_score_variance_stays_near_one_while_unscaled_grows_with_d():
    g = torch.Generator().manual_seed(0)
    for d in (16, 64, 256, 1024):
        q = torch.randn(64, 1, d, generator=g, dtype=torch.float64)
        k = torch.randn(64, 512, d, generator=g, dtype=torch.float64)
        v = torch.zeros(64, 512, 1, dtype=torch.float64)
        _, w = scaled_dot_product_attention(q, k, v, need_weights=True)
        # log-softmax is the scores shifted per row, so its per-row variance is the scores' variance.
        scaled_var = w.log().var(dim=-1).mean().item()
        unscaled_var = (q @ k.transpose(-2, -1)).var(dim=-1).mean().item()
        assert 0.8 < scaled_var < 1.2, (d, scaled_var)
        assert 0.8 * d < unscaled_var < 1.2 * d, (d, unscaled_var)


def test_grouped_query_paths_agree_and_match_repeated_heads():
    q = torch.randn(2, 8, 11, 16)
    k, v = torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16)
    fused, _ = scaled_dot_product_attention(q, k, v)
    explicit, _ = scaled_dot_product_attention(q, k, v, need_weights=True)
    repeated, _ = scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused, repeated, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        scaled_dot_product_attention(q, torch.randn(2, 3, 11, 16), torch.randn(2, 3, 11, 16))


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="last dim"):
        scaled_dot_product_attention(torch.randn(2, 4, 8), torch.randn(2, 4, 9), torch.randn(2, 4, 9))
    with pytest.raises(ValueError, match="dropout_p"):
        scaled_dot_product_attention(*_qkv(), dropout_p=1.5)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="key_padding_mask"):
        MultiHeadAttention(16, 4)(torch.randn(2, 5, 16), key_padding_mask=torch.zeros(2, 6, dtype=torch.bool))


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_matches_torch_multihead_attention(bias):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(48, 6, bias=bias, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    x = torch.randn(3, 19, 48)
    padding = torch.zeros(3, 19, dtype=torch.bool)
    padding[1, 12:] = True
    padding[2, 3:] = True
    for kpm in (None, padding):
        expected, _ = ref(x, x, x, key_padding_mask=kpm, need_weights=False)
        got, _ = ours(x, key_padding_mask=kpm)
        keep = torch.ones(3, 19, dtype=torch.bool) if kpm is None else ~kpm
        torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)
    expected_w = ref(x, x, x, key_padding_mask=padding, need_weights=True, average_attn_weights=False)[1]
    torch.testing.assert_close(ours(x, key_padding_mask=padding, need_weights=True)[1], expected_w, atol=1e-5, rtol=1e-5)


def test_from_torch_cross_attention_with_other_key_widths():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(32, 4, kdim=20, vdim=12, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    q, k, v = torch.randn(2, 7, 32), torch.randn(2, 9, 20), torch.randn(2, 9, 12)
    causal_block = torch.ones(7, 9, dtype=torch.bool).triu(1)
    expected, _ = ref(q, k, v, attn_mask=causal_block, need_weights=False)
    got, _ = ours(q, k, v, attn_mask=causal_block)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_padding_really_masks_in_attention_and_encoder():
    torch.manual_seed(0)
    x = torch.randn(2, 12, 32)
    padding = torch.zeros(2, 12, dtype=torch.bool)
    padding[0, 7:] = True
    padding[1, 10:] = True
    x2 = x.clone()
    x2[padding] = torch.randn(int(padding.sum()), 32) * 100
    for module in (MultiHeadAttention(32, 4), TransformerEncoder(32, 4, 2, dropout=0.0)):
        module.eval()
        a, _ = module(x, key_padding_mask=padding)
        b, _ = module(x2, key_padding_mask=padding)
        torch.testing.assert_close(a[~padding], b[~padding], atol=1e-5, rtol=1e-5)
        c, _ = module(x2)  # without the mask the padded values do leak in
        assert not torch.allclose(a[~padding], c[~padding], atol=1e-3)


def test_eval_mode_is_deterministic_and_training_mode_applies_dropout():
    torch.manual_seed(0)
    enc = TransformerEncoder(32, 4, 2, dropout=0.3)
    x = torch.randn(2, 10, 32)
    enc.eval()
    torch.testing.assert_close(enc(x)[0], enc(x)[0], atol=0, rtol=0)
    enc.train()
    assert not torch.allclose(enc(x)[0], enc(x)[0])


@pytest.mark.parametrize("embed_dim,heads", [(64, 1), (64, 4), (64, 16), (96, 12)])
def test_parameter_count_is_four_d_squared_for_every_head_count(embed_dim, heads):
    mha = MultiHeadAttention(embed_dim, heads, bias=False)
    assert sum(p.numel() for p in mha.parameters()) == 4 * embed_dim**2
    assert mha.head_dim * heads == embed_dim


def test_grouped_and_multi_query_shapes_and_parameter_savings():
    e, h = 64, 8
    x = torch.randn(2, 10, e)
    full = sum(p.numel() for p in MultiHeadAttention(e, h, bias=False).parameters())
    for kv in (4, 2, 1):
        mha = MultiHeadAttention(e, h, kv_heads=kv, bias=False)
        assert mha.k_proj.out_features == kv * e // h
        assert sum(p.numel() for p in mha.parameters()) == full - 2 * e * (e - kv * e // h)
        out, w = mha(x, need_weights=True)
        assert out.shape == (2, 10, e) and w.shape == (2, h, 10, 10)


def test_grouped_query_equals_standard_attention_with_shared_kv_weights():
    torch.manual_seed(0)
    e, h, kv = 32, 8, 2
    gqa = MultiHeadAttention(e, h, kv_heads=kv).eval()
    std = MultiHeadAttention(e, h).eval()
    hd = e // h
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(std, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            src = getattr(gqa, name)
            getattr(std, name).weight.copy_(src.weight.view(kv, hd, e).repeat_interleave(h // kv, 0).reshape(e, e))
            getattr(std, name).bias.copy_(src.bias.view(kv, hd).repeat_interleave(h // kv, 0).reshape(e))
    x = torch.randn(2, 9, e)
    torch.testing.assert_close(gqa(x)[0], std(x)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_layer_matches_torch_transformer_encoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first)
    ours = TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, norm_first=norm_first)
    ours.self_attn = MultiHeadAttention.from_torch(ref.self_attn)
    ours.feed_forward.linear1.load_state_dict(ref.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(ref.linear2.state_dict())
    ours.norm1.load_state_dict(ref.norm1.state_dict())
    ours.norm2.load_state_dict(ref.norm2.state_dict())
    ref.eval(), ours.eval()
    x = torch.randn(2, 11, 32)
    padding = torch.zeros(2, 11, dtype=torch.bool)
    padding[1, 8:] = True
    expected = ref(x, src_key_padding_mask=padding)
    got, _ = ours(x, key_padding_mask=padding)
    torch.testing.assert_close(got[~padding], expected[~padding], atol=1e-5, rtol=1e-5)


def test_attention_dropout_is_separate_from_residual_dropout():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32)
    default = TransformerEncoderLayer(32, 4, dropout=0.5).train()
    assert default.self_attn.dropout == 0.5  # as torch: one rate for attention weights and residual branches
    layer = TransformerEncoderLayer(32, 4, dropout=0.5, attention_dropout=0.0).train()
    # the attention weights are not dropped in training mode: same attention output as in eval mode ...
    torch.testing.assert_close(layer.self_attn(x)[0], layer.eval().self_attn(x)[0])
    # ... while the residual branches still are
    layer.train()
    assert not torch.allclose(layer(x)[0], layer.eval()(x)[0])


def test_feed_forward_dropout_is_separate_from_residual_dropout():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 32)
    assert TransformerEncoderLayer(32, 4, dropout=0.3).feed_forward.dropout.p == 0.3  # torch's single rate
    layer = TransformerEncoderLayer(32, 4, dropout=0.5, ffn_dropout=0.0).train()
    # the feed-forward's hidden units are not dropped in training mode ...
    torch.testing.assert_close(layer.feed_forward(x), layer.eval().feed_forward(x))
    # ... while the residual branches still are
    layer.train()
    assert not torch.allclose(layer(x)[0], layer.eval()(x)[0])


def test_encoder_returns_per_layer_per_head_weights_on_request():
    enc = TransformerEncoder(32, 4, 3, dropout=0.0).eval()
    x = torch.randn(2, 10, 32)
    padding = torch.zeros(2, 10, dtype=torch.bool)
    padding[0, 6:] = True
    out, weights = enc(x, key_padding_mask=padding, need_weights=True)
    fused, none = enc(x, key_padding_mask=padding)
    assert none is None and len(weights) == 3
    torch.testing.assert_close(out, fused, atol=1e-5, rtol=1e-5)
    for w in weights:
        assert w.shape == (2, 4, 10, 10)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 10))
        assert torch.all(w[0, :, :, 6:] == 0)


def test_sinusoidal_encoding_values_and_relative_structure():
    pe = SinusoidalPositionalEncoding(16, max_len=64)
    x = torch.zeros(1, 50, 16)
    enc = pe(x)[0]
    torch.testing.assert_close(enc[:, 0], torch.sin(torch.arange(50.0)))
    torch.testing.assert_close(enc[:, 1], torch.cos(torch.arange(50.0)))
    # the dot product between two positions depends only on their offset
    torch.testing.assert_close(enc[3] @ enc[10], enc[20] @ enc[27], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(pe.encode(torch.tensor([2.0, 7.0])), enc[[2, 7]])
    with pytest.raises(ValueError, match="max_len"):
        pe(torch.zeros(1, 65, 16))
    with pytest.raises(ValueError, match="even"):
        SinusoidalPositionalEncoding(15)


def test_learned_encoding_is_trainable_per_position():
    pe = LearnedPositionalEncoding(20, 8)
    out = pe(torch.zeros(2, 5, 8))
    torch.testing.assert_close(out[0], pe.embedding.weight[:5])
    out.sum().backward()
    assert pe.embedding.weight.grad[:5].abs().sum() > 0 and torch.all(pe.embedding.weight.grad[5:] == 0)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("masking", ["padding", "attn_mask", "causal"])
def test_first_outputs_equal_the_first_positions_of_the_full_pass(norm_first, masking):
    torch.manual_seed(0)
    enc = TransformerEncoder(32, 4, 2, dropout=0.0, norm_first=norm_first).eval()
    x = torch.randn(3, 12, 32, dtype=torch.float64)
    enc = enc.double()
    padding = torch.zeros(3, 12, dtype=torch.bool)
    padding[1, 7:] = True
    kwargs = {"padding": {"key_padding_mask": padding},
              "attn_mask": {"attn_mask": torch.rand(12, 12, generator=torch.Generator().manual_seed(1)) < 0.3},
              "causal": {"causal": True}}[masking]
    full, full_weights = enc(x, need_weights=True, **kwargs)
    for n in (1, 5):
        first, weights = enc(x, need_weights=True, first_outputs=n, **kwargs)
        assert first.shape == (3, n, 32)
        torch.testing.assert_close(first, full[:, :n])
        torch.testing.assert_close(weights[0], full_weights[0])  # earlier layers still see every position
        torch.testing.assert_close(weights[-1], full_weights[-1][:, :, :n])


def test_first_outputs_give_the_same_gradients_as_reading_the_full_output():
    torch.manual_seed(0)
    enc = TransformerEncoder(16, 2, 2, dropout=0.0).double()
    x = torch.randn(2, 9, 16, dtype=torch.float64, requires_grad=True)
    enc(x)[0][:, 0].square().sum().backward()
    expected = [x.grad.clone()] + [p.grad.clone() for p in enc.parameters()]
    x.grad = None
    enc.zero_grad()
    enc(x, first_outputs=1)[0][:, 0].square().sum().backward()
    for got, want in zip([x.grad] + [p.grad for p in enc.parameters()], expected):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("bad", [0, 13, -1])
def test_first_outputs_outside_the_sequence_is_a_clear_error(bad):
    enc = TransformerEncoder(16, 2, 1, dropout=0.0)
    with pytest.raises(ValueError, match="first_outputs must be between 1 and the sequence length 12"):
        enc(torch.randn(1, 12, 16), first_outputs=bad)
