"""Named baseline placements: every single unit, greedy, fill and the best contiguous splits
(:mod:`autoplace.baselines.contiguous`). HEFT's placement (:mod:`autoplace.baselines.heft`) is
measured as ``heft`` by the search strategies, made to fit memory
(:mod:`autoplace.search.heft_start`).

Baselines are measured and logged like any candidate (their record's ``strategy`` is the
name here), before the search starts; the search then only has to beat them.
"""

from __future__ import annotations

import numpy as np

from autoplace.baselines.contiguous import best_splits, inseparable_blocks
from autoplace.space import Placement, SearchSpace

__all__ = ["baselines", "fill", "greedy", "single_units"]


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


def fill(space: SearchSpace) -> Placement | None:
    """Tarnawski et al.'s greedy, for any profile with interchangeable units
    (``SearchSpace.symmetries``; None without): the inseparable blocks of the graph (its
    co-location groups, merged where they reach each other) in a topological order fill
    the units of the biggest such class one after another, each in its home scope while
    the weights there fit it; a block that fits on no unit left, or that the class cannot
    run, goes to the host. Each unit gets a run of consecutive blocks, so its ops are
    contiguous (what the block model asks)."""
    if not space.symmetries:
        return None
    units = max(space.symmetries, key=lambda s: len(s.units)).units
    prof = space.profile
    homes = [prof.scope_index[prof.home_scope(space.units[u])] for u in units]
    host_scope = prof.scope_index[prof.home_scope(prof.host)]
    choice = space.choice_index(np.arange(space.n_ops), [space.host] * space.n_ops,
                                [host_scope] * space.n_ops)
    if (choice < 0).any():
        return None
    k, used = 0, 0.0
    for ops in inseparable_blocks(space):
        need = float(space.weight_bytes[ops].sum())
        if used > 0 and used + need > space.capacity[homes[k]]:
            k, used = k + 1, 0.0  # this unit is full: the next one
        j = space.choice_index(ops, [units[k]] * len(ops), [homes[k]] * len(ops),
                               [1] * len(ops)) if k < len(units) else -np.ones(1)
        if (j < 0).any() or need > space.capacity[homes[k]]:
            k, used = k + (used > 0), 0.0  # on the host: the unit's run ends here
            continue
        choice[ops], used = j, used + need
    return space.decode(choice, np.ones(space.n_edges, dtype=np.int64))


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """The baselines the tuner measures first: every single unit, greedy, then fill (where
    the profile has interchangeable units) and the contiguous splits with the least period
    and the least chained latency (:func:`autoplace.baselines.contiguous.best_splits`, where they
    are block units)."""
    named = [("fill", fill(space)),
             *((f"contiguous:{goal}", p) for goal, p in best_splits(space).items())]
    return single_units(space) + [("greedy", greedy(space))] + \
        [(name, p) for name, p in named if p is not None]
