"""The simulator's model over a batch of genomes, compiled with numba.

Same semantics as the event-by-event reference in :mod:`autoplace.measure.simulator`
(``tests/measure/test_batch_agrees.py`` checks they agree on random placements of every
bundled profile); one placement costs microseconds. The kernel reads only the compiled
space's arrays (:class:`~autoplace.space.SearchSpace`); routes are looked up (and found on
first use) before it runs. The first call compiles the kernel, or loads it from numba's
on-disk cache (``__pycache__``).
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from autoplace.measure.blocks import run_blocks
from autoplace.measure.energy import inference_energy
from autoplace.measure.peaks import peaks, scratch
from autoplace.space import Placement, SearchSpace

SHIFTS_PER_ITEM = 8  # insertion sort's budget per item before the run merge takes over
# (read at each call; -1 always merges)


@dataclass(frozen=True)
class BatchOutput:
    """Per row: ``latency`` (makespan), ``period`` (steady-state time per inference of a
    stream, :func:`_row_figures`), ``copy_bytes[B, modes]``, ``no_route`` (a copy with no
    route), ``not_contiguous`` (the block model: a block unit's ops are not one contiguous
    block, or blocks wait for each other; such a row's latency is inf), ``over`` (a scope's
    peak over its capacity) and ``stream_over`` (the same with a stream's buffers doubled,
    :func:`streaming_peak`). Per unit and scope, unless ``per_unit=False`` was asked (then
    None): ``busy[B, units]``, ``peak[B, scopes]`` (activations at their peak, plus weights
    and graph inputs and outputs, which are held for the whole run), ``weights[B, scopes]``
    (the weights among them), ``energy``. ``finish[B, ops]`` (each op's end) when asked
    for. Graph inputs and outputs (``io`` bytes) are in the default scope."""

    latency: np.ndarray
    busy: np.ndarray | None
    copy_bytes: np.ndarray
    peak: np.ndarray | None
    weights: np.ndarray | None
    io: float
    energy: np.ndarray | None
    no_route: np.ndarray
    not_contiguous: np.ndarray
    period: np.ndarray
    over: np.ndarray
    stream_over: np.ndarray
    finish: np.ndarray | None = None


def simulate_batch(space: SearchSpace, choice: np.ndarray, mode: np.ndarray, *,
                   prefix: int | None = None, finish: bool = False,
                   plan: tuple | None = None, per_unit: bool = True) -> BatchOutput:
    """Simulate ``B`` genomes (``choice[B, ops]``, ``mode[B, edges]``; modes are repaired as
    :meth:`SearchSpace.normalize` does).

    ``prefix=k`` simulates only ops ``[0, k)`` and the copies into them; an output read
    only by later ops is then freed at its producer's end (branch and bound's prefixes).
    ``finish=True`` also returns each op's end time. ``plan``: the rows'
    :meth:`SearchSpace.copy_plan`, if the caller has it already. ``per_unit=False`` leaves
    out the figures per unit and scope (:class:`BatchOutput`): what the search ranks and
    filters by then costs per row what the row's ops and copies do, not what the units of
    the profile do (thousands on a mesh).
    """
    choice = np.ascontiguousarray(choice, dtype=np.int64)
    if choice.ndim != 2 or choice.shape[1] != space.n_ops:
        raise ValueError(f"choice must have shape (B, {space.n_ops}), got {choice.shape}")
    cross, used, rid = space.copy_plan(choice, mode) if plan is None else plan
    n = space.n_ops if prefix is None else int(prefix)
    io = float(space.io_bytes[:n].sum())
    if space.profile.blocks:
        out = _blocks(space, choice, cross, used, rid, n, finish, io)
    else:
        out = _rows_in_parallel(space, choice, cross, used, rid, n, finish, io, per_unit)
    latency, load, copy_bytes, peak, no_route, ends, weights, figures, not_contiguous = out
    period, over, stream_over = figures
    common = dict(latency=latency, copy_bytes=copy_bytes, io=io, no_route=no_route,
                  not_contiguous=not_contiguous, period=period, over=over,
                  stream_over=stream_over, finish=ends if finish else None)
    if not per_unit:
        return BatchOutput(busy=None, peak=None, weights=None, energy=None, **common)
    peak += weights
    peak[:, space.default_scope] += io
    busy = load[:, :len(space.units)]
    return BatchOutput(busy=busy, peak=peak, weights=weights,
                       energy=inference_energy(space, choice, cross, rid, busy, latency),
                       **common)


def _rows_in_parallel(space: SearchSpace, choice, cross, used, rid, n: int, finish: bool,
                      io: float, per_unit: bool) -> tuple:
    """:func:`_run` over the rows, in a slice per CPU this process may use when the batch
    has :data:`PARALLEL_ROWS` rows or more (the kernel releases the GIL; rows are
    independent, so the output is the same as one call's)."""
    r = space.routes
    args = (space.src, space.nbytes, space.in_ptr, space.in_idx, space.has_consumers,
            space.out_bytes, r.length, r.hop_res, r.hop_lat, r.hop_bw, r.hop_dst,
            space.n_resources, len(space.scopes), n, finish, space.c_wscope,
            space.weight_bytes, space.default_scope, SHIFTS_PER_ITEM, space.transfer_s, r.lat,
            r.inv, _limits(space, io), per_unit, space.slot_ptr, space.slot_idx,
            space.n_slots, space.handover)
    slices = _slices(len(choice))
    if len(slices) == 1:
        return _run(space.c_unit, space.c_scope, space.c_dur, choice, cross, used, rid, *args)
    parts = list(_pool().map(
        lambda sl: _run(space.c_unit, space.c_scope, space.c_dur, choice[sl], cross[sl],
                        used[sl], rid[sl], *args), slices))
    return tuple(_joined([p[k] for p in parts], per_row=(k != 5 or finish)
                         and (k not in (1, 3, 6) or per_unit)) for k in range(9))


#: rows from which a batch is simulated in slices over the CPUs (below, one call is faster)
PARALLEL_ROWS = 256


def _slices(rows: int) -> list[slice]:
    cpus = _cpus()
    if rows < PARALLEL_ROWS or cpus == 1:
        return [slice(0, rows)]
    bounds = np.linspace(0, rows, cpus + 1).astype(int)
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _joined(parts: list, per_row: bool):
    """One output of the slices' calls: rows concatenated (a tuple of them element by
    element), or the first slice's where it is a scratch row, not one per row."""
    if isinstance(parts[0], tuple):
        return tuple(_joined(list(p), per_row) for p in zip(*parts))
    return np.concatenate(parts) if per_row else parts[0]


@functools.cache
def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=_cpus(), thread_name_prefix="autoplace-batch")


