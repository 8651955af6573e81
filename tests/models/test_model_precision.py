"""bf16 autocast and torch.compile on tiny versions of the three models (forward and backward), on the CPU and,
under the ``gpu`` marker, on CUDA (skipped cleanly without a CUDA device)."""
from __future__ import annotations

from typing import Callable

import pytest
import torch

from bioattn.data.dna import collate_tokens, encode
from bioattn.data.msa import MSATokenizer
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.msa_contact import MSAContactModel
from bioattn.models.promoter import PromoterClassifier

#: bf16 keeps 8 significant bits (relative step 2**-8 ≈ 0.4%). Through a whole tiny model (embedding, CNN stem or
#: convolutions, two attention layers, head) outputs and gradients stay within 3% of the largest fp32 magnitude
#: (measured errors: docs/experiments.md, "Numbers and review items that lived in the tests").
BF16_TOLERANCE = 0.03


def promoter() -> tuple[torch.nn.Module, tuple]:
    model = PromoterClassifier(max_len=48, embed_dim=32, num_heads=4, num_layers=2, conv_kernel=9, dropout=0.0)
    generator = torch.Generator().manual_seed(0)
    sequences = ["".join("ACGT"[i] for i in torch.randint(0, 4, (n,), generator=generator)) for n in (40, 25, 33)]
    return model, collate_tokens([encode(s) for s in sequences])  # (ids (3, 40), padding mask (3, 40))


def ct() -> tuple[torch.nn.Module, tuple]:
    model = HybridCT3D(1, 3, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=24, num_heads=2, num_layers=2,
                       dropout=0.0).eval()  # eval: batch-norm statistics fixed, so both runs see the same function
    return model, (torch.rand(2, 1, 8, 8, 12),)


def msa() -> tuple[torch.nn.Module, tuple]:
    model = MSAContactModel(max_len=16, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0)
    tokens = torch.randint(0, 20, (2, 4, 12))
    tokens[1, 3] = MSATokenizer.pad_id  # a padding row
    tokens[1, :, 10:] = MSATokenizer.pad_id  # padding columns
    return model, (tokens,)


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple]]] = {"promoter": promoter, "ct": ct, "msa": msa}

NEEDS_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)]


def on(device: str, name: str) -> tuple[torch.nn.Module, tuple]:
    """Model ``name`` and its inputs moved to ``device``."""
    model, inputs = MODELS[name]()
    return model.to(device), tuple(x.to(device) for x in inputs)


def _logits(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def forward_backward(model: torch.nn.Module, inputs: tuple) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Outputs and the gradients of every parameter of ``sum(outputs²)``."""
    out = _logits(model(*inputs))
    return out, list(torch.autograd.grad(out.float().square().sum(), list(model.parameters()), allow_unused=True))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MODELS))
def test_bf16_autocast_forward_and_backward_are_finite_and_close_to_fp32(name: str, device: str) -> None:
    model, inputs = on(device, name)
    out, grads = forward_backward(model, inputs)
    with torch.autocast(device, dtype=torch.bfloat16):
        out_bf16, grads_bf16 = forward_backward(model, inputs)
    assert not torch.equal(out_bf16.float(), out)  # really computed in bf16 (the promoter's head itself stays fp32)
    assert torch.isfinite(out_bf16).all()
    assert (out_bf16.float() - out).abs().max() <= BF16_TOLERANCE * out.abs().max()
    used = [(got, want) for got, want in zip(grads_bf16, grads) if want is not None]
    scale = max(want.abs().max() for _, want in used)
    for got, want in used:
        assert torch.isfinite(got).all()
        assert (got.float() - want).abs().max() <= BF16_TOLERANCE * scale


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.slow
def test_compiles_without_graph_breaks_forward_and_backward(name: str) -> None:
    """``fullgraph=True`` fails on any graph break; ``aot_eager`` traces forward and backward as inductor does but
    skips code generation (the CPU build here has no C++ toolchain guarantee; inductor runs in the CUDA test)."""
    model, inputs = MODELS[name]()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out, grads = forward_backward(compiled, inputs)
    expected, expected_grads = forward_backward(model, inputs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", [pytest.param(name, marks=NEEDS_CUDA) for name in MODELS])
def test_inductor_compiles_each_model_on_cuda_forward_and_backward(name: str) -> None:
    """Inductor's generated CUDA kernels (Triton), ``fullgraph=True``: the same outputs and gradients as eager."""
    model, inputs = on("cuda", name)
    compiled = torch.compile(model, fullgraph=True)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # fp32 against fp32, not TF32 rounding
        out, grads = forward_backward(compiled, inputs)
        expected, expected_grads = forward_backward(model, inputs)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for got, want in zip(grads, expected_grads):
        if want is not None:
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
