"""Bit-for-bit repeatable training on a GPU (``TrainConfig(deterministic=True)``, ``--deterministic``).

A CPU run of the same seed already repeats bit for bit. On a GPU several kernels do not: cuDNN picks convolution
algorithms by timing them, and backward passes (convolutions, embeddings, fused attention) add into the same
gradient from many threads in whatever order they finish. :func:`deterministic_kernels` switches PyTorch to its
deterministic kernels for the duration of a run; the task running the trainer also runs attention with the math
kernel then (see :func:`bioattn.tasks.common.training_attention_backend`), whose backward is two matrix products.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

CUBLAS_WORKSPACE_CONFIG = ":4096:8"  # cuBLAS repeats its reductions only with a fixed workspace (NVIDIA's advice)


@contextlib.contextmanager
def deterministic_kernels(device: torch.device, enabled: bool = True) -> Iterator[None]:
    """Within the block, work on a CUDA ``device`` runs on deterministic kernels; the previous settings come back after.

    Sets ``torch.use_deterministic_algorithms(True, warn_only=True)`` (an op without a deterministic kernel warns
    once instead of stopping a run), ``torch.backends.cudnn.deterministic`` and no cuDNN benchmarking, and
    ``CUBLAS_WORKSPACE_CONFIG`` unless the environment already sets it (removed again after). On a CPU, or with
    ``enabled=False``, it changes nothing.
    """
    if not enabled or device.type != "cuda":
        yield
        return
    own_workspace = "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = previous[2], previous[3]
        if own_workspace:
            del os.environ["CUBLAS_WORKSPACE_CONFIG"]
