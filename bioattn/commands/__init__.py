"""Subcommands of the ``bioattn`` command (one module per verb and target)."""
