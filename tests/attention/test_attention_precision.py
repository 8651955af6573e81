"""bf16 autocast and torch.compile on the attention blocks (CPU; the CUDA versions are in tests/gpu/test_attention_on_cuda.py)."""
from __future__ import annotations

import pytest
import torch

from bioattn.attention import AxialTransformerLayer, MultiHeadAttention, TransformerEncoder

#: bf16 keeps 8 significant bits (relative step 2**-8 ≈ 0.4%); a few layers of it stay well within 3% of the
#: largest fp32 magnitude (measured errors: docs/experiments.md, "Numbers and review items that lived in the tests").
BF16_TOLERANCE = 0.03


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def padding(batch: int, length: int) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.bool)
    mask[-1, length // 2 :] = True
    return mask


def blocks() -> dict[str, tuple[torch.nn.Module, torch.Tensor, dict]]:
    """name → (module, input, keyword arguments), tiny, with padding."""
    return {
        "mha": (MultiHeadAttention(32, 4), torch.randn(2, 9, 32), {"key_padding_mask": padding(2, 9)}),
        "encoder": (TransformerEncoder(32, 4, 2, dropout=0.0), torch.randn(2, 9, 32), {"key_padding_mask": padding(2, 9)}),
        "axial tied": (AxialTransformerLayer(32, 4, dropout=0.0), torch.randn(2, 3, 9, 32), {"position_padding_mask": padding(2, 9)}),
        "axial untied": (
            AxialTransformerLayer(32, 4, dropout=0.0, tied=False), torch.randn(2, 3, 9, 32), {"sequence_padding_mask": padding(2, 3)}
        ),
        "axial tied chunked": (
            AxialTransformerLayer(32, 4, dropout=0.0, chunk_size=2), torch.randn(2, 3, 9, 32), {"position_padding_mask": padding(2, 9)}
        ),
    }


def forward_backward(module: torch.nn.Module, x: torch.Tensor, kwargs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = x.detach().requires_grad_()
    out = module(x, **kwargs)[0]
    return out, list(torch.autograd.grad(out.float().square().sum(), [x, *module.parameters()]))


def assert_relatively_close(got: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor) -> None:
    assert torch.isfinite(got).all()
    error = (got.float() - expected).abs().max()
    assert error <= BF16_TOLERANCE * scale, f"max error {error:.3g} > {BF16_TOLERANCE} × {scale:.3g}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(blocks()))
def test_bf16_autocast_forward_and_backward_are_finite_and_close_to_fp32(name):
    module, x, kwargs = blocks()[name]
    out, grads = forward_backward(module, x, kwargs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_bf16, grads_bf16 = forward_backward(module, x, kwargs)
    if name == "mha":
        assert out_bf16.dtype == torch.bfloat16  # really computed in bf16
    assert_relatively_close(out_bf16, out, out.abs().max())
    grad_scale = max(g.abs().max() for g in grads)
    for got, expected in zip(grads_bf16, grads):
        assert_relatively_close(got, expected, grad_scale)


COMPILED = {
    "mha": lambda: (MultiHeadAttention(16, 2), torch.randn(2, 5, 16), {"key_padding_mask": padding(2, 5)}),
    "encoder": lambda: (TransformerEncoder(16, 2, 1, dropout=0.0), torch.randn(2, 5, 16), {"key_padding_mask": padding(2, 5)}),
    "axial tied chunked": lambda: (
        AxialTransformerLayer(16, 2, dropout=0.0, chunk_size=2),
        torch.randn(2, 3, 5, 16),
        {"position_padding_mask": padding(2, 5), "need_weights": True},
    ),
}


@pytest.mark.parametrize("name", list(COMPILED))
@pytest.mark.slow
def test_compiles_without_graph_breaks_forward_and_backward(name):
    """fullgraph=True fails on any graph break. The aot_eager backend traces forward and backward like inductor
    but skips C++ code generation (about 3 s per block here instead of 30-50 s)."""
    module, x, kwargs = COMPILED[name]()
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    out, grads = forward_backward(compiled, x, kwargs)
    expected, expected_grads = forward_backward(module, x, kwargs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_inductor_compiles_multi_head_attention():
    module, x, kwargs = COMPILED["mha"]()
    with torch.no_grad():
        out, _ = torch.compile(module, fullgraph=True)(x, **kwargs)
        torch.testing.assert_close(out, module(x, **kwargs)[0], atol=1e-5, rtol=1e-5)
