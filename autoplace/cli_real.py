"""Subcommands and measurers of the real side: compile, run, serve, calibrate (issue 3)."""

from __future__ import annotations


def register(sub) -> None:
    """Add the real-side subcommands to the ``autoplace`` parser."""


def real_measurer(args, graph, profile, space):
    """The local or RPC measurer named by ``--measurer``."""
    raise ValueError(f"--measurer {args.measurer}: not available yet; use --measurer simulator")
