"""Axial attention over MSAs: RowAttention, ColumnAttention, AxialTransformerLayer (bioattn.attention.axial)."""
from __future__ import annotations

import math
import weakref

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import bioattn.attention.sdpa as sdpa_module
from bioattn.attention import AxialTransformerLayer, ColumnAttention, RowAttention, TransformerEncoderLayer

B, N, L, D, H = 2, 5, 7, 16, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def layer(tied: bool, chunk_size: int | None = None) -> AxialTransformerLayer:
    return AxialTransformerLayer(D, H, dropout=0.0, tied=tied, chunk_size=chunk_size).eval()


def set_chunk(module: torch.nn.Module, chunk_size: int | None) -> None:
    for sub in module.modules():
        if hasattr(sub, "chunk_size"):
            sub.chunk_size = chunk_size


# ------------------------------------------------------------------------------------------ definitions
def test_tied_row_attention_equals_its_definition():
    attention = RowAttention(D, H, tied=True).eval()
    x = torch.randn(B, N, L, D)
    out, weights = attention(x, need_weights=True)
    d = D // H
    q = attention.q_proj(x).view(B, N, L, H, d)
    k = attention.k_proj(x).view(B, N, L, H, d)
    v = attention.v_proj(x).view(B, N, L, H, d)
    scores = torch.einsum("bnihd,bnjhd->bhij", q, k) / math.sqrt(d * N)  # summed over rows, MSA Transformer scaling
    expected_weights = scores.softmax(-1)
    expected = attention.out_proj(torch.einsum("bhij,bnjhd->bnihd", expected_weights, v).reshape(B, N, L, D))
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    fused, no_weights = attention(x)  # the fused path gives the same numbers
    assert no_weights is None
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)


def test_untied_row_and_column_attention_match_torch_multihead_attention():
    x = torch.randn(B, N, L, D)
    row = RowAttention(D, H).eval()
    column = ColumnAttention(D, H).eval()
    for module, sequences in ((row, x.reshape(B * N, L, D)), (column, x.transpose(1, 2).reshape(B * L, N, D))):
        reference = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
        with torch.no_grad():
            reference.in_proj_weight.copy_(torch.cat([module.q_proj.weight, module.k_proj.weight, module.v_proj.weight]))
            reference.in_proj_bias.copy_(torch.cat([module.q_proj.bias, module.k_proj.bias, module.v_proj.bias]))
            reference.out_proj.load_state_dict(module.out_proj.state_dict())
        expected, _ = reference(sequences, sequences, sequences)
        got = module(x)[0]
        got = got.reshape(B * N, L, D) if module is row else got.transpose(1, 2).reshape(B * L, N, D)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_parity_with_esm_msa_transformer_attention():
    """Same weights → same outputs as fair-esm's RowSelfAttention (tied) and ColumnSelfAttention (sequence-first)."""
    axial_attention = pytest.importorskip("esm.axial_attention")
    x = torch.randn(B, N, L, D)
    esm_input = x.permute(1, 2, 0, 3)  # (R, C, B, D)
    row, esm_row = RowAttention(D, H, tied=True).eval(), axial_attention.RowSelfAttention(D, H).eval()
    esm_row.load_state_dict(row.state_dict())
    out, weights = row(x, need_weights=True)
    esm_out, esm_weights = esm_row(esm_input)
    torch.testing.assert_close(out, esm_out.permute(2, 0, 1, 3), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, esm_weights.transpose(0, 1), atol=1e-5, rtol=1e-5)  # (H, B, L, L) in ESM
    column, esm_column = ColumnAttention(D, H).eval(), axial_attention.ColumnSelfAttention(D, H).eval()
    esm_column.load_state_dict(column.state_dict())
    out, weights = column(x, need_weights=True)
    esm_out, esm_weights = esm_column(esm_input)  # weights (H, C, B, R, R) in ESM
    torch.testing.assert_close(out, esm_out.permute(2, 0, 1, 3), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, esm_weights.permute(2, 1, 0, 3, 4), atol=1e-5, rtol=1e-5)
    assert column(x)[1] is None  # the (B, L, H, N, N) maps only on request


def test_fused_kernel_is_used_unless_weights_are_requested(monkeypatch):
    calls = []
    fused = sdpa_module.F.scaled_dot_product_attention
    monkeypatch.setattr(sdpa_module.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused(*a, **k))
    x = torch.randn(B, N, L, D)
    layer(tied=True)(x)
    assert len(calls) == 2  # one call for all rows (tied), one for all columns
    layer(tied=True)(x, need_weights=True)
    assert len(calls) == 3  # rows took the explicit path to return weights; columns stayed fused