def _limits(space: SearchSpace, io: float) -> tuple:
    """What a row's period and fit are judged by (see :func:`_row_figures`)."""
    return (space.capacity, io, space.default_scope, space.parallel, space.cores,
            bool(space.parallel.any()), bool(space.cores.any()))


def _blocks(space: SearchSpace, choice, cross, used, rid, n: int, finish: bool,
            io: float) -> tuple:
    """:func:`_run`'s output for a block-model profile (always per unit: such profiles
    are small), from :func:`~autoplace.measure.blocks.run_blocks`."""
    *out, not_contiguous = run_blocks(space, choice, cross, used, rid, n, finish)
    latency, busy, copy_bytes, peak, no_route, ends, weights = out
    load = np.pad(busy, ((0, 0), (0, space.n_resources - busy.shape[1])))  # DMA: never busy
    figures = _dense_figures(load, peak, weights, choice, space.c_unit, space.c_dur, n,
                             _limits(space, io))
    return latency, load, copy_bytes, peak, no_route, ends, weights, figures, not_contiguous


def fits(space: SearchSpace, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """Per genome, whether every scope's peak fits its capacity, every copy has a route and
    (block model) every block unit's ops are one contiguous block: what no measurer would
    fail before building it."""
    if not len(choice):
        return np.zeros(0, dtype=bool)
    return fitting(space, simulate_batch(space, choice, mode, per_unit=False))


def random_feasible(space: SearchSpace, n: int, rng: np.random.Generator, *,
                    batches: int = 1000) -> list[Placement]:
    """``n`` uniformly random placements that fit (:func:`fits`), drawn 32 genomes at a
    time from ``rng``; a ValueError when ``batches`` draws find fewer."""
    chosen: list[Placement] = []
    for _ in range(batches):
        choice, mode = space.random_genomes(32, rng)
        ok = fits(space, choice, mode)
        chosen += space.decode_rows(choice[ok], mode[ok])[:n - len(chosen)]
        if len(chosen) == n:
            return chosen
    raise ValueError(f"{space.graph.name}: found {len(chosen)} of {n} random placements "
                     f"that fit profile {space.profile.name!r}")


def fitting(space: SearchSpace, out: BatchOutput) -> np.ndarray:
    """Per row of a batch output, whether it fits (see :func:`fits`)."""
    return ~out.over & ~out.no_route & ~out.not_contiguous


def streaming_peak(out: BatchOutput) -> np.ndarray:
    """Per row and scope, the peak of a stream of inputs: what the scope holds for the
    whole run (weights) once, every other buffer twice (double-buffered: one inference's
    activations, inputs and outputs are written while the previous one's are read)."""
    return 2.0 * out.peak - out.weights


def streams(space: SearchSpace, out: BatchOutput) -> np.ndarray:
    """Per row, whether it fits (:func:`fitting`) with its buffers doubled for a stream
    (:func:`streaming_peak`): the rows whose ``period`` is a throughput they can reach."""
    return fitting(space, out) & ~out.stream_over


@numba.njit(cache=True, nogil=True)
def _run(c_unit, c_scope, c_dur, choice, cross, used, rid, src, nbytes, in_ptr, in_idx,
         has_consumers, out_bytes, r_len, hop_res, hop_lat, hop_bw, hop_dst, n_res,
         n_scopes, n, want_finish, c_wscope, weight_bytes, default,
         shifts, transfer, r_lat, r_inv, limits, per_unit, slot_ptr, slot_idx,
         n_slots, handover):  # pragma: no cover
    """The schedule of docs/simulator.md, row by row. Every op and copy hop is a work item
    on one resource that writes one buffer; an item's buffer is freed by the end of another
    item (``freer``; -1: at the makespan). Each resource runs its items in program order,
    so their starts and ends are sorted per resource, which :func:`peaks` relies on. A graph
    output written in the default scope is the result buffer held there for the whole run
    (counted with the graph inputs), not an activation. Without ``per_unit``, a row's
    figures per resource and scope are made in one scratch row, cleared where it wrote.
    A unit pinned to CPUs (``slot_ptr``/``slot_idx``: its CPU slots) also waits until
    those CPUs are free of other units' work, and loads them (for the period). Work still
    waiting for work on another resource when its own resource is free starts ``handover``
    (its resource's) after that work ends (:func:`_start`)."""
    B = choice.shape[0]
    parallel = limits[3]
    m_items = n + len(src) * hop_res.shape[1]
    latency, no_route = np.zeros(B), np.zeros(B, dtype=np.bool_)
    rows = B if per_unit else 1
    busy, copy_bytes = np.zeros((rows, n_res)), np.zeros((B, 2))
    peak, ends = np.zeros((rows, n_scopes)), np.zeros((B if want_finish else 1, n))
    weights = np.zeros((rows, n_scopes))  # held for the whole run, by scope
    figures = np.zeros(B), np.zeros(B, dtype=np.bool_), np.zeros(B, dtype=np.bool_)
    every = np.arange(n_res), np.arange(n_scopes)
    free_t, stamp = np.zeros(n_res), np.full(n_res, -1)
    finish, last_use = np.zeros(n), np.zeros(n)
    op_item, last_item = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    it_res, freer = np.zeros(m_items, dtype=np.int64), np.zeros(m_items, dtype=np.int64)
    it_start, it_end = np.zeros(m_items), np.zeros(m_items)
    b_scope, b_bytes = np.zeros(m_items, dtype=np.int64), np.zeros(m_items)
    staged = np.zeros(max(len(src), 1), dtype=np.int64)
    work = scratch(m_items, n_res, n_scopes)
    width = max(n_slots, 1)
    slots = np.zeros(width), np.full(width, -1), np.zeros(width), np.zeros(width, dtype=np.int64)
    for b in range(B):
        nb, rb = 0, b if per_unit else 0
        slots[2][:] = 0.0
        for i in range(n):
            j = choice[b, i]
            s, u = c_scope[i, j], c_unit[i, j]
            own, other, n_staged = 0.0, 0.0, 0
            for q in range(in_ptr[i], in_ptr[i + 1]):
                k = in_idx[q]
                p = src[k]
                arrive, at = finish[p], c_unit[p, choice[b, p]]
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
                        mine = free_t[res] if stamp[res] == b else 0.0
                        mine, theirs = (max(mine, arrive), 0.0) if at == res else (mine, arrive)
                        start = _start(mine, theirs, res, handover[res], slot_ptr, slot_idx,
                                       slots, b, secs)
                        arrive, at = start + secs, res
                        free_t[res], stamp[res] = arrive, b
                        busy[rb, res] += secs  # the host unit for a sync copy
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
                if at == u:
                    own = max(own, arrive)
                else:
                    other = max(other, arrive)
            own = max(own, free_t[u] if stamp[u] == b and not parallel[u] else 0.0)
            start = _start(own, other, u, handover[u], slot_ptr, slot_idx, slots, b,
                           c_dur[i, j])
            end = start + c_dur[i, j]
            free_t[u], stamp[u] = end, b
            busy[rb, u] += c_dur[i, j]
            weights[rb, c_wscope[i, j]] += weight_bytes[i]
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
        peaks(it_res, it_start, it_end, freer, b_scope, b_bytes, nb, makespan, work, peak[rb],
              shifts)
        # what the row wrote: its items' resources and scopes, its weights' scopes; or every
        # resource or scope, where there are fewer (the same figures, found faster)
        res, n_r = (every[0], n_res) if n_res <= nb else (it_res, nb)
        scopes, n_s, w_too = (every[1], n_scopes, False) if n_scopes <= nb + n \
            else (b_scope, nb, True)
        _row_figures(b, busy[rb], peak[rb], weights[rb], res, n_r, scopes, n_s, w_too,
                     choice[b], c_unit, c_wscope, c_dur, n, limits, figures)
        for x in range(n_slots):  # a CPU several units share is busy with all their work
            figures[0][b] = max(figures[0][b], slots[2][x])
        if not per_unit:
            _clear_row(busy[0], peak[0], weights[0], res, n_r, scopes, n_s, w_too, choice[b],
                       c_wscope, n)
        if want_finish:
            ends[b] = finish[:n]
    return (latency, busy, copy_bytes, peak, no_route, ends, weights, figures,
            np.zeros(B, dtype=np.bool_))


@numba.njit(cache=True, nogil=True, inline="always")
def _start(own, other, res, wait, slot_ptr, slot_idx, slots, b,
           secs):  # pragma: no cover
    """When work of ``secs`` on resource ``res`` starts: once its own resource's work
    (``own``) and other resources' (``other``) has ended, and the CPUs it is pinned to are
    free; ``wait`` after the last of other resources' work if the resource waited for it.
    It then holds its CPUs (``slots``: free time, row stamp, load, holder)."""
    free, stamp, load, holder = slots
    for q in range(slot_ptr[res], slot_ptr[res + 1]):
        x = slot_idx[q]
        if stamp[x] == b and holder[x] == res:
            own = max(own, free[x])
        elif stamp[x] == b:
            other = max(other, free[x])
    start = own if other <= own else other + wait
    for q in range(slot_ptr[res], slot_ptr[res + 1]):
        x = slot_idx[q]
        free[x], stamp[x], holder[x] = start + secs, b, res
        load[x] += secs
    return start


@numba.njit(cache=True, nogil=True)
def _row_figures(b, load, peak, weights, resources, n_resources, scopes, n_scopes, w_too,
                 row, c_unit, c_wscope, c_dur, n, limits,
                 figures):  # pragma: no cover - compiled
    """Row ``b``'s ``period``, ``over`` and ``stream_over`` (``figures``) from its ``load``
    per resource, its ``peak`` (activations) and ``weights`` per scope, of which only the
    first ``n_resources`` of ``resources`` and ``n_scopes`` of ``scopes`` (and, ``w_too``,
    the scopes of its weights), and the default scope may be nonzero. The period of a
    stream is the busiest resource's work per inference (a unit's ops and sync copies, a
    DMA engine's hops; a pool of cores: its work over them), or a ``parallel`` unit's
    longest op (docs/simulator.md, "Throughput"); a scope is over when its peak, with the
    graph's inputs and outputs (``io``) in the default scope, is over its capacity (a
    stream: all but weights twice)."""
    capacity, io, default, parallel, cores, any_parallel, any_cores = limits
    serial, pooled, longest = 0.0, 0.0, 0.0
    for x in range(n_resources):
        r = resources[x]
        if not parallel[r]:
            serial = max(serial, load[r])
        if cores[r] > 0:
            pooled = max(pooled, load[r] / max(cores[r], 1.0))
    for i in range(n if any_parallel else 0):
        if parallel[c_unit[i, row[i]]]:
            longest = max(longest, c_dur[i, row[i]])
    period = serial if not any_parallel else max(serial, longest) if not any_cores \
        else max(max(serial, pooled), longest)
    over, stream_over = _over(default, peak, weights, capacity, io)
    for x in range(n_scopes + (n if w_too else 0)):
        s = scopes[x] if x < n_scopes else c_wscope[x - n_scopes, row[x - n_scopes]]
        o, so = _over(s, peak, weights, capacity, io if s == default else 0.0)
        over, stream_over = over or o, stream_over or so
    figures[0][b], figures[1][b], figures[2][b] = period, over, stream_over


@numba.njit(cache=True, nogil=True, inline="always")
def _over(s, peak, weights, capacity, io):  # pragma: no cover - compiled
    """Whether scope ``s`` holds more than its capacity, alone and in a stream (buffers
    but weights twice), counted in whole bytes as the capacity check counts."""
    held = peak[s] + weights[s] + io
    return (np.floor(held) > capacity[s],
            np.floor(2.0 * held - weights[s]) > capacity[s])


@numba.njit(cache=True, nogil=True)
def _clear_row(load, peak, weights, resources, n_resources, scopes, n_scopes, w_too, row,
               c_wscope, n):  # pragma: no cover - compiled
    """Zero what a row wrote in the scratch row (per_unit=False; as :func:`_row_figures`
    lists it)."""
    for x in range(n_resources):
        load[resources[x]] = 0.0
    for x in range(n_scopes):
        peak[scopes[x]], weights[scopes[x]] = 0.0, 0.0
    for i in range(n if w_too else 0):
        weights[c_wscope[i, row[i]]] = 0.0


@numba.njit(cache=True, nogil=True)
def _dense_figures(load, peak, weights, choice, c_unit, c_dur, n,
                   limits):  # pragma: no cover - compiled
    """:func:`_row_figures` of every row of dense figures (the block model's)."""
    B, n_res = load.shape
    resources, scopes = np.arange(n_res), np.arange(peak.shape[1])  # (every one listed)
    figures = np.zeros(B), np.zeros(B, dtype=np.bool_), np.zeros(B, dtype=np.bool_)
    for b in range(B):
        _row_figures(b, load[b], peak[b], weights[b], resources, n_res, scopes, len(scopes),
                     False, choice[b], c_unit, c_unit, c_dur, n, limits, figures)
    return figures


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
