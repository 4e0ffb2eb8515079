"""HEFT's placement as the search starts from it: canonical, and made to fit memory.

HEFT (:mod:`autoplace.baselines.heft`) checks a scope's capacity in its planning order, ranked by
the longest path to an exit, while the simulator holds buffers in program order, so HEFT's
placement can overflow a small on-chip scope (7 of the 30 bundled cases: densenet121,
inception_v1 and shufflenet on ``soc`` and on ``mesh``, inception_v2 on ``mesh``; on ``soc``
inception_v1's ``sram1`` holds 6.6 MB of 4 MB). Such a placement is no start: it cannot run.
:func:`fit_memory` evicts ops from overflowing scopes, one at a time, until the placement
fits: of the ops in the scope that overflows most, the move (to another scope of the same
unit, or to the host's home scope) that leaves the least overflow, then the shortest
latency, measured on the simulator. :func:`heft_start` is HEFT's genome so fitted, once per
space: the genome the search strategies measure as ``heft``, seed their populations with and
descend from.
"""

from __future__ import annotations

import weakref

import numpy as np

from autoplace.baselines.heft import heft_genome
from autoplace.measure.batch import simulate_batch
from autoplace.space import SearchSpace

_STARTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def heft_start(space: SearchSpace) -> tuple[np.ndarray, np.ndarray]:
    """HEFT's genome of ``space``, made to fit (:func:`fit_memory`) and canonical, as
    ``[1, ops]`` and ``[1, edges]`` arrays (computed once per space)."""
    if space not in _STARTS:
        choice, mode = heft_genome(space)
        choice = fit_memory(space, choice, mode)
        _STARTS[space] = space.canonical(choice[None, :], mode[None, :])
    choice, mode = _STARTS[space]
    return choice.copy(), mode.copy()


def fit_memory(space: SearchSpace, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """``choice`` with ops moved out of overflowing scopes until every scope holds its peak
    (module docstring); as far as it gets if no move lowers the overflow."""
    choice = choice.copy()
    over = _overflow(space, simulate_batch(space, choice[None, :], mode[None, :]))[0]
    for _ in range(space.n_ops):
        if over.sum() <= 0:
            break
        rows = _evictions(space, choice, int(np.argmax(over)))
        if not len(rows):
            break
        out = simulate_batch(space, rows, np.broadcast_to(mode, (len(rows), len(mode))))
        overflow = _overflow(space, out)
        excess = overflow.sum(axis=1)
        best = int(np.lexsort((out.latency, excess))[0])
        if excess[best] >= over.sum():
            break
        choice, over = rows[best], overflow[best]
    return choice


def _overflow(space: SearchSpace, out) -> np.ndarray:
    """Per row and scope, the bytes over its capacity (0 where it fits)."""
    return np.maximum(np.floor(out.peak) - space.capacity, 0.0)


def _evictions(space: SearchSpace, choice: np.ndarray, scope: int) -> np.ndarray:
    """Genomes, each ``choice`` with one op that uses ``scope`` (its output or weights there)
    moved to a choice that does not: the same unit in another scope, or the host's home."""
    ops = np.arange(space.n_ops)
    now = choice[ops]
    using = np.flatnonzero((space.c_scope[ops, now] == scope)
                           | (space.c_wscope[ops, now] == scope))
    prof = space.profile
    host_home = prof.scope_index[prof.home_scope(prof.host)]
    unit, scopes = space.c_unit[using], space.c_scope[using]
    free = space.real_choices()[using] & (scopes != scope) & (space.c_wscope[using] != scope)
    same_unit = free & (unit == unit[np.arange(len(using)), now[using]][:, None])
    host = free & (unit == space.host) & (scopes == host_home)
    op, to = np.nonzero(same_unit | host)  # (by op, then choice)
    rows = np.repeat(np.asarray(choice, dtype=np.int64)[None, :], len(op), axis=0)
    rows[np.arange(len(op)), using[op]] = to
    return rows