# ------------------------------------------------------------------------------------------ invariances
@pytest.mark.parametrize("tied", [False, True])
def test_permuting_rows_permutes_the_output(tied):
    module = layer(tied)
    x = torch.randn(B, N, L, D)
    perm = torch.randperm(N)
    out, weights = module(x, need_weights=True)
    out_perm, weights_perm = module(x[:, perm], need_weights=True)
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)
    if tied:  # the tied map does not depend on row order
        torch.testing.assert_close(weights_perm, weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tied", [False, True])
def test_padding_rows_and_positions_changes_nothing(tied):
    module = layer(tied)
    x = torch.randn(1, N, L, D)
    padded = torch.randn(1, N + 3, L + 2, D) * 5  # junk in the padded cells
    padded[:, :N, :L] = x
    rows = torch.tensor([[False] * N + [True] * 3])
    positions = torch.tensor([[False] * L + [True] * 2])
    out, weights = module(x, need_weights=True)
    out_padded, weights_padded = module(padded, sequence_padding_mask=rows, position_padding_mask=positions, need_weights=True)
    torch.testing.assert_close(out_padded[:, :N, :L], out, atol=1e-5, rtol=1e-5)
    assert out_padded[:, N:].abs().max() == 0 and out_padded[:, :, L:].abs().max() == 0
    real_weights = weights_padded[..., :L, :L] if tied else weights_padded[:, :N, :, :L, :L]
    torch.testing.assert_close(real_weights, weights, atol=1e-5, rtol=1e-5)
    assert weights_padded[..., :L, L:].abs().max() == 0  # no attention to padded positions


def test_batched_alignments_of_different_depth_match_one_by_one():
    module = layer(tied=True)
    a, b = torch.randn(1, 3, L, D), torch.randn(1, 5, L, D)
    batch = torch.zeros(2, 5, L, D)
    batch[0, :3], batch[1] = a[0], b[0]
    rows = torch.tensor([[False] * 3 + [True] * 2, [False] * 5])
    out, _ = module(batch, sequence_padding_mask=rows)
    torch.testing.assert_close(out[0, :3], module(a)[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1], module(b)[0][0], atol=1e-5, rtol=1e-5)


# chunked == unchunked (values, weights, gradients, padding): tests/attention/test_attention_chunking.py


# ------------------------------------------------------------------------------------------ memory
class PeakLiveTensorBytes(TorchDispatchMode):
    """Peak bytes of live tensor storages created by aten ops (inputs and parameters excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.live, self.peak, self.seen = 0, 0, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.seen:
                    self.seen.add(key)
                    self.live += storage.nbytes()
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._release, key, storage.nbytes())
        return out

    def _release(self, key: int, nbytes: int) -> None:
        self.seen.discard(key)
        self.live -= nbytes


def peak_forward_bytes(module: torch.nn.Module, shape: tuple[int, ...]) -> int:
    """Peak live bytes of ``module(randn(shape))`` with attention maps materialised (math kernel)."""
    x = torch.randn(*shape)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), PeakLiveTensorBytes() as meter:
        module(x)
    return meter.peak


def test_memory_scales_as_nl_times_n_plus_l():
    """Axial peak memory follows N·L·(N+L); full attention over the flattened N·L grid follows (N·L)²."""
    axial = AxialTransformerLayer(8, 2, dropout=0.0, tied=False).eval()
    full = TransformerEncoderLayer(8, 2, dropout=0.0).eval()
    shapes = [(16, 16), (32, 16), (16, 32), (32, 32), (64, 32)]
    axial_unit = [peak_forward_bytes(axial, (1, n, length, 8)) / (n * length * (n + length)) for n, length in shapes]
    full_unit = [peak_forward_bytes(full, (1, n * length, 8)) / (n * length) ** 2 for n, length in shapes]
    assert max(axial_unit) / min(axial_unit) < 1.6  # constant bytes per N·L·(N+L) unit across shapes
    assert max(full_unit) / min(full_unit) < 1.6
    n, length = shapes[-1]
    assert axial_unit[-1] * n * length * (n + length) < full_unit[-1] * (n * length) ** 2 / 10


@pytest.mark.parametrize("tied", [False, True])
def test_chunking_bounds_peak_memory(tied):
    module = AxialTransformerLayer(8, 2, dropout=0.0, tied=tied).eval()
    whole = peak_forward_bytes(module, (1, 64, 64, 8))
    set_chunk(module, 8)  # 8 of 64 rows / columns at a time
    assert peak_forward_bytes(module, (1, 64, 64, 8)) < 0.3 * whole


# ------------------------------------------------------------------------------------------ validation
def test_bad_shapes_and_masks_are_explained():
    module = layer(tied=True)
    with pytest.raises(ValueError, match=r"expected x of shape \(B, N, L, 16\)"):
        module(torch.randn(N, L, D))
    with pytest.raises(ValueError, match="sequence_padding_mask must be a bool tensor of shape"):
        module(torch.randn(B, N, L, D), sequence_padding_mask=torch.zeros(B, N))
    with pytest.raises(ValueError, match="divisible"):
        RowAttention(10, 3)


def test_column_weights_are_the_same_with_chunking_and_padding():
    column = ColumnAttention(D, H).eval()
    x = torch.randn(B, N, L, D)
    rows = torch.zeros(B, N, dtype=torch.bool)
    rows[1, -2:] = True
    out, weights = column(x, sequence_padding_mask=rows, need_weights=True)
    column.chunk_size = 3
    chunked_out, chunked_weights = column(x, sequence_padding_mask=rows, need_weights=True)
    assert weights.shape == (B, L, H, N, N)
    torch.testing.assert_close(chunked_out, out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(chunked_weights, weights, atol=1e-6, rtol=1e-6)
    assert weights[1, ..., -2:].abs().max() == 0  # padded sequences are never attended to
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, L, H, N))
