"""The attention blocks on CUDA: torch's fused kernels and bf16. Skipped cleanly without a CUDA device."""
from __future__ import annotations

import pytest
import torch

from bioattn.attention import AxialTransformerLayer, MultiHeadAttention, TransformerEncoder, set_backend, use_backend

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

#: bf16 keeps 8 significant bits; outputs and gradients stay within 3% of the largest fp32 magnitude.
BF16_TOLERANCE = 0.03


@pytest.fixture(autouse=True)
def _seed_and_restore_backend():
    torch.manual_seed(0)
    yield
    set_backend("auto")


def padding(batch: int, length: int, device: str = "cuda") -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.bool, device=device)
    mask[-1, length // 2 :] = True
    return mask


def close_relative(got: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor) -> bool:
    return bool(torch.isfinite(got).all()) and bool((got.float() - expected.float()).abs().max() <= BF16_TOLERANCE * scale)


@pytest.mark.parametrize("backend,masked", [("flash", False), ("efficient", True), ("efficient", False)])
def test_fused_cuda_kernels_agree_with_math(backend, masked):
    mha = MultiHeadAttention(64, 4).cuda().to(torch.bfloat16).eval()
    x = torch.randn(2, 33, 64, device="cuda", dtype=torch.bfloat16)
    kwargs = {"key_padding_mask": padding(2, 33)} if masked else {}
    with use_backend("math"):
        reference, _ = mha(x, **kwargs)
    with use_backend(backend):
        out, _ = mha(x, **kwargs)
    assert close_relative(out, reference, reference.abs().max())


def test_all_false_padding_keeps_the_flash_kernel_eligible():
    """Flash attention takes no mask on CUDA: an all-False key_padding_mask must not reach it."""
    mha = MultiHeadAttention(64, 4).cuda().to(torch.bfloat16).eval()
    x = torch.randn(2, 17, 64, device="cuda", dtype=torch.bfloat16)
    with use_backend("flash"):
        out, _ = mha(x, key_padding_mask=torch.zeros(2, 17, dtype=torch.bool, device="cuda"))
        with pytest.raises(RuntimeError, match="attention backend 'flash' cannot run these inputs"):
            mha(x, key_padding_mask=padding(2, 17))
    torch.testing.assert_close(out, mha(x)[0])


@pytest.mark.parametrize("name", ["encoder", "axial tied", "axial tied chunked"])
def test_bf16_autocast_on_cuda_is_finite_and_close_to_fp32(name):
    module, x, kwargs = {
        "encoder": (TransformerEncoder(64, 4, 2, dropout=0.0), torch.randn(2, 33, 64), {"key_padding_mask": padding(2, 33)}),
        "axial tied": (AxialTransformerLayer(64, 4, dropout=0.0), torch.randn(2, 4, 17, 64), {"position_padding_mask": padding(2, 17)}),
        "axial tied chunked": (
            AxialTransformerLayer(64, 4, dropout=0.0, chunk_size=2), torch.randn(2, 4, 17, 64), {"position_padding_mask": padding(2, 17)}
        ),
    }[name]
    module, x = module.cuda(), x.cuda()

    def run() -> tuple[torch.Tensor, list[torch.Tensor]]:
        inputs = x.detach().requires_grad_()
        out = module(inputs, **kwargs)[0]
        return out, list(torch.autograd.grad(out.float().square().sum(), [inputs, *module.parameters()]))

    out, grads = run()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out_bf16, grads_bf16 = run()
    assert close_relative(out_bf16, out, out.abs().max())
    grad_scale = max(g.abs().max() for g in grads)
    assert all(close_relative(got, expected, grad_scale) for got, expected in zip(grads_bf16, grads))
