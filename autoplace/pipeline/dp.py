"""The optimum of the stage model: a dynamic program over contiguous splits x PE counts.

PEs are counted, never labelled (Tarnawski et al., NeurIPS 2020; Piper, NeurIPS 2021). For a
period ``tau``, :func:`_fewest` finds the fewest PEs of a pipeline whose every stage has
period <= tau (every stage's least ``k``: its compute falls and its communication grows with
``k``, so the least ``k`` whose compute is within ``tau`` and whose PEs hold the stage is the
only one to try). :func:`least_period` bisects ``tau`` for a PE budget: exact to a relative
:data:`TOLERANCE`. :func:`best_pipeline` maximises throughput over replication: each budget
``m`` gives ``P // m`` copies of the pipeline, and budgets whose upper bound cannot beat the
best found are skipped (the bound: :func:`work_bound`). Every op runs on its default unit
(:class:`StageCosts`): the program is exact for that; which ops do better on another unit
is the search's (:mod:`autoplace.pipeline.search`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.extending import overload

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate

#: relative gap between the period found and the least possible at which bisection stops
TOLERANCE = 1e-9
_NONE = np.iinfo(np.int64).max // 4


def fewest_pes(costs: StageCosts, tau: float) -> PipelinePlan | None:
    """The pipeline with the fewest PEs whose every stage has period <= ``tau``; None if
    there is none (an op too slow, or too big for ``K`` PEs' memory)."""
    m = costs.machine
    S_busy = costs.S_busy[0] if costs.R == 1 else costs.S_busy  # see _busiest
    f, back_i, back_k = _fewest(tau, S_busy, costs.S_rotation, costs.S_weights,
                                costs.cut, costs.S_io, costs.working, costs.resource,
                                float(m.memory_bytes), m.link_bps, m.link_s, m.uplink_bps,
                                m.uplink_s)
    if f[-1] >= _NONE:
        return None
    stages, j = [], costs.n
    while j > 0:
        stages.append(Stage(int(back_i[j]), j, int(back_k[j])))
        j = int(back_i[j])
    return PipelinePlan(stages=tuple(reversed(stages)))


def least_period(costs: StageCosts, budget: int, *, at_least: float = 0.0,
                 fewest: PipelinePlan | None = None) -> PipelinePlan | None:
    """The pipeline of at most ``budget`` PEs with the least period (to :data:`TOLERANCE`);
    None if no pipeline fits in that many. ``at_least``: a period known not to be beaten
    (that of a larger budget), where the search starts; ``fewest``: the pipeline of the
    fewest PEs (``fewest_pes(costs, inf)``), if the caller has it."""
    fewest = fewest_pes(costs, math.inf) if fewest is None else fewest
    if fewest is None or fewest.pes > budget:
        return None
    # the slowest op, split all it can be on its default unit, bounds every period from below
    lo = max(float(costs.secs[-1].max()), at_least) * (1 - 1e-12)
    top, hi = evaluate(fewest, costs).period_s, lo  # the fewest PEs' period: enough
    while (best := fewest_pes(costs, hi)) is None or best.pes > budget:
        if hi >= top:
            best = fewest
            break
        hi = min(max(2 * hi, top * 1e-9), top)
    hi = evaluate(best, costs).period_s
    while hi > lo * (1 + TOLERANCE):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
        plan = fewest_pes(costs, mid)
        if plan is not None and plan.pes <= budget:
            best, hi = plan, evaluate(plan, costs).period_s
        else:
            lo = mid
    return best


def work_bound(costs: StageCosts) -> float:
    """Seconds per inference of one PE at least, busy with useful work: when it runs one op
    at a time, the sum of every op's least PE-seconds over its splits and units (``k``
    slices take ``k`` times a slice's time); with overlapping units, the least ``T`` such
    that every op can be given to units (fractionally), each unit's share of its least
    unit-seconds within ``T`` (a linear program). ``P`` PEs take ``1/P`` of it at least."""
    d = np.arange(1, costs.K + 1)[None, :, None]
    least = (costs.unit_secs * d).min(axis=1)  # [U, n] unit-seconds, inf: not run there
    if costs.R == 1:
        return float(least.min(axis=0).sum())
    from scipy import optimize, sparse  # only here: 0.2 s to import

    u_of, o_of = np.nonzero(np.isfinite(least))
    nvar = len(u_of) + 1  # x[u, o] for every unit that runs the op, then T
    c = np.zeros(nvar)
    c[-1] = 1.0
    rows = np.arange(len(u_of))
    A_ub = sparse.coo_array((np.concatenate([least[u_of, o_of], -np.ones(costs.U)]),
                             (np.concatenate([u_of, np.arange(costs.U)]),
                              np.concatenate([rows, np.full(costs.U, nvar - 1)]))),
                            shape=(costs.U, nvar))
    A_eq = sparse.coo_array((np.ones(len(u_of)), (o_of, rows)), shape=(costs.n, nvar))
    res = optimize.linprog(c, A_ub=A_ub.tocsr(), b_ub=np.zeros(costs.U), A_eq=A_eq.tocsr(),
                           b_eq=np.ones(costs.n), bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"the work bound's linear program failed: {res.message}")
    return float(res.fun) * (1 - 1e-7)  # below the solver's tolerance: still a bound


def slowest_op(costs: StageCosts) -> float:
    """No period beats the slowest op split fully on the unit that runs it fastest."""
    return float(costs.unit_secs[:, -1, :].min(axis=0).max())


def throughput_bound(costs: StageCosts, pes: int) -> float:
    """Inferences per second no plan on ``pes`` PEs beats: all of them busy with useful
    work (:func:`work_bound`), and no pipeline faster than :func:`slowest_op`."""
    return min(pes / work_bound(costs), pes / slowest_op(costs))


def best_pipeline(costs: StageCosts, pes: int | None = None) -> PipelinePlan | None:
    """The plan of the most throughput on ``pes`` PEs (default: the whole mesh): a pipeline
    of the least period for each budget ``m``, replicated ``pes // m`` times; budgets that
    cannot beat the best so far (``pes // m`` over the bound on a pipeline's period) are not
    solved. None if no pipeline fits."""
    pes = costs.machine.size if pes is None else pes
    fewest = fewest_pes(costs, math.inf)
    if fewest is None or fewest.pes > pes:
        return None
    work, slowest = work_bound(costs), float(costs.secs[-1].max())
    best, best_thr, floor = None, 0.0, 0.0  # floor: the least period of a larger budget
    for m in sorted({pes // r for r in range(1, pes // fewest.pes + 1)}, reverse=True):
        if (pes // m) / max(work / m, slowest, floor) <= best_thr * (1 + TOLERANCE):
            continue  # cannot beat the best: a smaller budget's period is no less
        plan = least_period(costs, m, at_least=floor, fewest=fewest)
        floor = evaluate(plan, costs).period_s
        if (pes // m) / floor > best_thr:
            best, best_thr = PipelinePlan(stages=plan.stages, replicas=pes // m), \
                (pes // m) / floor
    return best


@numba.njit(cache=True, nogil=True)
def _fewest(tau, S_busy, S_rotation, S_weights, cut, S_io, working, resource, capacity,
            link_bps, link_s, up_bps, up_s):  # pragma: no cover - compiled
    """``f[j]``: the fewest PEs of a pipeline over ops ``[0, j)`` whose stages all have
    period <= ``tau`` (``_NONE``: none); the last stage's start and PEs per ``j``."""
    K, n1 = S_busy.shape[-2:]
    f = np.full(n1, _NONE, dtype=np.int64)
    back_i, back_k = np.full(n1, -1, dtype=np.int64), np.zeros(n1, dtype=np.int64)
    largest = np.zeros(1 if S_busy.ndim == 2 else S_busy.shape[0])  # per resource, its
    # largest op's working set
    f[0] = 0
    for j in range(1, n1):
        largest[:] = 0.0
        held_working = 0.0  # their sum
        for i in range(j - 1, -1, -1):
            u = resource[i]
            if working[i] > largest[u]:
                held_working += working[i] - largest[u]
                largest[u] = working[i]
            if _busiest(S_busy, K - 1, i, j) > tau:
                break  # a longer stage computes longer still
            if f[i] >= _NONE:
                continue
            r = _first(S_busy, i, j, tau)  # fewest PEs (k = r + 1) computing in time
            held = S_weights[j] - S_weights[i] + 2.0 * (cut[i] + cut[j] + S_io[j] - S_io[i]) \
                + held_working
            r = max(r, int(np.ceil(held / capacity)) - 1)  # ... and holding the stage
            if r >= K:
                continue
            comm = (S_rotation[r, j] - S_rotation[r, i] + _move(cut[i], link_bps, link_s)
                    + _move(cut[j], link_bps, link_s) + _move(S_io[j] - S_io[i], up_bps, up_s))
            if comm <= tau and f[i] + r + 1 < f[j]:
                f[j], back_i[j], back_k[j] = f[i] + r + 1, i, r + 1
    return f, back_i, back_k


def _busiest(S_busy, r, i, j):  # pragma: no cover - compiled (below)
    """The busiest resource's work in stage ``[i, j)`` split ``r + 1`` ways: ``S_busy``
    is ``[R, K, n + 1]``, or ``[K, n + 1]`` for one resource (a loop over one resource
    would run the program at half the speed)."""


@overload(_busiest, inline="always")
def _busiest_of(S_busy, r, i, j):  # pragma: no cover - compiled
    if S_busy.ndim == 2:
        return lambda S_busy, r, i, j: S_busy[r, j] - S_busy[r, i]
    return lambda S_busy, r, i, j: _busiest_unit(S_busy, r, i, j)


@numba.njit(cache=True, nogil=True)
def _busiest_unit(S_busy, r, i, j):  # pragma: no cover - compiled
    """:func:`_busiest` over several resources (``S_busy`` is ``[R, K, n + 1]``)."""
    most = S_busy[0, r, j] - S_busy[0, r, i]
    for u in range(1, S_busy.shape[0]):
        busy = S_busy[u, r, j] - S_busy[u, r, i]
        if busy > most:
            most = busy
    return most


@numba.njit(cache=True, nogil=True, inline="always")
def _first(S_busy, i, j, limit):  # pragma: no cover - compiled
    """The least row ``r`` with :func:`_busiest` ``<= limit`` (every resource's work
    is nonincreasing in ``r``), or ``K`` if none."""
    K = S_busy.shape[-2]
    if _busiest(S_busy, K - 1, i, j) > limit:
        return K
    lo, hi = 0, K - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _busiest(S_busy, mid, i, j) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(cache=True, nogil=True, inline="always")
def _move(nbytes, bps, latency):  # pragma: no cover - compiled
    return nbytes / bps + latency if nbytes > 0 else 0.0
