"""Named baseline placements: every single unit, greedy, and HEFT (:mod:`autoplace.heft`).

Baselines are measured and logged like any candidate (their record's ``strategy`` is the
name here), before the search starts; the search then only has to beat them.
"""

from __future__ import annotations

import numpy as np

from autoplace.heft import heft
from autoplace.space import Placement, SearchSpace

__all__ = ["baselines", "greedy", "heft", "single_units"]


def greedy(space: SearchSpace) -> Placement:
    """Each op on the unit that runs it fastest, in that unit's home scope.

    Home scopes (the default scope where the unit can use it) keep the greedy placement
    clear of small on-chip memories, so it is feasible whenever the default scope is big
    enough; copies are async where the route allows.
    """
    prof = space.profile
    home = np.array([prof.scope_index[prof.home_scope(u)] for u in space.units])
    real = space.real_choices()
    at_home = real & (space.c_scope == home[space.c_unit])
    allowed = np.where(at_home.any(axis=1)[:, None], at_home, real)
    choice = np.where(allowed, space.c_dur, np.inf).argmin(axis=1)
    return space.decode(choice, np.ones(space.n_edges, dtype=np.int64))


def single_units(space: SearchSpace) -> list[tuple[str, Placement]]:
    """``single:<unit>`` for each unit that takes every op, all in its home scope.

    Units of one class (``SearchSpace.unit_class``: e.g. the PEs of a mesh) give the same
    single-unit placement up to renaming, so only the first of each class is a baseline.
    """
    out, seen = [], set()
    for u, cls in zip(space.units, space.unit_class.tolist()):
        if cls not in seen and (p := space.uniform(u)) is not None:
            seen.add(cls)
            out.append((f"single:{u}", p))
    return out


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """The baselines the tuner measures first: every single unit, then greedy."""
    return single_units(space) + [("greedy", greedy(space))]
