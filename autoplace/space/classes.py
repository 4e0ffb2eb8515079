"""Classes of identical units: units a placement can swap without changing what it costs.

Two units are in one class when neither is the host (which performs sync copies), they
have the same description (target, kinds, throughput, launch overhead, power and energy, RPC key,
kernel table, class label, execution, the CPUs it is pinned to: units pinned to CPUs are
never swapped, the units they share a CPU with would differ), a profiled graph measured them
alike (the space
refines the profile's classes by the graph's measured latencies), and their home scopes are
alike: the same
scope (e.g. the default scope, which every such unit shares), or private scopes of equal
capacity and bandwidth with equal direct copy paths to and from the default scope (e.g. the
PEs of a mesh with their local SRAM, or two CPUs each with an SRAM on its own DMA engine).
A private home scope without a direct path to the default scope keeps its name: its route
may differ, so it is never merged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from autoplace.hardware.profile import Profile, Unit


def class_key(profile: Profile, unit: Unit) -> tuple:
    """What a unit's cost depends on, without its name (see the module docstring)."""
    home = profile.scope(profile.home_scope(unit.name))
    default = profile.default_scope
    links = tuple(sorted((c.src == home.name, c.bandwidth_bps, c.latency_s, c.modes,
                          c.j_per_byte)
                         for c in (profile.copy_index.get((home.name, default)),
                                   profile.copy_index.get((default, home.name)))
                         if c is not None))
    private = home.name != default
    where = (home.capacity_bytes, home.bandwidth_bps, home.read_j_per_byte,
             home.write_j_per_byte, links) if private and links else home.name
    return (unit.name == profile.host, json.dumps(dict(unit.target), sort_keys=True, default=str),
            tuple(sorted(unit.accepts)), tuple(sorted(unit.gflops.items())),
            unit.launch_overhead_s, unit.handover_s, unit.power_w, unit.idle_w,
            tuple(sorted(unit.j_per_flop.items())), unit.rpc_key,
            tuple(sorted(unit.kernel_s.items())), unit.class_name, unit.execution, unit.cpus,
            where)


def refine(classes: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Classes split further where units' ``columns`` (``[rows, units]``, e.g. measured op
    times a graph gives per unit) differ; ids in order of first appearance."""
    ids: dict[tuple, int] = {}
    cols = np.ascontiguousarray(columns.T)
    return np.array([ids.setdefault((int(c), cols[u].tobytes()), len(ids))
                     for u, c in enumerate(classes.tolist())], dtype=np.int64)


def unit_classes(profile: Profile) -> np.ndarray:
    """Class id of each unit (ids in order of first appearance)."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault(class_key(profile, u), len(ids)) for u in profile.units],
                    dtype=np.int64)


@dataclass(frozen=True)
class Symmetry:
    """A class of units any relabelling of which leaves every cost unchanged: ``units`` (in
    profile order) and ``private[m, p]``, the ``p``-th private scope of the ``m``-th unit
    (a scope only it can access; the ``p``-th ones of all units are alike). ``member[u]``:
    unit ``u``'s position in ``units`` (-1: not one of them); ``slot[s]``: which private
    scope ``s`` is (-1: none of theirs)."""

    units: np.ndarray
    private: np.ndarray
    member: np.ndarray
    slot: np.ndarray

    def moved(self, to: np.ndarray, scope: np.ndarray) -> np.ndarray:
        """``scope`` of ops moved to the units at positions ``to``: a private scope becomes
        the same private scope of the new unit; any other stays."""
        private = self.slot[scope]
        if not self.private.size:
            return scope
        return np.where(private >= 0, self.private[to, np.maximum(private, 0)], scope)


def symmetries(profile: Profile, classes: np.ndarray) -> list[Symmetry]:
    """The classes of two or more units that are interchangeable: alike private scopes whose
    copy paths lead only to shared scopes, on DMA engines each unit has to itself (or all
    share). (Units of a mesh are alike but not interchangeable: their links make distances
    differ.)"""
    paths: dict[str, list] = {}
    for c in profile.copies:
        paths.setdefault(c.src, []).append(c)
        paths.setdefault(c.dst, []).append(c)
    out = []
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        if len(members) > 1:
            private = _private_scopes(profile, members, paths)
            if private is not None:
                member = np.full(len(profile.units), -1, dtype=np.int64)
                member[members] = np.arange(len(members))
                slot = np.full(len(profile.scopes), -1, dtype=np.int64)
                for p in range(private.shape[1]):
                    slot[private[:, p]] = p
                out.append(Symmetry(units=members, private=private, member=member, slot=slot))
    return out


def _private_scopes(profile: Profile, members: np.ndarray,
                    paths: dict[str, list]) -> np.ndarray | None:
    """``[m, p]`` private scope indices of the members, or None if they are not
    interchangeable."""
    names = [profile.units[u].name for u in members]
    owner = {s.name: next(iter(s.access)) for s in profile.scopes
             if len(s.access) == 1 and "*" not in s.access}
    private = [[s for s in profile.scopes_of(n) if owner.get(s) == n] for n in names]
    shared = [[s for s in profile.scopes_of(n) if owner.get(s) != n] for n in names]
    if any(len(p) != len(private[0]) or sh != shared[0] for p, sh in zip(private, shared)):
        return None
    signatures, engines = [], []
    theirs = {s for own in private for s in own}
    for own in private:
        mine = list({id(c): c for s in own for c in paths.get(s, ())}.values())
        if any(c.src in theirs and c.dst in theirs for c in mine):
            return None  # a path between members' scopes: distances may differ
        signatures.append(sorted(_path_signature(c, own) for c in mine) +
                          [(profile.scope(s).capacity_bytes, profile.scope(s).bandwidth_bps)
                           for s in own])
        engines.append({c.engine for c in mine})
    if any(sig != signatures[0] for sig in signatures):
        return None
    alike = all(e == engines[0] for e in engines)
    if not alike and sum(len(e) for e in engines) != len(set().union(*engines)):
        return None  # an engine some members share and others do not
    index = profile.scope_index
    return np.array([[index[s] for s in own] for own in private],
                    dtype=np.int64).reshape(len(members), -1)


def _path_signature(c, own: list[str]) -> tuple:
    """A copy path as seen from a member: which of its private scopes, which way, the shared
    end, and its figures."""
    outward = c.src in own
    mine, other = (c.src, c.dst) if outward else (c.dst, c.src)
    return (own.index(mine), outward, other, c.bandwidth_bps, c.latency_s, c.modes)


def relabel(sym: Symmetry, unit: np.ndarray, scope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(unit, scope)`` per op (``[B, ops]``) with the symmetry's units renamed in order of
    first use: the first op on any of them gets its first unit, and so on; an op's private
    scope becomes the same private scope of its new unit."""
    B, n = unit.shape
    m = len(sym.units)
    member = sym.member[unit]
    first = np.full((B, m), n, dtype=np.int64)
    rows, cols = np.nonzero(member >= 0)
    np.minimum.at(first, (rows, member[rows, cols]), cols)
    rank = np.empty_like(first)
    np.put_along_axis(rank, np.argsort(first, axis=1, kind="stable"),
                      np.arange(m)[None, :].repeat(B, axis=0), axis=1)
    new_pos = np.take_along_axis(rank, np.maximum(member, 0), axis=1)
    kept = member < 0
    return (np.where(kept, unit, sym.units[new_pos]),
            np.where(kept, scope, sym.moved(new_pos, scope)))
