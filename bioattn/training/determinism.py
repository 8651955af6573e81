"""Bit-for-bit repeatable training on a GPU (``TrainConfig(deterministic=True)``, ``--deterministic``)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

CUBLAS_WORKSPACE_CONFIG = ":4096:8"


@contextlib.contextmanager
def deterministic_kernels(device: torch.device, enabled: bool = True) -> Iterator[None]:
    """Within the block, work on a CUDA ``device`` runs on deterministic kernels (warn-only); no-op on a CPU."""
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
