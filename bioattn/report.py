"""The one table formatter for results on the terminal and in ``summary.md``."""
from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

MISSING = "—"


def format_value(value: Any, digits: int = 3, *, scale: float = 1.0) -> str:
    """A float as ``f"{value * scale:.{digits}f}"``; None or NaN as ``—``; anything else as ``str``."""
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return MISSING
    if isinstance(value, numbers.Real) and not isinstance(value, (numbers.Integral, bool)):
        return f"{float(value) * scale:.{digits}f}"
    return str(value)


def format_mean_sd(summary: Mapping[str, float] | None, digits: int = 3, *, scale: float = 1.0) -> str:
    """``{"mean", "sd", "n"}`` (from :func:`bioattn.metrics.mean_std`) → ``"0.702 ± 0.004 (n=3)"``."""
    if not summary:
        return MISSING
    text = f"{summary['mean'] * scale:.{digits}f} ± {summary['sd'] * scale:.{digits}f}"
    return text + (f" (n={summary['n']})" if "n" in summary else "")


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 3,
                 title: str | None = None) -> str:
    """A Markdown table (``| a | b |``); float cells go through :func:`format_value` with ``digits``."""
    lines = [title, ""] if title else []
    lines.append("| " + " | ".join(str(h) for h in header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row has {len(row)} cells, header has {len(header)}: {row!r}")
        lines.append("| " + " | ".join(format_value(cell, digits) if not isinstance(cell, str) else cell
                                       for cell in row) + " |")
    return "\n".join(lines)
