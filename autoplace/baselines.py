"""Named baseline placements: every single unit, greedy, and HEFT (:mod:`autoplace.heft`).

Baselines are measured and logged like any candidate (their record's ``strategy`` is the
name here), before the search starts; the search then only has to beat them.
"""

from __future__ import annotations

from autoplace.estimate import op_seconds
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
    default = prof.scope(prof.default_scope)
    choice = []
    for op, cs in zip(space.graph.ops, space.op_choices):
        homes = [j for j, (u, s) in enumerate(cs) if s == prof.home_scope(u)] or range(len(cs))
        choice.append(min(homes, key=lambda j, op=op, cs=cs: op_seconds(
            op, prof.unit(cs[j][0]), prof.scope(cs[j][1]), default)))
    return space.decode(choice, {k: "async" for k in range(len(space.edge_names))})


def single_units(space: SearchSpace) -> list[tuple[str, Placement]]:
    """``single:<unit>`` for each unit that takes every op, all in its home scope."""
    return [(f"single:{u.name}", p) for u in space.profile.units
            if (p := space.uniform(u.name)) is not None]


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """The baselines the tuner measures first: every single unit, then greedy."""
    return single_units(space) + [("greedy", greedy(space))]
