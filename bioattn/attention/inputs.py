"""Input checks shared by the attention blocks: a ``ValueError`` naming the expected shape and convention."""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_embeddings", "check_mask_dtype", "check_padding_mask", "check_token_ids", "BATCH_FIRST_HINT"]

BATCH_FIRST_HINT = "bioattn blocks are batch-first: a sequence-first (L, B, E) tensor needs .transpose(0, 1)"


def check_mask_dtype(mask: Tensor | None, name: str, true_means: str, from_keep_ones: str, *, allow_float: bool = True,
                     shape: tuple[int, ...] | None = None) -> None:
    """Refuse integer masks, naming ``from_keep_ones``, the conversion from a Hugging Face ``attention_mask``;
    ``true_means`` (``"True = padding"``), ``shape`` are named in the message, ``allow_float`` accepts float masks."""
    if mask is None or mask.dtype == torch.bool or (allow_float and mask.is_floating_point()):
        return
    of_shape = "" if shape is None else f" of shape {shape}"
    accepted = f"bool ({true_means}) or float (added to the scores){of_shape}" if allow_float else f"a bool tensor{of_shape} ({true_means})"
    message = f"{name} must be {accepted}, got {mask.dtype} {tuple(mask.shape)}"
    if not mask.is_floating_point():
        message += (". Integer masks are refused because conventions differ: a Hugging Face attention_mask "
                    f"(1 = keep, 0 = padding) converts as {name} = {from_keep_ones}")
    raise ValueError(message)


def check_padding_mask(mask: Tensor | None, name: str, expected: tuple[int, int], *, allow_float: bool = True) -> None:
    """Check a ``(B, L)`` padding mask (True = padding); a ``(L, B)`` one means the input was sequence-first."""
    if mask is None:
        return
    check_mask_dtype(mask, name, "True = padding", "attention_mask == 0", allow_float=allow_float, shape=expected)
    shape = tuple(mask.shape)
    if shape == expected:
        return
    if shape == expected[::-1]:
        raise ValueError(f"{name} is {shape} but the input implies (B, L) = {expected}: the input looks "
                         f"sequence-first; " + BATCH_FIRST_HINT)
    raise ValueError(f"{name} must be (B, L) = {expected} (True = padding), got {shape}")


def check_embeddings(x: Tensor, name: str, layout: str, width: int, weight: Tensor, hint: str = BATCH_FIRST_HINT) -> None:
    """Check that ``x`` is a float tensor of shape ``layout`` (last dim ``width``) with ``weight``'s dtype (unless
    under autocast) and device. ``hint`` ends a shape error."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    rank = layout.count(",") + 1
    expected = f"{layout[:layout.rindex(',') + 1]} {width})"
    if not x.is_floating_point():
        raise ValueError(f"{name} must be float embeddings of shape {expected}, got {x.dtype} {tuple(x.shape)}; "
                         "integer inputs look like token ids: embed them first (e.g. torch.nn.Embedding)")
    if x.dim() != rank or x.size(-1) != width:
        raise ValueError(f"{name} must be of shape {expected}, got {tuple(x.shape)} ({hint})")
    if x.device != weight.device:
        raise ValueError(f"{name} is on {x.device} but the module's parameters are on {weight.device}: move one of them")
    if x.dtype != weight.dtype and not torch.is_autocast_enabled(x.device.type):
        raise ValueError(f"{name} is {x.dtype} but the module's parameters are {weight.dtype}: convert one of them "
                         f"({name}.to({weight.dtype}) or module.to({x.dtype})) or run under torch.autocast")


def check_token_ids(ids: Tensor, vocab_size: int, name: str, shape: str) -> None:
    """Refuse token ids that are not integers in ``[0, vocab_size)``; ``name`` and ``shape`` (``"(B, L)"``) are
    named in the message."""
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be integer token ids {shape}, got {ids.dtype}; embeddings go to the attention blocks, "
                         "token ids to the models")
    if torch.compiler.is_compiling():  # the range check reads values
        return
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{name} {shape} must hold token ids in [0, {vocab_size}), got values from {int(ids.min())} to "
                         f"{int(ids.max())}; encode sequences with the model's tokenizer")
