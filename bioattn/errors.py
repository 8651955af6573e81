"""Errors the ``bioattn`` command reports in one line, without a traceback.

Two kinds, kept apart because they call for different fixes:

- :class:`UserInputError`: an input problem the user can fix (bad file, bad record, bad option). The message
  names the file, the record (id or line) and the problem. Exit status 2.
- :class:`TrainingDivergedError`: the inputs were fine but the optimisation failed (the loss or gradient
  became NaN/inf). The message says which step, what was kept and what to try. Exit status 3.

Anything else (a programmer error) keeps its traceback.
"""
from __future__ import annotations


class ReportedError(Exception):
    """Base of the errors printed as one ``error:`` line; ``exit_code`` is the command's exit status."""

    exit_code = 1


class UserInputError(ReportedError, ValueError):
    """An input problem the user can fix (bad file, bad record, bad option)."""

    exit_code = 2


class TrainingDivergedError(ReportedError, ArithmeticError):
    """Training stopped because the loss or gradient norm became NaN/inf (not an input problem)."""

    exit_code = 3
