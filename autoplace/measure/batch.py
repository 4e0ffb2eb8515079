"""The simulator's model over a batch of genomes, compiled with numba.

Same semantics as the event-by-event reference in :mod:`autoplace.measure.simulator`
(``tests/measure/test_batch_agrees.py`` checks they agree on random placements of every
bundled profile); one placement costs microseconds. The kernel reads only the compiled
space's arrays (:class:`~autoplace.space.SearchSpace`); routes are looked up (and found on
first use) before it runs. The first call compiles the kernel, or loads it from numba's
on-disk cache (``__pycache__``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from autoplace.measure.blocks import run_blocks
from autoplace.space import SearchSpace

SHIFTS_PER_ITEM = 8  # insertion sort's budget per item before the run merge takes over
# (read at each call; -1 always merges)


@dataclass(frozen=True)
class BatchOutput:
    """Per row: ``latency`` (makespan), ``period`` (steady-state time per inference of a
    stream, :func:`_period`), ``busy[B, units]``, ``copy_bytes[B, modes]``,
    ``peak[B, scopes]`` (activations at their peak, plus weights and graph inputs and
    outputs, which are held for the whole run), ``weights[B, scopes]`` (the weights among
    them), ``energy``, ``no_route`` (a copy with no route), ``not_contiguous`` (the block
    model: a block unit's ops are not one contiguous block, or blocks wait for each other;
    such a row's latency is inf); ``finish[B, ops]`` (each op's end) when asked for. Graph
    inputs and outputs (``io`` bytes) are in the default scope."""

    latency: np.ndarray
    busy: np.ndarray
    copy_bytes: np.ndarray
    peak: np.ndarray
    weights: np.ndarray
    io: float
    energy: np.ndarray
    no_route: np.ndarray
    not_contiguous: np.ndarray
    period: np.ndarray
    finish: np.ndarray | None = None


def simulate_batch(space: SearchSpace, choice: np.ndarray, mode: np.ndarray, *,
                   prefix: int | None = None, finish: bool = False,
                   plan: tuple | None = None) -> BatchOutput:
    """Simulate ``B`` genomes (``choice[B, ops]``, ``mode[B, edges]``; modes are repaired as
    :meth:`SearchSpace.normalize` does).

    ``prefix=k`` simulates only ops ``[0, k)`` and the copies into them; an output read
    only by later ops is then freed at its producer's end (branch and bound's prefixes).
    ``finish=True`` also returns each op's end time. ``plan``: the rows'
    :meth:`SearchSpace.copy_plan`, if the caller has it already.
    """
    choice = np.ascontiguousarray(choice, dtype=np.int64)
    if choice.ndim != 2 or choice.shape[1] != space.n_ops:
        raise ValueError(f"choice must have shape (B, {space.n_ops}), got {choice.shape}")
    cross, used, rid = space.copy_plan(choice, mode) if plan is None else plan
    n = space.n_ops if prefix is None else int(prefix)
    r = space.routes
    if space.profile.blocks:
        *out, not_contiguous = run_blocks(space, choice, cross, used, rid, n, finish)
    else:
        not_contiguous = np.zeros(len(choice), dtype=bool)
        out = _run(space.c_unit, space.c_scope, space.c_dur, choice, cross, used, rid,
                   space.src, space.nbytes, space.in_ptr, space.in_idx, space.has_consumers,
                   space.out_bytes, r.length, r.hop_res, r.hop_lat, r.hop_bw, r.hop_dst,
                   space.n_resources, len(space.scopes), n,
                   finish, space.c_wscope, space.weight_bytes, space.default_scope,
                   SHIFTS_PER_ITEM, space.transfer_s, r.lat, r.inv, space.parallel)
    latency, load, copy_bytes, peak, no_route, ends, weights = out
    if load.shape[1] < space.n_resources:  # the block model: no DMA engine is ever busy
        load = np.pad(load, ((0, 0), (0, space.n_resources - load.shape[1])))
    io = float(space.io_bytes[:n].sum())
    peak += weights
    peak[:, space.default_scope] += io
    busy = load[:, :len(space.units)]
    return BatchOutput(latency=latency, busy=busy, copy_bytes=copy_bytes, peak=peak,
                       weights=weights, io=io,
                       energy=(busy * space.power).sum(axis=1), no_route=no_route,
                       not_contiguous=not_contiguous, period=_period(space, choice, load, n),
                       finish=ends if finish else None)


def _period(space: SearchSpace, choice: np.ndarray, load: np.ndarray, n: int) -> np.ndarray:
    """Per row, the steady-state time per inference of a stream of inputs: the busiest
    resource's work per inference (a unit's ops and sync copies, a DMA engine's hops), or
    a ``parallel`` unit's longest op (docs/simulator.md, "Throughput")."""
    serial = np.where(space.parallel, 0.0, load).max(axis=1, initial=0.0)
    if not space.parallel.any():
        return serial
    ops = np.arange(n)
    unit, dur = space.c_unit[ops, choice[:, :n]], space.c_dur[ops, choice[:, :n]]
    longest = np.where(space.parallel[unit], dur, 0.0).max(axis=1, initial=0.0)
    if not space.cores.any():
        return np.maximum(serial, longest)
    pooled = np.where(space.cores > 0, load / np.maximum(space.cores, 1.0), 0.0)
    return np.maximum(np.maximum(serial, pooled.max(axis=1, initial=0.0)), longest)


