"""Seeding and exact capture/restore of the Python, NumPy and torch (CPU + CUDA) random states, as tensors."""
from __future__ import annotations

import math
import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state_tensors() -> dict[str, torch.Tensor]:
    """Current random states of this process as a flat dict of tensors."""
    version, mt_state, gauss_next = random.getstate()
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    if name != "MT19937":
        raise RuntimeError(f"unsupported NumPy global generator {name}")
    tensors = {"torch_cpu": torch.get_rng_state(), "python_mt": torch.tensor([version, *mt_state], dtype=torch.int64),
               "python_gauss": torch.tensor([math.nan if gauss_next is None else gauss_next], dtype=torch.float64),
               "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
               "numpy_meta": torch.tensor([pos, has_gauss], dtype=torch.int64),
               "numpy_gauss": torch.tensor([cached_gaussian], dtype=torch.float64)}
    if torch.cuda.is_available():
        tensors["torch_cuda"] = torch.stack(torch.cuda.get_rng_state_all())
    return tensors


def restore_rng_state(tensors: dict[str, torch.Tensor]) -> None:
    """Inverse of :func:`rng_state_tensors`."""
    torch.set_rng_state(tensors["torch_cpu"])
    mt = tensors["python_mt"].tolist()
    gauss = float(tensors["python_gauss"][0])
    random.setstate((mt[0], tuple(mt[1:]), None if math.isnan(gauss) else gauss))
    pos, has_gauss = tensors["numpy_meta"].tolist()
    keys = tensors["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, pos, has_gauss, float(tensors["numpy_gauss"][0])))
    if "torch_cuda" in tensors and torch.cuda.is_available():
        states = list(tensors["torch_cuda"])
        if len(states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states)
