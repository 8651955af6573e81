"""Apply a function over chunks of batch-like dimensions, exactly, to bound memory.

    from bioattn.attention import apply_in_chunks
    out = apply_in_chunks(layer, x, chunk_size=8, dim=1)                # x: (B, N, L, D), 8 rows of dim 1 at a time
    out = apply_in_chunks(fn, maps, chunk_size=4, dim=0, num_dims=2)    # maps: (B, H, L, L); fn sees (c, L, L)
"""
from __future__ import annotations

import math
from typing import Any, Callable, Literal, Sequence, Union

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint as torch_checkpoint

__all__ = ["apply_in_chunks"]

Output = Union[Tensor, Sequence[Union[Tensor, None]]]


def _batch_shape(tensors: list[Tensor], dim: int, num_dims: int) -> tuple[int, ...]:
    """Broadcast size of each batch-like dim over the tensor inputs (each has the full size or 1)."""
    shape = []
    for axis in range(dim, dim + num_dims):
        sizes = {t.size(axis) for t in tensors} - {1}
        if len(sizes) > 1:
            raise ValueError(f"apply_in_chunks: inputs disagree in dim {axis}: sizes {sorted(sizes)} (each must be equal or 1)")
        shape.append(sizes.pop() if sizes else 1)
    return tuple(shape)


def _flatten(t: Tensor, dim: int, num_dims: int, shape: tuple[int, ...]) -> Tensor:
    """Flatten the batch-like dims into one; an input broadcast in some but not all of them is expanded first."""
    own = tuple(t.shape[dim : dim + num_dims])
    if own != shape and any(size != 1 for size in own):
        t = t.expand(*t.shape[:dim], *shape, *t.shape[dim + num_dims :])
    return t.flatten(dim, dim + num_dims - 1)


def _as_parts(output: Output) -> tuple[Tensor | None, ...]:
    return (output,) if isinstance(output, Tensor) else tuple(output)


def apply_in_chunks(fn: Callable[..., Output], *inputs: Any, chunk_size: int | None, dim: int = 0, num_dims: int = 1,
                    reduce: Literal["cat", "sum"] = "cat", checkpoint: bool = False) -> Output:
    """``fn(*inputs)`` computed ``chunk_size`` rows (None: all) of the batch-like dims at a time.

    The dims ``dim .. dim + num_dims - 1`` of every tensor in ``inputs`` (size 1 broadcasts) are flattened into rows
    and cut into chunks; ``fn`` returns a tensor or a tuple of tensors / None, whose row i depends on row i of the
    inputs only when ``reduce="cat"`` (joined along ``dim``); ``"sum"`` adds the chunks' outputs. ``checkpoint``:
    under autograd, recompute each chunk in the backward pass (:func:`torch.utils.checkpoint.checkpoint`).
    """
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    if dim < 0 or num_dims < 1:
        raise ValueError(f"apply_in_chunks needs dim >= 0 and num_dims >= 1, got dim={dim}, num_dims={num_dims}")
    if reduce not in ("cat", "sum"):
        raise ValueError(f"reduce must be 'cat' or 'sum', got {reduce!r}")
    tensors = [t for t in inputs if isinstance(t, Tensor)]
    if not tensors:
        raise ValueError("apply_in_chunks needs at least one tensor input")
    for t in tensors:
        if t.dim() < dim + num_dims:
            raise ValueError(f"apply_in_chunks: an input of shape {tuple(t.shape)} has no dims {dim}..{dim + num_dims - 1}")
    shape = _batch_shape(tensors, dim, num_dims)
    rows = math.prod(shape)
    flat = [_flatten(t, dim, num_dims, shape) if isinstance(t, Tensor) else t for t in inputs]

    def restore(t: Tensor | None) -> Tensor | None:
        return t if t is None or reduce == "sum" or num_dims == 1 else t.unflatten(dim, shape)
    if chunk_size is None or chunk_size >= rows:
        output = fn(*flat)
        parts = tuple(restore(t) for t in _as_parts(output))
        return parts[0] if isinstance(output, Tensor) else parts
    combined: list[Tensor | None] = []
    for start in range(0, rows, chunk_size):
        length = min(chunk_size, rows - start)
        pieces = [t.narrow(dim, start, length) if isinstance(t, Tensor) and t.size(dim) == rows else t for t in flat]
        recompute = checkpoint and torch.is_grad_enabled()
        output = torch_checkpoint(fn, *pieces, use_reentrant=False) if recompute else fn(*pieces)
        parts = _as_parts(output)
        if start == 0:
            combined = [_accumulator(part, dim, rows, reduce) for part in parts]
        if len(parts) != len(combined) or any((a is None) != (b is None) for a, b in zip(parts, combined)):
            raise ValueError("apply_in_chunks: fn must return the same structure (tensors / None) for every chunk")
        for index, part in enumerate(parts):
            if part is None:
                continue
            if reduce == "sum":
                combined[index] = part if start == 0 else combined[index] + part
                continue
            if part.dim() <= dim or part.size(dim) != length:
                raise ValueError(f"apply_in_chunks: with reduce='cat', fn must return {length} rows in dim {dim}, "
                                 f"got {tuple(part.shape)}")
            combined[index].narrow(dim, start, length).copy_(part)
    result = tuple(restore(t) for t in combined)
    return result[0] if isinstance(output, Tensor) else result


def _accumulator(part: Tensor | None, dim: int, rows: int, reduce: str) -> Tensor | None:
    """An empty tensor of all ``rows`` in ``dim`` for ``"cat"``; ``part`` itself for ``"sum"``."""
    if part is None or reduce == "sum" or part.dim() <= dim:
        return part
    return part.new_empty(*part.shape[:dim], rows, *part.shape[dim + 1 :])
