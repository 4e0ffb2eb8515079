"""The copies of a batch of genomes: which edges cross scopes, in which mode, on which route.

Compiled with numba: looking up ``B x edges`` routes is the hot part of every simulated and
featurised batch. Routes not found yet are reported back and found by
:class:`~autoplace.space.routes.Routes` (then the lookup runs again).
"""

from __future__ import annotations

import numba
import numpy as np


def plan(space, choice: np.ndarray, mode: np.ndarray):
    """``(cross, used, rid)`` of a batch (see :meth:`SearchSpace.copy_plan`)."""
    choice = np.ascontiguousarray(choice, dtype=np.int64)
    mode = np.ascontiguousarray(mode, dtype=np.int64)
    routes = space.routes
    while True:
        out = _plan(space.c_scope, choice, mode, space.src, space.dst, routes.table,
                    routes.keys, routes.key_ids, len(space.scopes))
        cross, used, rid, missing = out
        if not missing.any():
            return cross, used, rid
        _learn(space, choice[missing], mode[missing])


def _learn(space, choice: np.ndarray, mode: np.ndarray) -> None:
    """Find the routes, in both modes, of the copies of genomes whose routes are missing."""
    scope = space.c_scope[np.arange(space.n_ops), choice]
    a, b = scope[:, space.src], scope[:, space.dst]
    cross = a != b
    for m in (mode, 1 - mode):
        space.routes.ids(a[cross], b[cross], np.asarray(m)[cross])


@numba.njit(cache=True, nogil=True, inline="always")
def find_key(keys, key):  # pragma: no cover - compiled
    """Position of ``key`` in the sorted ``keys``, -1 if absent: a binary search whose
    steps are selects, not branches (the comparisons are unpredictable)."""
    n, lo = len(keys), 0
    if n == 0:
        return -1
    while n > 1:
        half = n >> 1
        lo = lo + half if keys[lo + half] <= key else lo
        n -= half
    return lo if keys[lo] == key else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _searched(keys, key_ids, key):  # pragma: no cover - compiled
    """The route id of ``key`` in the sorted known ``keys`` (0: none), -1 if not known."""
    at = find_key(keys, key)
    return key_ids[at] if at >= 0 else -1


@numba.njit(cache=True, nogil=True)
def _plan(c_scope, choice, mode, src, dst, table, keys, key_ids,
          n_scopes):  # pragma: no cover
    B, E = mode.shape
    cross = np.zeros((B, E), dtype=np.bool_)
    used = np.zeros((B, E), dtype=np.int64)
    rid = np.zeros((B, E), dtype=np.int64)
    missing = np.zeros(B, dtype=np.bool_)
    scope = np.empty(c_scope.shape[0], dtype=np.int64)  # per op, of the row's choice
    dense = len(table) > 0  # route ids by key (-1: not known yet), else searched
    for b in range(B):
        for i in range(len(scope)):
            scope[i] = c_scope[i, choice[b, i]]
        for k in range(E):
            a, z = scope[src[k]], scope[dst[k]]
            if a == z:
                continue
            cross[b, k] = True
            m = mode[b, k]
            pair = (a * n_scopes + z) * 2
            want = table[pair + m] if dense else _searched(keys, key_ids, pair + m)
            if want > 0:  # the preferred mode has a route
                used[b, k], rid[b, k] = m, want
                continue
            other = table[pair + 1 - m] if dense else _searched(keys, key_ids, pair + 1 - m)
            if want < 0 or other < 0:
                missing[b] = True
            elif other > 0:
                used[b, k], rid[b, k] = 1 - m, other
            else:
                used[b, k] = m  # no route in either mode
    return cross, used, rid, missing
