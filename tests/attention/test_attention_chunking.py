"""apply_in_chunks (bioattn.attention.chunking) and chunked axial attention: exact, forward and backward."""
from __future__ import annotations

import math

import pytest
import torch

import bioattn.attention.axial as axial_module
from bioattn.attention import AxialTransformerLayer, RowAttention, apply_in_chunks


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class Counted:
    """Wraps a function and counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


# ------------------------------------------------------------------------------------------ the helper
def row_fn(x: torch.Tensor, scale: torch.Tensor, shift: float) -> torch.Tensor:
    """Row-wise: ``x (B, n, D)``, ``scale (B, n|1, 1)`` → ``(B, n, D)``."""
    return torch.tanh(x * scale + shift).cumsum(-1)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 100, None])
def test_cat_equals_one_call_with_sliced_broadcast_and_plain_inputs(chunk_size):
    x, scale = torch.randn(2, 7, 4), torch.randn(2, 1, 1)
    fn = Counted(row_fn)
    out = apply_in_chunks(fn, x, scale, 0.5, chunk_size=chunk_size, dim=1)
    torch.testing.assert_close(out, row_fn(x, scale, 0.5), atol=0, rtol=0)
    assert fn.calls == (1 if chunk_size is None else math.ceil(7 / chunk_size))


def test_several_batch_dims_are_flattened_and_restored():
    maps, weight = torch.randn(3, 4, 5, 5), torch.randn(3, 1, 5)  # (B, H, L, L), (B, 1, L): broadcast over H
    seen = []

    def fn(m, w):
        seen.append(tuple(m.shape))
        return (m.softmax(-1) * w.unsqueeze(-2)).sum(-1)  # (c, L)

    out = apply_in_chunks(fn, maps, weight, chunk_size=5, dim=0, num_dims=2)
    torch.testing.assert_close(out, fn(maps.flatten(0, 1), weight.expand(3, 4, 5).flatten(0, 1)).unflatten(0, (3, 4)))
    assert out.shape == (3, 4, 5) and seen[:3] == [(5, 5, 5), (5, 5, 5), (2, 5, 5)]


def test_sum_reduces_over_chunks():
    x = torch.randn(2, 9, 3, dtype=torch.float64)
    out = apply_in_chunks(lambda h: h.transpose(-1, -2) @ h, x, chunk_size=4, dim=1, reduce="sum")  # (B, 3, 3)
    torch.testing.assert_close(out, (x.transpose(-1, -2) @ x))


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_tuple_outputs_with_none_and_gradients_with_checkpointing():
    x = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    scale = torch.randn(2, 6, 1, dtype=torch.float64, requires_grad=True)
    fn = Counted(lambda h, s: (row_fn(h, s, 0.0), None, h.square() * s))
    first, nothing, second = apply_in_chunks(fn, x, scale, chunk_size=4, dim=1, checkpoint=True)
    assert nothing is None and fn.calls == 2
    loss = first.sin().sum() + second.sum()
    grads = torch.autograd.grad(loss, (x, scale))
    assert fn.calls == 4  # each chunk ran again in the backward pass: its activations were not kept
    expected = torch.autograd.grad(row_fn(x, scale, 0.0).sin().sum() + (x.square() * scale).sum(), (x, scale))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)


def test_bad_uses_are_explained():
    x = torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="chunk_size must be a positive int or None"):
        apply_in_chunks(torch.sin, x, chunk_size=0)
    with pytest.raises(ValueError, match=r"inputs disagree in dim 1: sizes \[3, 6\]"):
        apply_in_chunks(torch.add, x, torch.randn(2, 3, 4), chunk_size=2, dim=1)
    with pytest.raises(ValueError, match="must return 2 rows in dim 1"):
        apply_in_chunks(lambda h: h.sum(1), x, chunk_size=2, dim=1)


# ------------------------------------------------------------------------------------------ chunked axial attention
B, N, L, D, H = 4, 5, 6, 16, 4


def padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Four alignments: whole; rows and positions padded; every position padded; every sequence padded."""
    x = torch.randn(B, N, L, D, dtype=torch.float64)
    rows = torch.zeros(B, N, dtype=torch.bool)
    positions = torch.zeros(B, L, dtype=torch.bool)
    rows[1, 3:] = True
    positions[1, 4:] = True
    positions[2] = True  # row attention: every query sees no key
    rows[3] = True  # column attention: every query sees no key
    return x, rows, positions


def set_chunk(module: torch.nn.Module, chunk_size: int | None) -> None:
    for sub in module.modules():
        if hasattr(sub, "chunk_size"):
            sub.chunk_size = chunk_size


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("tied", [False, True])
def test_chunked_axial_layer_equals_unchunked_with_padding_and_fully_masked_rows(tied, need_weights):
    module = AxialTransformerLayer(D, H, dropout=0.0, tied=tied).double().train()
    x, rows, positions = padded_batch()
    x.requires_grad_()

    def run(chunk_size):
        set_chunk(module, chunk_size)
        out, weights = module(x, sequence_padding_mask=rows, position_padding_mask=positions, need_weights=need_weights)
        grads = torch.autograd.grad((out.square() * torch.linspace(0, 1, D, dtype=out.dtype)).sum(), [x, *module.parameters()])
        return out, weights, grads

    out, weights, grads = run(None)
    assert torch.isfinite(out).all() and out[2].abs().max() == 0 and out[3].abs().max() == 0
    for chunk_size in (1, 2, 4):
        out_c, weights_c, grads_c = run(chunk_size)
        torch.testing.assert_close(out_c, out, atol=1e-10, rtol=1e-10)
        assert (weights_c is None) == (weights is None) == (not need_weights)
        if need_weights:
            torch.testing.assert_close(weights_c, weights, atol=1e-10, rtol=1e-10)
            assert weights_c[2].abs().max() == 0  # no key to attend to: zero weights, not a uniform average
        for got, expected in zip(grads_c, grads):
            assert torch.isfinite(got).all()
            torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("tied", [False, True])
def test_row_attention_honours_chunk_size_when_weights_are_requested(tied, monkeypatch):
    attention_calls = Counted(axial_module.scaled_dot_product_attention)
    monkeypatch.setattr(axial_module, "scaled_dot_product_attention", attention_calls)
    softmax_calls = Counted(axial_module.attention_weights)
    monkeypatch.setattr(axial_module, "attention_weights", softmax_calls)
    x = torch.randn(1, N, L, D)
    module = RowAttention(D, H, tied=tied, chunk_size=2).eval()
    out, weights = module(x, need_weights=True)
    if tied:  # scores summed over row chunks, then one masked softmax
        assert (attention_calls.calls, softmax_calls.calls) == (0, 1)
    else:  # one attention call per chunk of 2 rows
        assert (attention_calls.calls, softmax_calls.calls) == (math.ceil(N / 2), 0)
    set_chunk(module, None)
    expected_out, expected_weights = module(x, need_weights=True)
    torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
