"""The front of a log: its records no other record beats on every criterion, and a choice
from it.

A record *dominates* another when it is no worse on every criterion (latency, energy, peak
memory, a stream's period: :data:`~autoplace.measure.objective.CRITERIA`) and better on one.
:func:`front` gives the records of a log that no admitted record dominates, among those
:class:`Limits` admits (a user's ``--max-latency``, ``--max-energy``, ``--max-memory``);
:func:`pick` chooses one: the best by one criterion, or the front's *knee* (:func:`knee`).
:func:`hypervolume` measures a front: the volume it dominates up to a reference point
(moocore's). The dominance test and the volume are moocore's (``is_nondominated``,
``hypervolume``), imported when first used. The searches of a front rank candidates
against the one they have with :func:`weakly_dominated`, :func:`ranks` (non-dominated
sorting) and :func:`contributions` (the hypervolume each adds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from autoplace.measure.limits import Limits, parse_bytes
from autoplace.measure.objective import CRITERIA, Criterion
from autoplace.records.tuning_log import best

#: ``--pick`` values besides the criteria's names
KNEE = "knee"
__all__ = ["KNEE", "Limits", "parse_bytes", "criteria_named", "criteria_of", "figures",
           "significant",
           "nondominated", "front", "knee", "pick", "hypervolume", "weakly_dominated", "ranks",
           "contributions"]


def criteria_named(names: Iterable[str]) -> tuple[Criterion, ...]:
    """The criteria of ``names`` (at least two, no repeats); ValueError naming the choices."""
    names = [n.strip() for n in names]
    unknown = [n for n in names if n not in CRITERIA]
    if unknown or len(set(names)) != len(names) or len(names) < 2:
        raise ValueError(f"--criteria: two or more of {', '.join(CRITERIA)}, each once; got "
                         f"{','.join(names)!r}")
    return tuple(CRITERIA[n] for n in names)


#: the criteria of a front where neither ``--criteria`` nor the records say
DEFAULT_CRITERIA = "latency,energy"


def criteria_of(records: Iterable, given: str | None = None) -> tuple[Criterion, ...]:
    """The criteria ``given`` (``--criteria``) names; without it, those a job of several
    objectives searched (its records' ``objective``, where every such record names the
    same), else :data:`DEFAULT_CRITERIA`."""
    named = {r.objective for r in records if r.objective is not None}
    spec = given or (named.pop() if len(named) == 1 else DEFAULT_CRITERIA)
    return criteria_named(spec.split(","))


def figures(records: Sequence, criteria: Sequence[Criterion]) -> np.ndarray:
    """``[records, criteria]``: each record's figure of each criterion (NaN: none)."""
    return np.array([[math.nan if (v := c.value(r.result)) is None else v for c in criteria]
                     for r in records], dtype=np.float64).reshape(len(records), len(criteria))


#: significant digits to which figures are compared where float noise must not make two
#: equal placements' figures differ (energy summed in another order): ``significant``
DIGITS = 12


def significant(F: np.ndarray, digits: int = DIGITS) -> np.ndarray:
    """``F`` rounded to ``digits`` significant digits (0, inf and NaN as they are)."""
    F = np.asarray(F, dtype=np.float64)
    finite = np.isfinite(F) & (F != 0)
    scale = np.ones_like(F)
    scale[finite] = 10.0 ** (np.floor(np.log10(np.abs(F[finite]))) - (digits - 1))
    return np.where(finite, np.round(F / scale) * scale, F)


def nondominated(F: np.ndarray) -> np.ndarray:
    """Per row of ``F`` (rows of figures, lower better, all finite), whether no other row
    dominates it; of equal rows, only the first."""
    import moocore

    if not len(F):
        return np.zeros(0, dtype=bool)
    _, first = np.unique(F, axis=0, return_index=True)
    keep = np.zeros(len(F), dtype=bool)
    keep[first] = True
    keep[first] = moocore.is_nondominated(F[first])
    return keep


