"""Named baseline placements: every single unit, greedy, and HEFT (:mod:`autoplace.heft`).

Baselines are measured and logged like any candidate (their record's ``strategy`` is the
name here), before the search starts; the search then only has to beat them.
"""

from __future__ import annotations

import json

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
    """``single:<unit>`` for each unit that takes every op, all in its home scope.

    Mirror units (same description, home scopes alike, e.g. the PEs of a mesh) give the
    same single-unit placement up to renaming, so only the first of them is a baseline.
    """
    out, seen = [], set()
    for u in space.profile.units:
        key = _mirror_key(space.profile, u)
        if key not in seen and (p := space.uniform(u.name)) is not None:
            seen.add(key)
            out.append((f"single:{u.name}", p))
    return out


def _mirror_key(profile, unit) -> tuple:
    """What a single-unit placement on ``unit`` depends on, without the unit's name.

    The unit's description, its home scope (by name when it is the default scope, which
    every such placement shares, else by capacity and bandwidth) and the direct copy paths
    between the default scope and that home scope. A private home scope without a direct
    path keeps its name: its route may differ, so it is never merged.
    """
    home = profile.scope(profile.home_scope(unit.name))
    links = tuple(sorted((c.src == home.name, c.bandwidth_bps, c.latency_s, c.modes)
                         for c in profile.copies
                         if {c.src, c.dst} == {home.name, profile.default_scope}))
    private = home.name != profile.default_scope
    where = (home.capacity_bytes, home.bandwidth_bps, links) if private and links else home.name
    return (json.dumps(dict(unit.target), sort_keys=True, default=str),
            tuple(sorted(unit.accepts)), tuple(sorted(unit.gflops.items())),
            unit.launch_overhead_s, unit.power_w, unit.rpc_key,
            tuple(sorted(unit.kernel_s.items())), where)


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """The baselines the tuner measures first: every single unit, then greedy."""
    return single_units(space) + [("greedy", greedy(space))]
