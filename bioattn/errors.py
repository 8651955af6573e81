"""Errors a user can fix: bad files, bad records, bad arguments.

Raising :class:`UserInputError` anywhere under a recipe or the ``bioattn`` command prints one line
(``error: <message>``) and exits with status 2, without a traceback. The message must name the file,
the record (id or line) and the problem.
"""
from __future__ import annotations


class UserInputError(ValueError):
    """An input problem the user can fix (bad file, bad record, bad option)."""

    exit_code = 2
