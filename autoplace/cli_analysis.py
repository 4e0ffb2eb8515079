"""Subcommands of log analysis: report (issue 5)."""

from __future__ import annotations


def register(sub) -> None:
    """Add the analysis subcommands to the ``autoplace`` parser."""
