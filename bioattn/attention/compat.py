"""Renamed keyword arguments and config keys, accepted for one release.

bioattn spells the width of a block or model ``embed_dim``, its number of attention heads ``num_heads`` and its
longest accepted input ``max_len``. Constructors that used other spellings (``d_model`` ...) take them for one more
release with a :class:`DeprecationWarning` naming the replacement (:func:`renamed_arguments`); ``config.json`` files
saved with the old keys keep loading, silently (:func:`upgrade_config`: a saved file is not the user's code to fix).
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Mapping, TypeVar

__all__ = ["RENAMED_ATTRIBUTE", "renamed_arguments", "renamed_arguments_of", "upgrade_config"]

F = TypeVar("F", bound=Callable[..., Any])

#: Attribute of a wrapped callable holding its ``{old name: new name}`` map (read by config loaders).
RENAMED_ATTRIBUTE = "renamed_arguments"


def renamed_arguments(**renames: str) -> Callable[[F], F]:
    """Decorator: accept each old keyword ``old=new`` of ``renames`` as ``new``, with a :class:`DeprecationWarning`.

    Passing both the old and the new name is a :class:`TypeError`. The map is kept on the wrapper
    (:func:`renamed_arguments_of`) so loaders of saved configs can translate old keys::

        @renamed_arguments(d_model="embed_dim")
        def __init__(self, embed_dim: int, num_heads: int) -> None: ...
    """
    for old, new in renames.items():
        if not isinstance(new, str) or not new or new == old:
            raise ValueError(f"renamed_arguments needs old=new names with new != old, got {old}={new!r}")

    def decorate(func: F) -> F:
        name = func.__qualname__.removesuffix(".__init__")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{name}() got both {old}= (deprecated) and {new}=; pass only {new}=")
                warnings.warn(f"{name}({old}=...) is deprecated and will be removed in the next release; "
                              f"use {name}({new}=...)", DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        setattr(wrapper, RENAMED_ATTRIBUTE, dict(renames))
        return wrapper  # type: ignore[return-value]

    return decorate


def renamed_arguments_of(func: Callable[..., Any]) -> dict[str, str]:
    """The ``{old: new}`` keyword map of a :func:`renamed_arguments`-wrapped ``func`` (``{}`` for any other)."""
    return dict(getattr(func, RENAMED_ATTRIBUTE, {}))


def upgrade_config(config: Mapping[str, Any], renames: Mapping[str, str], source: str = "config") -> dict[str, Any]:
    """``config`` with every old key of ``renames`` (``{old: new}``) under its new name; other keys unchanged.

    A config holding both an old key and its new one is ambiguous: :class:`ValueError` naming ``source``.
    """
    upgraded = dict(config)
    for old, new in renames.items():
        if old in upgraded:
            if new in upgraded:
                raise ValueError(f"{source}: holds both {old!r} and its replacement {new!r}; keep only {new!r}")
            upgraded[new] = upgraded.pop(old)
    return upgraded
