"""The batch simulator's peak-memory sweep: live bytes per scope over one row's schedule.

Split from :mod:`autoplace.measure.batch` (its only user) to keep each part small: the
kernel there lays out a row's work items (a resource, a start and an end, the buffer each
writes and the item that frees it); :func:`peaks` sweeps them in time order.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def scratch(items, n_res, n_scopes):  # pragma: no cover - compiled
    """Scratch arrays of :func:`peaks`, allocated once per batch: a slot per resource,
    per item rows for run bounds, two merge buffers, two orders, free counts and lists,
    and per scope the live bytes."""
    ints = np.empty((9, items + 2), dtype=np.int64)
    return np.full(n_res, -1), ints, np.zeros(n_scopes)


@numba.njit(cache=True, nogil=True)
def _insertion_sort(times, nb, order, budget):  # pragma: no cover - compiled
    """``order[:nb]``: the items by ``times``, ties in creation order, if that takes at
    most ``budget`` shifts (False otherwise). Items are created in program order, which
    their times mostly follow, so this is linear in practice and its branches predictable;
    past the budget, :func:`_merge` bounds the cost."""
    for x in range(nb):
        t, y = times[x], x
        while y > 0 and times[order[y - 1]] > t:
            order[y] = order[y - 1]
            y -= 1
        order[y] = x
        budget -= x - y
        if budget < 0:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _runs(it_res, nb, w):  # pragma: no cover - compiled
    """Bucket the items by resource, keeping creation order: ``w[1][2][:nb]`` holds the
    runs, ``w[1][0][:runs + 1]`` their bounds; returns the number of runs."""
    slot, bounds, fill, runs = w[0], w[1][0], w[1][1], w[1][2]
    n_runs = 0
    for x in range(nb):
        r = it_res[x]
        if slot[r] < 0:
            slot[r] = n_runs
            bounds[n_runs + 1] = 0
            n_runs += 1
        bounds[slot[r] + 1] += 1
    bounds[0] = 0
    for x in range(n_runs):
        bounds[x + 1] += bounds[x]
    fill[:n_runs] = bounds[:n_runs]
    for x in range(nb):
        r = slot[it_res[x]]
        runs[fill[r]] = x
        fill[r] += 1
    for x in range(nb):
        slot[it_res[x]] = -1
    return n_runs


@numba.njit(cache=True, nogil=True)
def _merge(times, nb, n_runs, w, order):  # pragma: no cover - compiled
    """The items of :func:`_runs` in order of ``times``, given that each run's times are
    nondecreasing: runs merged pairwise, ``log2(runs)`` linear passes."""
    bounds, buf = w[1][3], w[1][4]
    bounds[:n_runs + 1] = w[1][0][:n_runs + 1]
    order[:nb] = w[1][2][:nb]
    src, dst, in_order = order, buf, True
    while n_runs > 1:
        out = 0
        for q in range(0, n_runs, 2):
            lo, mid = bounds[q], bounds[q + 1]
            hi = bounds[q + 2] if q + 1 < n_runs else mid
            _merge_two(times, src, dst, lo, mid, hi)
            bounds[out] = lo
            out += 1
        bounds[out] = nb
        n_runs = out
        src, dst, in_order = dst, src, not in_order
    if not in_order:
        order[:nb] = src[:nb]


@numba.njit(cache=True, nogil=True, inline="always")
def _merge_two(times, src, dst, lo, mid, hi):  # pragma: no cover - compiled
    """Merge the sorted runs ``src[lo:mid]`` and ``src[mid:hi]`` into ``dst[lo:hi]``."""
    i, j = lo, mid
    for k in range(lo, hi):
        if j >= hi or (i < mid and times[src[i]] <= times[src[j]]):
            dst[k] = src[i]
            i += 1
        else:
            dst[k] = src[j]
            j += 1


@numba.njit(cache=True, nogil=True)
def peaks(it_res, it_start, it_end, freer, b_scope, b_bytes, nb, makespan, w, peak,
          shifts):  # pragma: no cover - compiled
    """Peak live bytes per scope: buffers allocated in order of their item's start, freed
    in order of their freeing item's end (graph outputs at the makespan); at equal times
    frees come first, so a buffer freed at t is reusable by one allocated at t."""
    allocs, ends, first, nxt = w[1][5], w[1][6], w[1][7], w[1][8]
    budget = shifts * nb
    if not (_insertion_sort(it_start, nb, allocs, budget)
            and _insertion_sort(it_end, nb, ends, budget)):
        n_runs = _runs(it_res, nb, w)
        _merge(it_start, nb, n_runs, w, allocs)
        _merge(it_end, nb, n_runs, w, ends)
    first[:nb + 1] = -1  # buffers each item frees, as linked lists; item nb: the makespan
    for x in range(nb):
        f = freer[x] if freer[x] >= 0 else nb
        nxt[x], first[f] = first[f], x
    live = w[2]
    if len(live) <= nb:
        live[:] = 0.0
    else:  # the scopes this row writes, where there are fewer (a mesh has thousands)
        for x in range(nb):
            live[b_scope[x]] = 0.0
    e = 0  # position in ``ends``; nb: the makespan's frees
    for y in range(nb):
        a = allocs[y]
        t = it_start[a]
        while e <= nb and (it_end[ends[e]] if e < nb else makespan) <= t:
            z = first[ends[e] if e < nb else nb]
            while z >= 0:
                live[b_scope[z]] -= b_bytes[z]
                z = nxt[z]
            e += 1
        s = b_scope[a]
        live[s] += b_bytes[a]
        if live[s] > peak[s]:
            peak[s] = live[s]