def front(records: Iterable, criteria: Sequence[Criterion],
          limits: Limits | None = None) -> list:
    """The records :func:`nondominated` among those ``limits`` admits (None: all) and with
    a figure for every criterion, ordered by the first criterion (then the next); of records
    with equal figures (to :data:`DIGITS` significant digits: an energy summed in another
    order is the same energy), the lowest trial."""
    limits = limits or Limits()
    ok = [r for r in records if limits.admits(r.result)]
    ok.sort(key=lambda r: r.trial)  # equal figures: the first kept is the lowest trial
    F = figures(ok, criteria)
    has = ~np.isnan(F).any(axis=1)
    ok, F = [r for r, h in zip(ok, has) if h], significant(F[has])
    rows = np.flatnonzero(nondominated(F))
    rows = rows[np.lexsort(F[rows].T[::-1])]
    return [ok[i] for i in rows.tolist()]


def knee(F: np.ndarray) -> int:
    """The row of a front ``F`` nearest the ideal point (every criterion at its best over
    the front) once each criterion is scaled to [0, 1] over the front: the trade-off where
    no criterion is far from its best. Ties: the first row."""
    span = F.max(axis=0) - F.min(axis=0)
    scaled = (F - F.min(axis=0)) / np.where(span > 0, span, 1.0)
    return int(np.argmin(np.sqrt((scaled ** 2).sum(axis=1))))


def pick(records: Iterable, how: str, criteria: Sequence[Criterion],
         limits: Limits | None = None):
    """The record ``how`` chooses among those ``limits`` admits: the best by a criterion
    (``how`` its name; the lowest trial of equals), or the :func:`knee` of their
    :func:`front` over ``criteria``; None if none is admitted."""
    if how == KNEE:
        points = front(records, criteria, limits)
        return points[knee(figures(points, criteria))] if points else None
    if how not in CRITERIA:
        raise ValueError(f"--pick must be one of {', '.join([*CRITERIA, KNEE])}, got {how!r}")
    limits = limits or Limits()
    return best([r for r in records if limits.admits(r.result)], objective=CRITERIA[how])


def hypervolume(F: np.ndarray, reference: Sequence[float]) -> float:
    """The volume the rows of ``F`` dominate up to ``reference`` (rows not below it in
    every criterion add nothing)."""
    import moocore

    ref = np.asarray(reference, dtype=np.float64)
    inside = F[(F < ref).all(axis=1)] if len(F) else F
    return float(moocore.hypervolume(inside, ref=ref)) if len(inside) else 0.0


def weakly_dominated(F: np.ndarray, front: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Per row of ``F``, whether a row of ``front`` is no worse in every figure (``chunk``
    rows of ``F`` at a time)."""
    if not len(front) or not len(F):
        return np.zeros(len(F), dtype=bool)
    if F.shape[1] == 2:  # the front sorted by the first figure, the least second so far
        order = np.lexsort((front[:, 1], front[:, 0]))
        least = np.minimum.accumulate(front[order, 1])
        j = np.searchsorted(front[order, 0], F[:, 0], side="right")  # first figures <= F's
        return (j > 0) & (least[np.maximum(j - 1, 0)] <= F[:, 1])
    return np.concatenate([(front[None, :, :] <= F[i:i + chunk, None, :]).all(axis=2)
                           .any(axis=1) for i in range(0, len(F), chunk)])


def ranks(F: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Each candidate's non-dominated rank among the front and the candidates (0: no
    other dominates it)."""
    import moocore

    return moocore.pareto_rank(np.vstack([front, F]))[len(front):]


def contributions(F: np.ndarray, front: np.ndarray) -> np.ndarray:
    """The hypervolume each candidate adds to the front alone, each figure scaled to [0, 1]
    over both, to a reference point past the worst by a tenth of that."""
    import moocore

    both = np.vstack([front, F])
    lo, hi = both.min(axis=0), both.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled_front, ref = (front - lo) / span, np.full(F.shape[1], 1.1)
    base = moocore.hypervolume(scaled_front, ref=ref) if len(front) else 0.0
    return np.array([moocore.hypervolume(np.vstack([scaled_front, (f - lo) / span]), ref=ref)
                     - base for f in F])
