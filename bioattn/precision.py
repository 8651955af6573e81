"""Inference precision: fp32, or bf16 autocast where the hardware multiplies bf16 natively (``auto``)."""
from __future__ import annotations

import contextlib
import functools
import sys

import torch

__all__ = ["INFERENCE_PRECISIONS", "has_native_bf16", "inference_autocast", "resolve_inference_precision",
           "warn_if_bf16_is_emulated"]

INFERENCE_PRECISIONS = ("auto", "fp32", "bf16")


def has_native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 in hardware."""
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    capabilities = getattr(torch.cpu, "get_capabilities", None)
    if capabilities is None:
        return False
    found = capabilities()
    return bool(found.get("avx512_bf16") or found.get("amx_bf16"))


def warn_if_bf16_is_emulated(precision: str, device: torch.device) -> None:
    """Warn once per process when ``precision`` is ``"bf16"`` on a CPU without bf16 units."""
    if precision != "bf16" or device.type != "cpu" or has_native_bf16(device):
        return
    _warn_emulated_bf16()


@functools.cache
def _warn_emulated_bf16() -> None:
    print("warning: this CPU has no bf16 units (AVX512-BF16 or AMX-BF16), so bf16 is emulated and much slower than "
          "fp32 here; --precision fp32 is faster", file=sys.stderr)


def resolve_inference_precision(name: str, device: torch.device) -> str:
    """``"fp32"`` or ``"bf16"`` for ``name`` in :data:`INFERENCE_PRECISIONS` on ``device``."""
    if name not in INFERENCE_PRECISIONS:
        raise ValueError(f"precision must be one of {INFERENCE_PRECISIONS}, got {name!r}")
    return ("bf16" if has_native_bf16(device) else "fp32") if name == "auto" else name


def inference_autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` for ``"bf16"``, nothing for ``"fp32"``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be 'fp32' or 'bf16' (resolve 'auto' first), got {precision!r}")
