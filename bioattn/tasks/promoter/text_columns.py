"""Text tables in bulk: rows of integers and ``%.6g`` floats built with numpy, byte for byte what Python's
``f"{value}"`` / ``f"{value:.6g}"`` write, without a Python call per row.

A row is assembled as a ``(rows, width)`` byte matrix and a mask of the bytes it keeps; the kept bytes, row after
row, are the text (one boolean index). ``%.6g`` (:func:`g6_columns`): each value's six significant digits come from
one multiplication by an exact power of ten and a rounding; a value whose rounding that cannot decide (within
1e-9 of a half), whose exponent is outside ``[-17, 15]``, zero, negative or not finite is formatted by Python
itself, so every value is written exactly as Python writes it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

_POW10 = np.array([float(10**k) for k in range(23)])  # exact in float64
_G6_WIDTH = 13  # the longest '%.6g' of a float64: '-1.23457e-308'
_MIN_EXP, _MAX_EXP = -17, 15
# source symbols of a '%.6g' field, after the six digits (indices 0-5) and the two exponent digits (6, 7)
_DOT, _ZERO, _E, _MINUS, _PLUS = range(8, 13)
_SYMBOLS = np.frombuffer(b".0e-+", dtype=np.uint8)
Column = tuple[np.ndarray, np.ndarray]  # (rows, width) uint8 bytes and (rows, width) bool: which bytes are kept


def _g6_pattern(exponent: int, last: int) -> list[int]:
    """Source indices of the '%.6g' text of ``d0.d1...d5 x 10**exponent`` whose last non-zero digit is ``last``."""
    digits = list(range(last + 1))
    if -4 <= exponent < 6:  # fixed notation, as Python's 'g'
        if exponent >= 0:
            whole, fraction = list(range(exponent + 1)), list(range(exponent + 1, last + 1))
            return [d if d <= last else _ZERO for d in whole] + ([_DOT] + fraction if fraction else [])
        return [_ZERO, _DOT] + [_ZERO] * (-exponent - 1) + digits
    return digits[:1] + ([_DOT] + digits[1:] if last else []) + [_E, _MINUS if exponent < 0 else _PLUS, 6, 7]


def _g6_table() -> tuple[np.ndarray, np.ndarray]:
    count = (_MAX_EXP - _MIN_EXP + 1) * 6
    table, lengths = np.zeros((count, _G6_WIDTH), dtype=np.int64), np.zeros(count, dtype=np.int64)
    for exponent in range(_MIN_EXP, _MAX_EXP + 1):
        for last in range(6):
            pattern = _g6_pattern(exponent, last)
            row = (exponent - _MIN_EXP) * 6 + last
            table[row, : len(pattern)], lengths[row] = pattern, len(pattern)
    return table, lengths


_G6_TABLE, _G6_LENGTHS = _g6_table()


def g6_columns(values: np.ndarray) -> Column:
    """The ``f"{v:.6g}"`` text of each float of ``values (N,)``, left-aligned in a ``(N, 13)`` byte column."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    with np.errstate(all="ignore"):
        fast = np.isfinite(values) & (values >= 10.0**_MIN_EXP) & (values < 10.0 ** (_MAX_EXP + 1))
        x = values[fast]
        exponent = np.floor(np.log10(x)).astype(np.int64)
        power = 5 - exponent
        scaled = np.where(power >= 0, x * _POW10[np.clip(power, 0, 22)], x / _POW10[np.clip(-power, 0, 22)])
    mantissa = np.floor(scaled + 0.5)
    decided = (np.abs(scaled - np.floor(scaled) - 0.5) > 1e-9) & (mantissa >= 100_000) & (mantissa <= 999_999)
    decided &= (exponent >= _MIN_EXP) & (exponent <= _MAX_EXP)
    fast[np.flatnonzero(fast)[~decided]] = False
    m, exponent = mantissa[decided].astype(np.int64), exponent[decided]
    sources = np.empty((len(m), 8 + len(_SYMBOLS)), dtype=np.uint8)
    for d in range(6):
        sources[:, d] = m // 10 ** (5 - d) % 10
    last = 5 - np.argmax(sources[:, 5::-1] != 0, axis=1)  # the last non-zero digit (d0 is never 0)
    sources[:, 6], sources[:, 7] = np.abs(exponent) // 10, np.abs(exponent) % 10
    sources[:, :8] += ord("0")
    sources[:, 8:] = _SYMBOLS
    pattern = (exponent - _MIN_EXP) * 6 + last
    chars = np.zeros((n, _G6_WIDTH), dtype=np.uint8)
    keep = np.zeros((n, _G6_WIDTH), dtype=bool)
    chars[fast] = np.take_along_axis(sources, _G6_TABLE[pattern], axis=1)
    keep[fast] = np.arange(_G6_WIDTH) < _G6_LENGTHS[pattern][:, None]
    for i in np.flatnonzero(~fast).tolist():  # what the fast path leaves: Python writes it
        text = f"{float(values[i]):.6g}".encode()
        chars[i, : len(text)], keep[i, : len(text)] = np.frombuffer(text, dtype=np.uint8), True
    return chars, keep


def int_columns(values: np.ndarray) -> Column:
    """The decimal text of each non-negative integer of ``values (N,)``, right-aligned in a byte column."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) and values.min() < 0:
        raise ValueError("int_columns writes non-negative integers")
    width = len(str(int(values.max()))) if len(values) else 1
    chars = np.empty((len(values), width), dtype=np.uint8)
    for j in range(width):
        chars[:, j] = values // 10 ** (width - 1 - j) % 10
    chars += ord("0")
    digits = np.ones(len(values), dtype=np.int64)
    for k in range(1, width):
        digits += values >= 10**k
    return chars, np.arange(width) >= (width - digits)[:, None]


def const_column(text: bytes, rows: int) -> Column:
    """The same bytes on every row."""
    chars = np.broadcast_to(np.frombuffer(text, dtype=np.uint8), (rows, len(text)))
    return chars, np.ones((rows, len(text)), dtype=bool)


def join_rows(columns: Sequence[Column]) -> bytes:
    """The rows made of ``columns`` side by side (each a byte column or :func:`const_column`), row after row."""
    chars = np.concatenate([c for c, _ in columns], axis=1)
    keep = np.concatenate([k for _, k in columns], axis=1)
    return chars[keep].tobytes()


def table_rows(prefix: bytes, delimiter: bytes, ints: Sequence[np.ndarray], floats: np.ndarray) -> bytes:
    """``prefix`` then each integer column, then the ``%.6g`` floats, separated by ``delimiter``, one line per row:
    ``prefix + delimiter.join([*ints, f"{float:.6g}"]) + "\\n"``."""
    rows = len(floats)
    if rows == 0:
        return b""
    columns: list[Column] = [const_column(prefix, rows)] if prefix else []
    for values in ints:
        columns += [int_columns(values), const_column(delimiter, rows)]
    columns += [g6_columns(floats), const_column(b"\n", rows)]
    return join_rows(columns)
