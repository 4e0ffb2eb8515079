"""The optimum of the stage model: a dynamic program over contiguous splits x PE counts.

PEs are counted, never labelled (Tarnawski et al., NeurIPS 2020; Piper, NeurIPS 2021). For a
period ``tau``, :func:`_fewest` finds the fewest PEs of a pipeline whose every stage has
period <= tau (every stage's least ``k``: its compute falls and its communication grows with
``k``, so the least ``k`` whose compute is within ``tau`` and whose PEs hold the stage is the
only one to try; a stage streaming its weights from the shared memory streams smaller
slices on more PEs, so larger ``k`` are tried until its communication is within ``tau``).
:func:`least_period` bisects ``tau`` for a PE budget: exact to a relative :data:`TOLERANCE`.
:func:`best_pipeline` maximises throughput over replication: each budget
``m`` gives ``P // m`` copies of the pipeline, and budgets whose upper bound cannot beat the
best found are skipped (the bound: :func:`work_bound`), once with every op's weights held
in the PEs and once with every op's streamed from the shared memory. Every op runs on its
default unit (:class:`StageCosts`): the program is exact for that and each of the two;
which ops do better on another unit, or streaming while the others hold, is the search's
(:mod:`autoplace.search.pipeline_moves`).
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


def fewest_pes(costs: StageCosts, tau: float, *,
               streamed: bool = False) -> PipelinePlan | None:
    """The pipeline with the fewest PEs whose every stage has period <= ``tau``; None if
    there is none (an op too slow, or too big for ``K`` PEs' memory). ``streamed``: every
    op's weights stream from the shared memory (else every op holds them)."""
    m = costs.machine
    S_busy = costs.S_busy[0] if costs.R == 1 else costs.S_busy  # see _busiest
    S_dma, S_weights, working, stream_w = costs.dp_tables(streamed)
    f, back_i, back_k = _fewest(tau, S_busy, S_dma, S_weights, costs.cut, costs.S_io,
                                working, stream_w, costs.resource, float(m.memory_bytes),
                                m.link_bps, m.link_s, m.uplink_bps, m.uplink_s, streamed)
    if f[-1] >= _NONE:
        return None
    stages, j = [], costs.n
    while j > 0:
        i = int(back_i[j])
        stages.append(Stage(i, j, int(back_k[j]),
                            streamed=costs.streaming(i, j) if streamed else None))
        j = i
    return PipelinePlan(stages=tuple(reversed(stages)))


def least_period(costs: StageCosts, budget: int, *, at_least: float = 0.0,
                 fewest: PipelinePlan | None = None,
                 streamed: bool = False) -> PipelinePlan | None:
    """The pipeline of at most ``budget`` PEs with the least period of its slowest stage
    (to :data:`TOLERANCE`); None if no pipeline fits in that many. ``at_least``: a period
    known not to be beaten (that of a larger budget), where the search starts; ``fewest``:
    the pipeline of the fewest PEs (``fewest_pes(costs, inf, streamed=streamed)``), if the
    caller has it; ``streamed``: as :func:`fewest_pes`."""
    fewest = fewest_pes(costs, math.inf, streamed=streamed) if fewest is None else fewest
    if fewest is None or fewest.pes > budget:
        return None
    # the slowest op, split all it can be on its default unit, bounds every period from below
    lo = max(float(costs.secs[-1].max()), at_least) * (1 - 1e-12)
    top, hi = stages_period(fewest, costs), lo  # the fewest PEs' period: enough
    while (best := fewest_pes(costs, hi, streamed=streamed)) is None or best.pes > budget:
        if hi >= top:
            best = fewest
            break
        hi = min(max(2 * hi, top * 1e-9), top)
    hi = stages_period(best, costs)
    while hi > lo * (1 + TOLERANCE):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
        plan = fewest_pes(costs, mid, streamed=streamed)
        if plan is not None and plan.pes <= budget:
            best, hi = plan, stages_period(plan, costs)
        else:
            lo = mid
    return best


def stages_period(plan: PipelinePlan, costs: StageCosts) -> float:
    """The period of ``plan``'s slowest stage (what the program minimises; the shared
    memory's time, the same for every plan of a budget, is added by :func:`best_pipeline`)."""
    return max(evaluate(plan, costs).stage_period_s)


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
    work (:func:`work_bound`), no pipeline faster than :func:`slowest_op`, and the shared
    memory moving every inference's inputs and outputs and the weights ``pes`` PEs cannot
    hold."""
    m = costs.machine
    unheld = max(0.0, float(costs.weights.sum()) - pes * m.memory_bytes)
    return min(pes / work_bound(costs), pes / slowest_op(costs),
               m.uplink_total_bps / (float(costs.S_io[-1]) + unheld))


def best_pipeline(costs: StageCosts, pes: int | None = None) -> PipelinePlan | None:
    """The plan of the most throughput on ``pes`` PEs (default: the whole mesh), with every
    op's weights held, or every op's streamed from the shared memory (the better; the
    program is exact for each): a pipeline of the least period for each budget ``m``,
    replicated ``pes // m`` times; budgets that cannot beat the best so far (``pes // m``
    over the bound on a pipeline's period) are not solved. None if no pipeline fits."""
    plans = best_pipelines(costs, pes)
    return plans[0] if plans else None


def best_pipelines(costs: StageCosts, pes: int | None = None) -> list[PipelinePlan]:
    """:func:`best_pipeline`, then the best plan holding every op's weights if one
    streaming them beat it (a search starts from both: a plan's stream may fall further
    below its analytic period than the other's)."""
    pes = costs.machine.size if pes is None else pes
    work = work_bound(costs)  # a linear program with overlapping units: once for both
    held = _best_of(costs, pes, work, streamed=False, best=None)
    streamed = _best_of(costs, pes, work, streamed=True, best=held) if costs.weights.any() \
        else held
    return [p for p in (streamed, held if held is not streamed else None) if p is not None]


def _best_of(costs: StageCosts, pes: int, work: float, *, streamed: bool,
             best: PipelinePlan | None) -> PipelinePlan | None:
    """:func:`best_pipeline` with every weight held or every weight streamed, or ``best``
    where no such plan beats it (``work``: :func:`work_bound`)."""
    whole = Stage(0, costs.n, 1, streamed=costs.streaming(0, costs.n) if streamed else None)
    shared = costs.shared_seconds(PipelinePlan(stages=(whole,)))  # per copy and copy
    best_thr = evaluate(best, costs).throughput if best is not None else 0.0
    if shared > 0 and 1 / shared <= best_thr:
        return best  # the shared memory alone holds every such plan below the best
    fewest = fewest_pes(costs, math.inf, streamed=streamed)
    if fewest is None or fewest.pes > pes:
        return best
    slowest = float(costs.secs[-1].max())
    floor = 0.0  # the least period of a larger budget
    for m in sorted({pes // r for r in range(1, pes // fewest.pes + 1)}, reverse=True):
        copies = pes // m
        if copies / max(work / m, slowest, floor, copies * shared) \
                <= best_thr * (1 + TOLERANCE):
            continue  # cannot beat the best: a smaller budget's period is no less
        plan = least_period(costs, m, at_least=floor, fewest=fewest, streamed=streamed)
        floor = stages_period(plan, costs)
        if copies / max(floor, copies * shared) > best_thr:
            best = PipelinePlan(stages=plan.stages, replicas=copies)
            best_thr = evaluate(best, costs).throughput
    return best


@numba.njit(cache=True, nogil=True)
def _fewest(tau, S_busy, S_dma, S_weights, cut, S_io, working, stream_w, resource, capacity,
            link_bps, link_s, up_bps, up_s, scan):  # pragma: no cover - compiled
    """``f[j]``: the fewest PEs of a pipeline over ops ``[0, j)`` whose stages all have
    period <= ``tau`` (``_NONE``: none); the last stage's start and PEs per ``j``. A stage
    holds its weights (``S_weights``), its buffers, each resource's largest ``working`` and
    the largest of its ops' streamed weights (``stream_w``). A stage's DMA work grows with
    its PEs unless it streams weights (``scan``: then more PEs than the least may be the
    fewest whose communication is within ``tau``, and are tried)."""
    K, n1 = S_busy.shape[-2:]
    f = np.full(n1, _NONE, dtype=np.int64)
    back_i, back_k = np.full(n1, -1, dtype=np.int64), np.zeros(n1, dtype=np.int64)
    largest = np.zeros(1 if S_busy.ndim == 2 else S_busy.shape[0])  # per resource, its
    # largest op's working set
    f[0] = 0
    for j in range(1, n1):
        largest[:] = 0.0
        arriving = 0.0
        held_working = 0.0  # their sum, and the largest streamed weights
        for i in range(j - 1, -1, -1):
            u = resource[i]
            if working[i] > largest[u]:
                held_working += working[i] - largest[u]
                largest[u] = working[i]
            if stream_w[i] > arriving:
                held_working += stream_w[i] - arriving
                arriving = stream_w[i]
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
            between = _move(cut[i], link_bps, link_s) + _move(cut[j], link_bps, link_s) \
                + _move(S_io[j] - S_io[i], up_bps, up_s)
            comm = S_dma[r, j] - S_dma[r, i] + between
            while scan and comm > tau and r + 1 < K:  # streamed slices shrink with k
                r += 1
                comm = S_dma[r, j] - S_dma[r, i] + between
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
