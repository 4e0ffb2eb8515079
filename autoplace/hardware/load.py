"""Read and validate hardware profiles (TOML) into :class:`autoplace.hardware.profile.Profile`.

The unit/scope/copy schema is documented in :mod:`autoplace.hardware.profile` and
docs/profile.md, and declared (keys, types, ranges, defaults) in
:mod:`autoplace.hardware.toml_schema`. Units convert on load: ``gflops`` stays GFLOP/s,
``launch_overhead_us``, ``handover_us`` and ``latency_us`` become seconds, ``capacity_mib``
becomes bytes (MiB = 2**20 B), ``bandwidth_gbps`` (GB/s = 1e9 B/s) becomes B/s.
Optional keys: ``name`` (default: the file stem), ``description``, ``units.*.rpc_key``,
``units.*.class`` (a label shared by units of one kind, which a profiled graph's measured
latencies may name), ``units.*.execution`` (``stream``, ``parallel`` or ``block``: how the
unit runs its ops, docs/simulator.md), ``units.*.cores`` (a parallel unit's cores, for its
period; default unbounded),
``launch_overhead_us``, ``handover_us`` (the wait for work on another resource, as the
runtime's events cost it: docs/simulator.md, "Schedule") and ``power_w`` (default 0),
``copies`` (default none),
``copies[i].latency_us`` (default 0), ``modes`` (default ``["sync"]``), ``dma`` and
``bidirectional``. Every other key is required and unknown keys are errors.

A top-level ``[mesh]`` table generates a ``rows`` x ``cols`` grid of processing elements (PEs)
and adds their units, scopes and copy paths to the top-level ones::

    [mesh]
    rows = 4                   # PE count = rows * cols; PE k = r * cols + c is named "pe<k>"
    cols = 4
    units_overlap = false      # optional: a PE's units run ops of different inferences at once
    [mesh.units.arm]           # unit template, same keys as [units.*] -> pe0.arm, pe1.arm, ...
    target = { kind = "llvm", num-cores = 1 }
    accepts = ["*"]
    rpc_key = "mesh-{pe}"      # optional; "{pe}" becomes the PE index
    gflops = { default = 1.0 }
    [mesh.scopes.mem]          # per-PE scope template -> pe0.mem, pe1.mem, ...
    capacity_mib = 2
    bandwidth_gbps = 16.0
    access = ["arm", "npu"]    # unit suffixes of the same PE; "*" = all units of that PE
    [mesh.link]                # copy paths between 4-neighbour PEs, both directions
    bandwidth_gbps = 4.0
    latency_us = 0.5
    modes = ["sync", "async"]
    dma = "dma"                # optional: the engine of the source PE, "pe<k>.dma" (default)
    scope = "mem"              # optional: which local scope to link (default: all of them)
    [mesh.uplink]              # copy paths between each PE's local scope and a shared scope
    to = "dram"                # a top-level scope; both directions, engine "pe<k>.<dma>"
    bandwidth_gbps = 2.0
    latency_us = 2.0
    modes = ["sync", "async"]
    total_gbps = 25.6          # optional: what all uplinks move together at most (the shared
                               # scope's bandwidth; a pipeline's graph inputs, outputs and
                               # streamed weights share it); default: no limit

Every error is a :class:`ProfileError` with one line: ``<file>: <dotted.key>: <what is wrong>``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import autoplace
from autoplace.hardware.mesh_expansion import expand_mesh
from autoplace.hardware.profile import Profile, ProfileError
from autoplace.hardware.toml_schema import ProfileSpec, read
from autoplace.hardware.toml_tables import At, ProfileParts, parse_copy, parse_scope, parse_unit

__all__ = ["bundled_profiles", "load_profile", "profile_from_toml"]


def _parse_top(doc: ProfileSpec, at: At) -> ProfileParts:
    parts = ProfileParts({}, {}, [], {})
    for key in ("units", "scopes"):
        if getattr(doc, key) is None and doc.mesh is None:
            raise at.error(key, "missing required key")
    for name, spec in (doc.units or {}).items():
        where = At(at.source, f"units.{name}")
        parts.units[name] = parse_unit(spec, where, name)
        parts.origin[name] = where.path
    for name, spec in (doc.scopes or {}).items():
        parts.scopes[name] = parse_scope(spec, At(at.source, f"scopes.{name}"), name)
    if doc.mesh is not None:
        expand_mesh(doc.mesh, At(at.source, "mesh"), parts)
    scope_names = set(parts.scopes)
    for i, spec in enumerate(doc.copies):
        key = f"copies[{i}]"
        for path in parse_copy(spec, At(at.source, key), scope_names):
            parts.copies.append((key, path))
    return parts


def _check_copies(at: At, parts: ProfileParts) -> None:
    seen: dict[tuple[str, str], str] = {}
    for key, c in parts.copies:
        if (c.src, c.dst) in seen:
            first = seen[c.src, c.dst]
            raise at.error(key, f"duplicate copy path {c.src}->{c.dst} (also {first})")
        seen[c.src, c.dst] = key


def _check_access(at: At, parts: ProfileParts, default_scope: str) -> None:
    reached: set[str] = set()
    for name, scope in parts.scopes.items():
        for unit in sorted(scope.access - {"*"}):
            if unit not in parts.units:
                raise at.error(f"scopes.{name}.access", f"unit {unit!r} is not defined")
        reached |= set(parts.units) if "*" in scope.access else scope.access
    default = parts.scopes[default_scope].access
    for name in parts.units:
        if name not in reached:
            raise at.error(parts.origin[name], f"unit {name!r} can access no scope "
                           "(list it in some scope's access)")
        unit = parts.units[name]
        sealed = unit.execution == "block" and unit.weights == {"resident"}
        if "*" not in default and name not in default and not sealed:
            raise at.error(parts.origin[name], f"unit {name!r} cannot access default_scope "
                           f"{default_scope!r} (graph inputs and weights live there; only a "
                           "block unit with resident weights, whose inputs arrive by its "
                           "transfers, may do without it)")


def _check_execution(at: At, parts: ProfileParts) -> None:
    """The block model has no program-order queues: with a ``block`` unit, every other
    unit must run ``parallel`` or ``block`` (docs/simulator.md)."""
    if not any(u.execution == "block" for u in parts.units.values()):
        return
    for name, unit in parts.units.items():
        if unit.handover_s:
            raise at.error(f"{parts.origin[name]}.handover_us", "the block model has no "
                           "hand-over (nothing waits for a resource); leave it out")
        if unit.execution == "stream":
            raise at.error(f"{parts.origin[name]}.execution", "must be 'parallel' or 'block' "
                           "in a profile with block units (got 'stream', the default)")


def _parse_profile(doc: ProfileSpec, source: str) -> Profile:
    at = At(source, "")
    parts = _parse_top(doc, at)
    if doc.host not in parts.units:
        raise at.error("host", f"unit {doc.host!r} is not defined")
    if doc.default_scope not in parts.scopes:
        raise at.error("default_scope", f"scope {doc.default_scope!r} is not defined")
    _check_access(at, parts, doc.default_scope)
    _check_copies(at, parts)
    _check_execution(at, parts)
    return Profile(name=Path(source).stem if doc.name is None else doc.name, host=doc.host,
                   default_scope=doc.default_scope, units=tuple(parts.units.values()),
                   scopes=tuple(parts.scopes.values()),
                   copies=tuple(c for _, c in parts.copies), description=doc.description,
                   source=source, mesh=parts.mesh)


# -- public API -----------------------------------------------------------------------------------
def bundled_profiles() -> dict[str, Path]:
    """The profiles shipped in ``hwprofiles/`` at the repository root, by name."""
    root = Path(autoplace.__file__).resolve().parent.parent / "hwprofiles"
    return {p.stem: p for p in sorted(root.glob("*.toml"))}


def _resolve(spec: str | Path) -> Path:
    bundled = bundled_profiles()
    text = str(spec)
    if isinstance(spec, str) and text in bundled:
        return bundled[text]
    path = Path(spec)
    if path.is_file():
        return path
    raise ProfileError(f"{text or repr(text)}: no such profile file or bundled profile "
                       f"(bundled: {', '.join(bundled) or 'none'})")


def load_profile(spec: str | Path) -> Profile:
    """Load a bundled profile by name (``"soc"``) or a TOML file by path, and validate it."""
    path = _resolve(spec)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    return profile_from_toml(text, str(path))


def profile_from_toml(text: str, source: str) -> Profile:
    """The profile TOML ``text`` describes, validated (``source``: the file it came from,
    which errors name)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: TOML syntax error: {exc}") from None
    return _parse_profile(read(data, source), source)
