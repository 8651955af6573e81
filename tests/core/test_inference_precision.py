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


@pytest.mark.parametrize("native", [True, False])
def test_training_in_bf16_warns_on_a_cpu_without_bf16_units(monkeypatch, capsys, tmp_path, native):
    """bf16 autocast on a CPU without bf16 units is emulated (6-14x slower than fp32 there): the Trainer says so,
    once per process, and only for bf16."""
    from torch.utils.data import TensorDataset

    from bioattn.training import TrainConfig, Trainer

    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": native}, raising=False)
    data = TensorDataset(torch.randn(8, 3), torch.zeros(8, dtype=torch.long))
    warnings = {}
    for name in ("fp32", "bf16"):
        for member in range(2):  # e.g. two members of a --seeds run in one process: one warning, not one per Trainer
            config = TrainConfig(max_epochs=1, batch_size=4, precision=name, device="cpu")
            Trainer(torch.nn.Linear(3, 2), data, config, tmp_path / f"{name}{member}",
                    loss_fn=lambda model, batch: model(batch[0]).sum())
        warnings[name] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings["fp32"] == []
    if native:
        assert warnings["bf16"] == []
    else:
        assert len(warnings["bf16"]) == 1
        assert "no bf16 units" in warnings["bf16"][0] and "--precision fp32" in warnings["bf16"][0]
