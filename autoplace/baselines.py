"""Named baseline placements: every single unit, greedy, fill, and HEFT (:mod:`autoplace.heft`).

Baselines are measured and logged like any candidate (their record's ``strategy`` is the
name here), before the search starts; the search then only has to beat them.
"""

from __future__ import annotations

import numpy as np

from autoplace.heft import heft
from autoplace.space import Placement, SearchSpace

__all__ = ["baselines", "fill", "greedy", "heft", "single_units"]


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
    """Ops in program order fill the units of the biggest class of interchangeable units
    (``SearchSpace.symmetries``) one after another, each unit in its home scope while the
    weights placed there fit it; an op that fits on no unit left, or that the class cannot
    run, goes to the host (Tarnawski et al.'s greedy, for any profile). None without such
    a class. A co-location group is placed with its leader, weighed as a whole."""
    if not space.symmetries:
        return None
    units = max(space.symmetries, key=lambda s: len(s.units)).units
    prof = space.profile
    homes = [prof.scope_index[prof.home_scope(space.units[u])] for u in units]
    group_bytes = _group_weights(space)
    host = space.choice_index(np.arange(space.n_ops), [space.host] * space.n_ops,
                              [prof.scope_index[prof.home_scope(prof.host)]] * space.n_ops)
    choice, k, used = host.copy(), 0, 0.0
    for i in _fill_order(space):
        need = group_bytes[i]
        while k < len(units) and used + need > space.capacity[homes[k]] and used > 0:
            k, used = k + 1, 0.0
        if k == len(units) or need > space.capacity[homes[k]]:
            continue
        j = space.choice_index([i], [units[k]], [homes[k]], [1])[0]
        if j >= 0:
            choice[i], used = j, used + need
    if (choice < 0).any():
        return None
    choice = space.colocate(choice[None, :])[0]
    return space.decode(choice, np.ones(space.n_edges, dtype=np.int64))


def _fill_order(space: SearchSpace) -> list[int]:
    """Ops to place (groups by their leader) in program order, a group where its last
    member runs (a group of weights and the op reading them is placed with that op)."""
    followers, leaders = space.colocated
    last = np.arange(space.n_ops)
    np.maximum.at(last, leaders, followers)
    keep = np.ones(space.n_ops, dtype=bool)
    keep[followers] = False
    ops = np.flatnonzero(keep)
    return ops[np.argsort(last[ops], kind="stable")].tolist()


def _group_weights(space: SearchSpace) -> np.ndarray:
    """Per op, its weight bytes; a group's leader carries its whole group's."""
    out = space.weight_bytes.copy()
    followers, leaders = space.colocated
    np.add.at(out, leaders, space.weight_bytes[followers])
    return out


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """The baselines the tuner measures first: every single unit, greedy, then fill (where
    the profile has interchangeable units)."""
    filled = fill(space)
    return single_units(space) + [("greedy", greedy(space))] + \
        ([("fill", filled)] if filled is not None else [])
