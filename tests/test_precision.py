"""Inference precision: ``auto`` picks bf16 only where the hardware has bf16 units; bad names are refused."""
from __future__ import annotations

import pytest
import torch

from bioattn import precision
from bioattn.precision import has_native_bf16, inference_autocast, resolve_inference_precision

CPU = torch.device("cpu")


@pytest.mark.parametrize("capabilities, expected", [
    ({"avx512_bf16": True, "amx_bf16": False}, True),
    ({"avx512_bf16": False, "amx_bf16": True}, True),
    ({"avx512_bf16": False, "amx_bf16": False, "avx512_f": True}, False),
    ({}, False),
])
def test_cpu_bf16_units_are_read_from_torch_capabilities(monkeypatch, capabilities, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities, raising=False)
    assert has_native_bf16(CPU) is expected
    assert resolve_inference_precision("auto", CPU) == ("bf16" if expected else "fp32")


def test_torch_without_capability_report_means_fp32(monkeypatch):
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)
    assert resolve_inference_precision("auto", CPU) == "fp32"


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_explicit_precision_is_kept_whatever_the_hardware(monkeypatch, name):
    monkeypatch.setattr(precision, "has_native_bf16", lambda device: False)
    assert resolve_inference_precision(name, CPU) == name


def test_bf16_context_runs_matrix_products_in_bf16_and_fp32_does_not():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with inference_autocast("bf16", CPU):
        assert (a @ b).dtype == torch.bfloat16
    with inference_autocast("fp32", CPU):
        assert (a @ b).dtype == torch.float32


@pytest.mark.parametrize("call", [lambda: resolve_inference_precision("fp16", CPU), lambda: inference_autocast("auto", CPU)])
def test_unknown_or_unresolved_precision_is_an_error(call):
    with pytest.raises(ValueError, match="precision must be"):
        call()
