"""Text tables in bulk: integers and ``%.6g`` floats formatted with numpy, byte for byte as Python."""
from __future__ import annotations

from typing import Sequence

import numpy as np

_POW10 = np.array([float(10**k) for k in range(23)])  # exact in float64
_MIN_EXP, _MAX_EXP = -17, 15
# One layout holds every '%.6g' text of the fast path; a row keeps the bytes its exponent X and last significant
# digit call for: "0." and -X - 1 zeros before the digits (-4 <= X < 0); the digits d0..d5, each followed by a
# candidate "." (the one after dX when 0 <= X < 6 and digits follow, the one after d0 in scientific notation);
# "e", the sign and two exponent digits (X < -4 or X >= 6).
_LAYOUT = b"0.0000.0.0.0.0.0e-00"
_WIDTH = len(_LAYOUT)  # 20 >= 13, the longest '%.6g' of a float64 ('-1.23457e-308')
_TRIPLES = np.array([list(f"{v:03d}".encode()) for v in range(1000)], dtype=np.uint8)
_LAST_IN_TRIPLE = np.array([max((i for i in range(3) if f"{v:03d}"[i] != "0"), default=-1) for v in range(1000)])


def _g6_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per exponent X: the layout's bytes (sign and exponent digits filled in); per (X, last digit): the kept bytes."""
    count = _MAX_EXP - _MIN_EXP + 1
    chars = np.empty((count, _WIDTH), dtype=np.uint8)
    keep = np.zeros((count * 6, _WIDTH), dtype=bool)
    for exponent in range(_MIN_EXP, _MAX_EXP + 1):
        row = exponent - _MIN_EXP
        chars[row] = np.frombuffer(_LAYOUT[:16] + f"e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".encode(),
                                   dtype=np.uint8)
        for last in range(6):
            kept = keep[row * 6 + last]
            if -4 <= exponent < 0:
                kept[: 2 + (-exponent - 1)] = True
            for d in range(6):
                kept[5 + 2 * d] = d <= last or 0 <= exponent < 6 and d <= exponent
            if 0 <= exponent < 6 and last > exponent:
                kept[6 + 2 * exponent] = True
            if not -4 <= exponent < 6:
                kept[6] = last >= 1
                kept[16:] = True
    return chars, keep


_G6_CHARS, _G6_KEEP = _g6_tables()
Column = tuple[np.ndarray, np.ndarray]  # (rows, width) uint8 bytes and (rows, width) bool: which bytes are kept


def g6_columns(values: np.ndarray) -> Column:
    """The ``f"{v:.6g}"`` text of each float of ``values (N,)`` in a ``(N, 20)`` byte column (the kept bytes)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    with np.errstate(all="ignore"):
        fast = np.isfinite(values) & (values >= 10.0**_MIN_EXP) & (values < 10.0 ** (_MAX_EXP + 1))
        x = values if fast.all() else values[fast]
        exponent = np.floor(np.log10(x)).astype(np.int64)
        power = 5 - exponent
        if (power >= 0).all():  # probabilities: always
            scaled = x * _POW10[np.minimum(power, 22)]
        else:
            scaled = np.where(power >= 0, x * _POW10[np.clip(power, 0, 22)], x / _POW10[np.clip(-power, 0, 22)])
    mantissa = np.floor(scaled + 0.5)
    decided = (np.abs(scaled - np.floor(scaled) - 0.5) > 1e-9) & (mantissa >= 100_000) & (mantissa <= 999_999)
    decided &= (exponent >= _MIN_EXP) & (exponent <= _MAX_EXP)
    if not decided.all():
        fast[np.flatnonzero(fast)[~decided]] = False
        mantissa, exponent = mantissa[decided], exponent[decided]
    m = mantissa.astype(np.int64)
    high, low = m // 1000, m % 1000
    last = np.where(low != 0, 3 + _LAST_IN_TRIPLE[low], _LAST_IN_TRIPLE[high])
    row = exponent - _MIN_EXP
    chars, keep = _G6_CHARS[row], _G6_KEEP[row * 6 + last]
    chars[:, 5:10:2], chars[:, 11:16:2] = _TRIPLES[high], _TRIPLES[low]
    if len(m) == n:
        return chars, keep
    all_chars, all_keep = np.zeros((n, _WIDTH), dtype=np.uint8), np.zeros((n, _WIDTH), dtype=bool)
    all_chars[fast], all_keep[fast] = chars, keep
    for i in np.flatnonzero(~fast).tolist():  # what the fast path leaves: Python writes it
        text = f"{float(values[i]):.6g}".encode()
        all_chars[i, : len(text)], all_keep[i, : len(text)] = np.frombuffer(text, dtype=np.uint8), True
    return all_chars, all_keep


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
    return np.concatenate([c for c, _ in columns], axis=1)[np.concatenate([k for _, k in columns], axis=1)].tobytes()
