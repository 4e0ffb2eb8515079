"""Fixtures of the runtime tests: one kernel-library cache for the session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory):
    """One kernel-library cache for the whole session (libraries compile once)."""
    return tmp_path_factory.mktemp("kernels")


@pytest.fixture(params=["native", "python"])
def loop(request, kernel_cache) -> bool:
    """Each runtime test of concurrency runs with the workers' loop in C and in Python
    (``Runtime(native=...)``); the C loop must have compiled where it is asked for."""
    native = request.param == "native"
    if native:
        from autoplace.runtime.native import native_library

        assert native_library(kernel_cache) is not None
    return native
