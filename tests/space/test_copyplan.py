"""The copy plan's route lookup: a branch-free binary search over the known route keys."""

from __future__ import annotations

import numpy as np
import pytest

from autoplace.space.copyplan import find_key


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 12, 64, 545])
def test_find_gives_the_position_of_a_present_key_and_minus_one_otherwise(size):
    rng = np.random.default_rng(size)
    keys = np.unique(rng.integers(0, 4 * size + 2, size) * 2)[:size]  # even keys only
    for key in range(-3, 8 * size + 8):
        want = int(np.searchsorted(keys, key))
        want = want if want < len(keys) and keys[want] == key else -1
        assert find_key(keys, key) == want, (keys, key)
