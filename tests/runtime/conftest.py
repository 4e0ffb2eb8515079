"""Fixtures of the runtime tests: one kernel-library cache for the session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory):
    """One kernel-library cache for the whole session (libraries compile once)."""
    return tmp_path_factory.mktemp("kernels")
