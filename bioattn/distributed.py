"""torchrun-aware process-group helpers; without torchrun a single process (rank 0 of 1)."""
from __future__ import annotations

import atexit
import json
import os
from datetime import timedelta
from typing import Any, Callable, TypeVar

import torch
import torch.distributed as dist

from bioattn.errors import UserInputError

T = TypeVar("T")

_COLLECTIVE_TIMEOUT = timedelta(minutes=60)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def is_distributed() -> bool:
    """True when a process group with more than one rank is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of processes."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else _env_int("WORLD_SIZE", 1)


def rank() -> int:
    """Global rank of this process (0 without torchrun)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else _env_int("RANK", 0)


def local_rank() -> int:
    """Rank of this process on its node (selects the GPU)."""
    return _env_int("LOCAL_RANK", 0)


def is_main_process() -> bool:
    """True on rank 0, the only process that writes files and logs."""
    return rank() == 0


def gpu_per_process() -> bool:
    """True when PyTorch sees a GPU for every process of this node."""
    return torch.cuda.is_available() and _env_int("LOCAL_WORLD_SIZE", 1) <= torch.cuda.device_count()


def init_distributed() -> None:
    """Start the process group under torchrun with ``WORLD_SIZE > 1`` (NCCL with a GPU per process, else gloo)."""
    if _env_int("WORLD_SIZE", 1) <= 1 or not dist.is_available() or dist.is_initialized():
        return
    if gpu_per_process():
        torch.cuda.set_device(local_rank())
        dist.init_process_group("nccl", timeout=_COLLECTIVE_TIMEOUT, device_id=torch.device("cuda", local_rank()))
    else:
        dist.init_process_group("gloo", timeout=_COLLECTIVE_TIMEOUT)
    atexit.register(_destroy_process_group)


def _destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def default_device() -> torch.device:
    """``cuda:LOCAL_RANK`` when every process of this node has a GPU, else CPU."""
    return torch.device("cuda", local_rank()) if gpu_per_process() else torch.device("cpu")


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device for ``--device NAME`` (``auto``: :func:`default_device`)."""
    if name not in DEVICES:
        raise UserInputError(f"device must be one of {', '.join(DEVICES)}; got {name!r}")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserInputError("device cuda requested but PyTorch sees no CUDA GPU here; use --device cpu or auto")
    return default_device()


def _comm_device() -> torch.device:
    return default_device() if dist.get_backend() == "nccl" else torch.device("cpu")


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if is_distributed():
        dist.barrier()


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum a small float64 tensor over ranks; returns a CPU tensor (the input itself in one process)."""
    if not is_distributed():
        return values
    buffer = values.to(_comm_device(), torch.float64)
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    return buffer.cpu()


def _broadcast_bytes(payload: bytes | None) -> bytes:
    device = _comm_device()
    length = torch.tensor([len(payload) if payload is not None else 0], dtype=torch.int64, device=device)
    dist.broadcast(length, src=0)
    buffer = torch.zeros(int(length.item()), dtype=torch.uint8, device=device)
    if payload is not None:
        buffer.copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
    dist.broadcast(buffer, src=0)
    return bytes(buffer.cpu().numpy().tobytes())


def broadcast_json(obj: Any) -> Any:
    """Send a JSON-serialisable object from rank 0 to every rank (no pickle); identity in one process."""
    if not is_distributed():
        return obj
    payload = json.dumps(obj).encode() if is_main_process() else None
    return json.loads(_broadcast_bytes(payload).decode())


def gather_bytes(payload: bytes) -> list[bytes] | None:
    """Collect one byte string from every rank onto rank 0 (``None`` on the other ranks)."""
    if not is_distributed():
        return [payload]
    device = _comm_device()
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(length) for _ in range(world_size())]
    dist.all_gather(lengths, length)
    longest = max(int(n.item()) for n in lengths)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    gathered = [torch.zeros_like(padded) for _ in range(world_size())]
    dist.all_gather(gathered, padded)
    if not is_main_process():
        return None
    return [bytes(g[: int(n.item())].cpu().numpy().tobytes()) for g, n in zip(gathered, lengths)]


def run_on_main(fn: Callable[[], T]) -> T | None:
    """``fn()`` on rank 0 (``None`` elsewhere); its :class:`UserInputError` is raised on every rank."""
    error: str | None = None
    result: T | None = None
    if is_main_process():
        try:
            result = fn()
        except UserInputError as exc:
            if not is_distributed():
                raise
            error = str(exc)
    error = broadcast_json(error)
    if error is not None:
        raise UserInputError(error)
    return result
