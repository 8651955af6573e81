"""Per-step metric logging to ``train_log.csv`` and TensorBoard (rank 0 only)."""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from bioattn.errors import UserInputError
from bioattn.io import append_table_row, write_table

LOG_NAME = "train_log.csv"
TENSORBOARD_DIR = "tensorboard"
_FIXED_COLUMNS = ["step", "epoch", "phase"]


def read_log(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a ``train_log.csv`` (empty list when absent)."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _step_of(row: dict[str, str | None]) -> int | None:
    """The row's optimizer step, or ``None`` for a damaged row."""
    if row.get("phase") not in ("train", "eval") or None in row.values():
        return None
    try:
        return int(row["step"] or "")
    except ValueError:
        return None


class MetricLogger:
    """Append metric rows to ``run_dir/train_log.csv`` and scalars to ``run_dir/tensorboard``."""

    def __init__(self, run_dir: str | os.PathLike, resume_step: int | None = None) -> None:
        self.path = Path(run_dir) / LOG_NAME
        rows = read_log(self.path) if resume_step is not None else []
        self.rows = [r for r in rows if _step_of(r) is not None and _step_of(r) <= (resume_step or 0)]
        self.columns = list(_FIXED_COLUMNS)
        for row in self.rows:
            self.columns += [k for k in row if k not in self.columns]
        self._rewrite()
        purge = None if resume_step is None else resume_step + 1
        from torch.utils.tensorboard import SummaryWriter
        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / TENSORBOARD_DIR), purge_step=purge)

    def log(self, step: int, epoch: int, phase: str, metrics: dict[str, float]) -> None:
        row: dict[str, Any] = {"step": step, "epoch": epoch, "phase": phase, **metrics}
        self.rows.append(row)
        for name, value in metrics.items():
            self.writer.add_scalar(f"{phase}/{name}", value, step)
        new_columns = [k for k in row if k not in self.columns]
        if new_columns:
            self.columns += new_columns
            self._rewrite()
            return
        try:
            append_table_row(self.path, [row.get(column) for column in self.columns])
        except OSError as exc:
            raise UserInputError(f"{self.path}: cannot write the training log ({exc.strerror or exc})") from exc

    def _rewrite(self) -> None:
        try:
            write_table(self.path, self.columns, ([row.get(column) for column in self.columns] for row in self.rows))
        except OSError as exc:
            raise UserInputError(f"{self.path}: cannot write the training log ({exc.strerror or exc})") from exc

    def close(self) -> None:
        self.writer.close()
