"""Fixtures shared by the real measurers' tests (TVM is imported only when they are used)."""

import pytest


@pytest.fixture(scope="module")
def soc():
    from autoplace.profile_io import load_profile

    return load_profile("soc")


@pytest.fixture(scope="module")
def seed():
    """The first seed thread's TE graph as (Relax module, op graph)."""
    from autoplace.frontend.te import from_te, seed_example

    return from_te(*seed_example(), "seed_te")