def fits(space: SearchSpace, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """Per genome, whether every scope's peak fits its capacity, every copy has a route and
    (block model) every block unit's ops are one contiguous block: what no measurer would
    fail before building it."""
    if not len(choice):
        return np.zeros(0, dtype=bool)
    return fitting(space, simulate_batch(space, choice, mode))


def fitting(space: SearchSpace, out: BatchOutput) -> np.ndarray:
    """Per row of a batch output, whether it fits (see :func:`fits`)."""
    over = np.floor(out.peak) > space.capacity  # as the capacity check counts
    return ~over.any(axis=1) & ~out.no_route & ~out.not_contiguous


def streaming_peak(out: BatchOutput) -> np.ndarray:
    """Per row and scope, the peak of a stream of inputs: what the scope holds for the
    whole run (weights) once, every other buffer twice (double-buffered: one inference's
    activations, inputs and outputs are written while the previous one's are read)."""
    return 2.0 * out.peak - out.weights


def streams(space: SearchSpace, out: BatchOutput) -> np.ndarray:
    """Per row, whether it fits (:func:`fitting`) with its buffers doubled for a stream
    (:func:`streaming_peak`): the rows whose ``period`` is a throughput they can reach."""
    over = np.floor(streaming_peak(out)) > space.capacity
    return fitting(space, out) & ~over.any(axis=1)


@numba.njit(cache=True, nogil=True)
def _run(c_unit, c_scope, c_dur, choice, cross, used, rid, src, nbytes, in_ptr, in_idx,
         has_consumers, out_bytes, r_len, hop_res, hop_lat, hop_bw, hop_dst, n_res,
         n_scopes, n, want_finish, c_wscope, weight_bytes, default,
         shifts, transfer, r_lat, r_inv, parallel):  # pragma: no cover
    """The schedule of docs/simulator.md, row by row. Every op and copy hop is a work item
    on one resource that writes one buffer; an item's buffer is freed by the end of another
    item (``freer``; -1: at the makespan). Each resource runs its items in program order,
    so their starts and ends are sorted per resource, which :func:`_peaks` relies on. A graph
    output written in the default scope is the result buffer held there for the whole run
    (counted with the graph inputs), not an activation."""
    B = choice.shape[0]
    m_items = n + len(src) * hop_res.shape[1]
    latency, no_route = np.zeros(B), np.zeros(B, dtype=np.bool_)
    busy, copy_bytes = np.zeros((B, n_res)), np.zeros((B, 2))
    peak, ends = np.zeros((B, n_scopes)), np.zeros((B if want_finish else 1, n))
    weights = np.zeros((B, n_scopes))  # held for the whole run, by scope
    free_t, stamp = np.zeros(n_res), np.full(n_res, -1)
    finish, last_use = np.zeros(n), np.zeros(n)
    op_item, last_item = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    it_res, freer = np.zeros(m_items, dtype=np.int64), np.zeros(m_items, dtype=np.int64)
    it_start, it_end = np.zeros(m_items), np.zeros(m_items)
    b_scope, b_bytes = np.zeros(m_items, dtype=np.int64), np.zeros(m_items)
    staged = np.zeros(max(len(src), 1), dtype=np.int64)
    work = _work(m_items, n_res, n_scopes)
    for b in range(B):
        nb = 0
        for i in range(n):
            j = choice[b, i]
            s = c_scope[i, j]
            ready, n_staged = 0.0, 0
            for q in range(in_ptr[i], in_ptr[i + 1]):
                k = in_idx[q]
                p = src[k]
                arrive = finish[p]
                if cross[b, k]:
                    r, m = rid[b, k], used[b, k]
                    no_route[b] |= r == 0
                    copy_bytes[b, m] += nbytes[k]
                    prev = -1
                    scale = _measured_scale(transfer[k], r_lat[r] + nbytes[k] * r_inv[r])
                    for h in range(r_len[r]):
                        res = hop_res[r, h]
                        secs = _hop_seconds(hop_lat[r, h], nbytes[k] / hop_bw[r, h], scale,
                                            transfer[k], r_len[r])
                        start = max(arrive, free_t[res] if stamp[res] == b else 0.0)
                        arrive = start + secs
                        free_t[res], stamp[res] = arrive, b
                        busy[b, res] += secs  # the host unit for a sync copy
                        if h == 0 and arrive > last_use[p]:
                            last_use[p], last_item[p] = arrive, nb
                        if prev >= 0:
                            freer[prev] = nb
                        it_res[nb], it_start[nb], it_end[nb] = res, start, arrive
                        b_scope[nb], b_bytes[nb] = hop_dst[r, h], nbytes[k]
                        prev, nb = nb, nb + 1
                    if prev >= 0:
                        staged[n_staged] = prev
                        n_staged += 1
                ready = max(ready, arrive)
            u = c_unit[i, j]
            start = max(ready, free_t[u] if stamp[u] == b and not parallel[u] else 0.0)
            end = start + c_dur[i, j]
            free_t[u], stamp[u] = end, b
            busy[b, u] += c_dur[i, j]
            weights[b, c_wscope[i, j]] += weight_bytes[i]
            finish[i], last_use[i], op_item[i], last_item[i] = end, end, nb, nb
            it_res[nb], it_start[nb], it_end[nb] = u, start, end
            b_scope[nb] = s
            b_bytes[nb] = 0.0 if s == default and not has_consumers[i] else out_bytes[i]
            nb += 1
            for q in range(in_ptr[i], in_ptr[i + 1]):
                p = src[in_idx[q]]
                if not cross[b, in_idx[q]] and end > last_use[p]:
                    last_use[p], last_item[p] = end, op_item[i]
            for x in range(n_staged):
                freer[staged[x]] = op_item[i]
        makespan = 0.0
        for i in range(n):
            makespan = max(makespan, finish[i])
            freer[op_item[i]] = last_item[i] if has_consumers[i] else -1
        latency[b] = makespan
        _peaks(it_res, it_start, it_end, freer, b_scope, b_bytes, nb, makespan, work, peak[b],
               shifts)
        if want_finish:
            ends[b] = finish[:n]
    return latency, busy, copy_bytes, peak, no_route, ends, weights


@numba.njit(cache=True, nogil=True, inline="always")
def _measured_scale(transfer, modelled):  # pragma: no cover - compiled
    """The factor on a copy's modelled hop times that makes them sum to its measured
    transfer time (NaN: none measured; -1: the modelled route takes no time)."""
    if np.isnan(transfer):
        return 1.0
    return transfer / modelled if modelled > 0 else -1.0


@numba.njit(cache=True, nogil=True, inline="always")
def _hop_seconds(latency, wire, scale, transfer, hops):  # pragma: no cover - compiled
    """One hop's time: modelled (latency + bytes / bandwidth), scaled to a measured
    transfer time (spread evenly where the modelled route takes none)."""
    return transfer / hops if scale < 0 else (latency + wire) * scale


@numba.njit(cache=True, nogil=True)
def _work(items, n_res, n_scopes):  # pragma: no cover - compiled
    """Scratch arrays of :func:`_peaks`, allocated once per batch: a slot per resource,
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
def _peaks(it_res, it_start, it_end, freer, b_scope, b_bytes, nb, makespan, w, peak,
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
    live[:] = 0.0
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
