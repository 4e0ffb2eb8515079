"""Expand a profile's ``[mesh]`` table into per-PE units, scopes and copy paths.

The schema is documented in :mod:`autoplace.hardware.load`. PE ``k = r * cols + c`` gets the names
``pe<k>.<suffix>``; neighbour links join the same-suffix local scopes of 4-neighbour PEs in both
directions, and uplinks join each PE's local scope and a shared top-level scope. A copy is done
by the DMA engine of the PE it starts from (uplinks: the PE's own engine both ways).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from autoplace.hardware.profile import CopyPath, MeshGrid, Scope
from autoplace.hardware.toml_tables import (
    ProfileParts,
    Table,
    parse_copy_fields,
    parse_scope,
    parse_unit,
)

#: the most PEs a mesh may have (9x the 7,296 of the largest board autoplace targets; a
#: larger grid is a typo, and its tables would not fit in memory)
MAX_PES = 65_536


def _dimension(mesh: Table, name: str) -> int:
    value = mesh.get(name, (int,), "an integer >= 1")
    if value < 1:
        raise mesh.error(mesh.key(name), f"must be an integer >= 1, got {value!r}")
    return value


def _local_scopes(t: Table, suffixes: list[str]) -> list[str]:
    """The local scope suffixes a link/uplink template joins (``scope``, default all)."""
    if not suffixes:
        raise t.error(t.path, "needs at least one [mesh.scopes.*] template")
    scope = t.string("scope", None)
    if scope is None:
        return suffixes
    if scope not in suffixes:
        raise t.error(t.key("scope"), f"mesh scope {scope!r} is not defined")
    return [scope]


def _link_template(t: Table, suffixes: list[str]) -> tuple[list[str], str, dict[str, Any]]:
    scopes = _local_scopes(t, suffixes)
    dma = t.string("dma", "dma")
    fields = parse_copy_fields(t)
    return scopes, dma, fields


def _neighbours(rows: int, cols: int) -> list[tuple[int, int]]:
    """Directed (a, b) pairs of 4-neighbour PEs: right and down, each in both directions."""
    pairs = []
    for r in range(rows):
        for c in range(cols):
            k = r * cols + c
            if c + 1 < cols:
                pairs += [(k, k + 1), (k + 1, k)]
            if r + 1 < rows:
                pairs += [(k, k + cols), (k + cols, k)]
    return pairs


def _links(t: Table, suffixes: list[str], rows: int,
           cols: int) -> tuple[list[str], list[CopyPath]]:
    """The linked scope suffixes and the neighbour links."""
    scopes, dma, fields = _link_template(t, suffixes)
    t.finish()
    return scopes, [CopyPath(src=f"pe{a}.{s}", dst=f"pe{b}.{s}", engine=f"pe{a}.{dma}", **fields)
                    for a, b in _neighbours(rows, cols) for s in scopes]


def _uplinks(t: Table, suffixes: list[str], shared: set[str],
             n: int) -> tuple[str, list[str], list[CopyPath], float | None]:
    """The shared scope, the uplinked scope suffixes, the uplinks and what all of them move
    together at most (``total_gbps``, in B/s; None: no limit)."""
    to = t.string("to")
    if to not in shared:
        raise t.error(t.key("to"), f"scope {to!r} is not a defined top-level scope")
    scopes, dma, fields = _link_template(t, suffixes)
    total = t.number("total_gbps", positive=True) if "total_gbps" in t.data else None
    t.finish()
    paths = []
    for k in range(n):
        for s in scopes:
            local, engine = f"pe{k}.{s}", f"pe{k}.{dma}"
            paths.append(CopyPath(src=local, dst=to, engine=engine, **fields))
            paths.append(CopyPath(src=to, dst=local, engine=engine, **fields))
    return to, scopes, paths, None if total is None else 1e9 * total


def _scope_template(t: Table, suffix: str, units: list[str]) -> Scope:
    scope = parse_scope(t, suffix)
    for unit in sorted(scope.access - {"*"}):
        if unit not in units:
            raise t.error(t.key("access"), f"mesh unit {unit!r} is not defined")
    return scope if "*" not in scope.access else dataclasses.replace(scope, access=frozenset(units))


def _add_units(mesh: Table, parts: ProfileParts, n: int) -> list[str]:
    templates = [(s, t.path, parse_unit(t, s)) for s, t in mesh.table("units").subtables()]
    for k in range(n):
        for suffix, path, unit in templates:
            name = f"pe{k}.{suffix}"
            if name in parts.units:
                raise mesh.error(path, f"generated unit {name!r} clashes with units.{name}")
            rpc_key = unit.rpc_key.replace("{pe}", str(k)) if unit.rpc_key else None
            parts.units[name] = dataclasses.replace(unit, name=name, rpc_key=rpc_key)
            parts.origin[name] = path
    return [s for s, _, _ in templates]


def _add_scopes(mesh: Table, parts: ProfileParts, n: int, units: list[str]) -> list[str]:
    scopes = mesh.table("scopes", None)
    templates = [(s, t.path, _scope_template(t, s, units)) for s, t in scopes.subtables()] \
        if scopes is not None else []
    for k in range(n):
        for suffix, path, scope in templates:
            name = f"pe{k}.{suffix}"
            if name in parts.scopes:
                raise mesh.error(path, f"generated scope {name!r} clashes with scopes.{name}")
            access = frozenset(f"pe{k}.{u}" for u in scope.access)
            parts.scopes[name] = dataclasses.replace(scope, name=name, access=access)
    return [s for s, _, _ in templates]


def expand_mesh(mesh: Table, parts: ProfileParts) -> None:
    """Add the PEs of ``mesh`` to ``parts`` (top-level units and scopes already read)."""
    rows, cols = _dimension(mesh, "rows"), _dimension(mesh, "cols")
    n, shared = rows * cols, set(parts.scopes)
    if n > MAX_PES:
        raise mesh.error(mesh.key("rows"), f"rows x cols = {rows} x {cols} = {n:,} PEs, over "
                         f"the limit of {MAX_PES:,}")
    units = _add_units(mesh, parts, n)
    suffixes = _add_scopes(mesh, parts, n, units)
    link, uplink = mesh.table("link", None), mesh.table("uplink", None)
    overlap = mesh.get("units_overlap", (bool,), "a boolean", False)
    mesh.finish()
    grid = MeshGrid(rows=rows, cols=cols, scopes=tuple(suffixes), units_overlap=overlap)
    if link is not None:
        scopes, paths = _links(link, suffixes, rows, cols)
        parts.copies += [("mesh.link", c) for c in paths]
        grid = dataclasses.replace(grid, link_scopes=tuple(scopes))
    if uplink is not None:
        to, scopes, paths, total = _uplinks(uplink, suffixes, shared, n)
        parts.copies += [("mesh.uplink", c) for c in paths]
        grid = dataclasses.replace(grid, uplink_scopes=tuple(scopes), uplink_to=to,
                                   uplink_total_bps=total)
    parts.mesh = dataclasses.replace(grid, generated_copies=len(parts.copies))
