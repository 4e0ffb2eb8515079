"""Expand a profile's ``[mesh]`` table into per-PE units, scopes and copy paths.

The schema is documented in :mod:`autoplace.hardware.load` and declared in
:mod:`autoplace.hardware.toml_schema`. PE ``k = r * cols + c`` gets the names
``pe<k>.<suffix>``; neighbour links join the same-suffix local scopes of 4-neighbour PEs in both
directions, and uplinks join each PE's local scope and a shared top-level scope. A copy is done
by the DMA engine of the PE it starts from (uplinks: the PE's own engine both ways).
"""

from __future__ import annotations

import dataclasses

from autoplace.hardware.profile import CopyPath, MeshGrid, Scope
from autoplace.hardware.toml_schema import LinkSpec, MeshSpec, ScopeSpec, UplinkSpec
from autoplace.hardware.toml_tables import (
    At,
    ProfileParts,
    parse_copy_fields,
    parse_scope,
    parse_unit,
)

#: the most PEs a mesh may have (9x the 7,296 of the largest board autoplace targets; a
#: larger grid is a typo, and its tables would not fit in memory)
MAX_PES = 65_536


def _local_scopes(spec: LinkSpec, at: At, suffixes: list[str]) -> list[str]:
    """The local scope suffixes a link/uplink template joins (``scope``, default all)."""
    if not suffixes:
        raise at.error(None, "needs at least one [mesh.scopes.*] template")
    if spec.scope is None:
        return suffixes
    if spec.scope not in suffixes:
        raise at.error("scope", f"mesh scope {spec.scope!r} is not defined")
    return [spec.scope]


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


def _links(spec: LinkSpec, at: At, suffixes: list[str], rows: int,
           cols: int) -> tuple[list[str], list[CopyPath]]:
    """The linked scope suffixes and the neighbour links."""
    scopes, fields = _local_scopes(spec, at, suffixes), parse_copy_fields(spec)
    return scopes, [CopyPath(src=f"pe{a}.{s}", dst=f"pe{b}.{s}", engine=f"pe{a}.{spec.dma}",
                             **fields)
                    for a, b in _neighbours(rows, cols) for s in scopes]


def _uplinks(spec: UplinkSpec, at: At, suffixes: list[str], shared: set[str],
             n: int) -> tuple[str, list[str], list[CopyPath], float | None]:
    """The shared scope, the uplinked scope suffixes, the uplinks and what all of them move
    together at most (``total_gbps``, in B/s; None: no limit)."""
    to = spec.to
    if to not in shared:
        raise at.error("to", f"scope {to!r} is not a defined top-level scope")
    scopes, fields = _local_scopes(spec, at, suffixes), parse_copy_fields(spec)
    paths = []
    for k in range(n):
        for s in scopes:
            local, engine = f"pe{k}.{s}", f"pe{k}.{spec.dma}"
            paths.append(CopyPath(src=local, dst=to, engine=engine, **fields))
            paths.append(CopyPath(src=to, dst=local, engine=engine, **fields))
    total = None if spec.total_gbps is None else 1e9 * spec.total_gbps
    return to, scopes, paths, total


def _scope_template(spec: ScopeSpec, at: At, suffix: str, units: list[str]) -> Scope:
    scope = parse_scope(spec, at, suffix)
    for unit in sorted(scope.access - {"*"}):
        if unit not in units:
            raise at.error("access", f"mesh unit {unit!r} is not defined")
    return scope if "*" not in scope.access else dataclasses.replace(scope, access=frozenset(units))


def _add_units(mesh: MeshSpec, at: At, parts: ProfileParts, n: int) -> list[str]:
    templates = []
    for suffix, spec in mesh.units.items():
        where = At(at.source, at.key(f"units.{suffix}"))
        templates.append((suffix, where, parse_unit(spec, where, suffix)))
    for k in range(n):
        for suffix, where, unit in templates:
            name = f"pe{k}.{suffix}"
            if name in parts.units:
                raise where.error(None, f"generated unit {name!r} clashes with units.{name}")
            rpc_key = unit.rpc_key.replace("{pe}", str(k)) if unit.rpc_key else None
            parts.units[name] = dataclasses.replace(unit, name=name, rpc_key=rpc_key)
            parts.origin[name] = where.path
    return [s for s, _, _ in templates]


def _add_scopes(mesh: MeshSpec, at: At, parts: ProfileParts, n: int,
                units: list[str]) -> list[str]:
    templates = []
    for suffix, spec in mesh.scopes.items():
        where = At(at.source, at.key(f"scopes.{suffix}"))
        templates.append((suffix, where, _scope_template(spec, where, suffix, units)))
    for k in range(n):
        for suffix, where, scope in templates:
            name = f"pe{k}.{suffix}"
            if name in parts.scopes:
                raise where.error(None, f"generated scope {name!r} clashes with scopes.{name}")
            access = frozenset(f"pe{k}.{u}" for u in scope.access)
            parts.scopes[name] = dataclasses.replace(scope, name=name, access=access)
    return [s for s, _, _ in templates]


def expand_mesh(mesh: MeshSpec, at: At, parts: ProfileParts) -> None:
    """Add the PEs of ``mesh`` (found at ``at``) to ``parts`` (top-level units and scopes
    already read)."""
    n, shared = mesh.rows * mesh.cols, set(parts.scopes)
    if n > MAX_PES:
        raise at.error("rows", f"rows x cols = {mesh.rows} x {mesh.cols} = {n:,} PEs, over "
                       f"the limit of {MAX_PES:,}")
    units = _add_units(mesh, at, parts, n)
    suffixes = _add_scopes(mesh, at, parts, n, units)
    grid = MeshGrid(rows=mesh.rows, cols=mesh.cols, scopes=tuple(suffixes),
                    units_overlap=mesh.units_overlap)
    if mesh.link is not None:
        scopes, paths = _links(mesh.link, At(at.source, at.key("link")), suffixes, mesh.rows,
                               mesh.cols)
        parts.copies += [("mesh.link", c) for c in paths]
        grid = dataclasses.replace(grid, link_scopes=tuple(scopes))
    if mesh.uplink is not None:
        to, scopes, paths, total = _uplinks(mesh.uplink, At(at.source, at.key("uplink")),
                                            suffixes, shared, n)
        parts.copies += [("mesh.uplink", c) for c in paths]
        grid = dataclasses.replace(grid, uplink_scopes=tuple(scopes), uplink_to=to,
                                   uplink_total_bps=total)
    parts.mesh = dataclasses.replace(grid, generated_copies=len(parts.copies))
