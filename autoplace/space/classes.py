"""Classes of identical units: units a placement can swap without changing what it costs.

Two units are in one class when neither is the host (which performs sync copies), they
have the same description (target, kinds, throughput,
launch overhead, power, RPC key, kernel table) and their home scopes are alike: the same
scope (e.g. the default scope, which every such unit shares), or private scopes of equal
capacity and bandwidth with equal direct copy paths to and from the default scope (e.g. the
PEs of a mesh with their local SRAM, or two CPUs each with an SRAM on its own DMA engine).
A private home scope without a direct path to the default scope keeps its name: its route
may differ, so it is never merged.
"""

from __future__ import annotations

import json

import numpy as np

from autoplace.profile import Profile, Unit


def class_key(profile: Profile, unit: Unit) -> tuple:
    """What a unit's cost depends on, without its name (see the module docstring)."""
    home = profile.scope(profile.home_scope(unit.name))
    default = profile.default_scope
    links = tuple(sorted((c.src == home.name, c.bandwidth_bps, c.latency_s, c.modes)
                         for c in (profile.copy_index.get((home.name, default)),
                                   profile.copy_index.get((default, home.name)))
                         if c is not None))
    private = home.name != default
    where = (home.capacity_bytes, home.bandwidth_bps, links) if private and links else home.name
    return (unit.name == profile.host, json.dumps(dict(unit.target), sort_keys=True, default=str),
            tuple(sorted(unit.accepts)), tuple(sorted(unit.gflops.items())),
            unit.launch_overhead_s, unit.power_w, unit.rpc_key,
            tuple(sorted(unit.kernel_s.items())), where)


def unit_classes(profile: Profile) -> np.ndarray:
    """Class id of each unit (ids in order of first appearance)."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault(class_key(profile, u), len(ids)) for u in profile.units],
                    dtype=np.int64)
