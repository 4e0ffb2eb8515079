"""Read and validate hardware profiles (TOML) into :class:`autoplace.profile.Profile`.

The unit/scope/copy schema is documented in :mod:`autoplace.profile`. Units convert on load:
``gflops`` stays GFLOP/s, ``launch_overhead_us`` and ``latency_us`` become seconds,
``capacity_mib`` becomes bytes (MiB = 2**20 B), ``bandwidth_gbps`` (GB/s = 1e9 B/s) becomes B/s.
Optional keys: ``name`` (default: the file stem), ``description``, ``units.*.rpc_key``,
``launch_overhead_us`` and ``power_w`` (default 0), ``copies`` (default none),
``copies[i].latency_us`` (default 0), ``modes`` (default ``["sync"]``), ``dma`` and
``bidirectional``. Every other key is required and unknown keys are errors.

A top-level ``[mesh]`` table generates a ``rows`` x ``cols`` grid of processing elements (PEs)
and adds their units, scopes and copy paths to the top-level ones::

    [mesh]
    rows = 4                   # PE count = rows * cols; PE k = r * cols + c is named "pe<k>"
    cols = 4
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

Every error is a :class:`ProfileError` with one line: ``<file>: <dotted.key>: <what is wrong>``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import autoplace
from autoplace.graph import OP_KINDS, OpGraph
from autoplace.profile import COPY_MODES, CopyPath, Profile, ProfileError, Scope, Unit

__all__ = ["bundled_profiles", "check_graph", "load_profile"]

_REQUIRED: Any = object()
_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a float",
               dict: "a table", list: "an array"}
MIB = 1 << 20


def _type_name(value: object) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class Table:
    """A TOML table being read: typed getters whose errors name the file and the dotted key."""

    def __init__(self, source: str, path: str, data: Mapping[str, Any]) -> None:
        self.source, self.path, self.data = source, path, data
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        """The dotted path of ``name`` inside this table."""
        return f"{self.path}.{name}" if self.path else name

    def error(self, key: str, what: str) -> ProfileError:
        """A one-line error naming the file and ``key``."""
        return ProfileError(f"{self.source}: {key}: {what}")

    def get(self, name: str, kinds: tuple[type, ...], what: str, default: Any = _REQUIRED) -> Any:
        """The value of ``name`` if its type is one of ``kinds``, else ``default``."""
        self.used.add(name)
        if name not in self.data:
            if default is _REQUIRED:
                raise self.error(self.key(name), "missing required key")
            return default
        value = self.data[name]
        # bool is an int subclass in Python, but `true` is never a valid TOML number here
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error(self.key(name), f"must be {what}, got {_type_name(value)} {value!r}")
        return value

    def string(self, name: str, default: Any = _REQUIRED) -> Any:
        """A string value."""
        return self.get(name, (str,), "a string", default)

    def number(self, name: str, default: Any = _REQUIRED, *, positive: bool = False) -> float:
        """A number that is > 0 (``positive``) or >= 0."""
        value = self.get(name, (int, float), "a number", default)
        if positive and not value > 0:
            raise self.error(self.key(name), f"must be > 0, got {value!r}")
        if not value >= 0:
            raise self.error(self.key(name), f"must be >= 0, got {value!r}")
        return float(value)

    def strings(self, name: str, default: Any = _REQUIRED) -> list[str]:
        """A non-empty array of strings."""
        value = self.get(name, (list,), "an array of strings", default)
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise self.error(self.key(name), f"must be an array of strings, got {bad[0]!r}")
        if not value:
            raise self.error(self.key(name), "must not be empty")
        return list(value)

    def table(self, name: str, default: Any = _REQUIRED) -> Table | Any:
        """A sub-table, read as a :class:`Table`."""
        value = self.get(name, (dict,), "a table", default)
        return Table(self.source, self.key(name), value) if isinstance(value, dict) else value

    def subtables(self) -> Iterator[tuple[str, Table]]:
        """Every entry of this table, each of which must itself be a table."""
        for name in self.data:
            yield name, self.table(name)

    def finish(self) -> None:
        """Fail on the first key no getter asked for."""
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            raise self.error(self.key(unknown[0]), "unknown key")


# -- units, scopes, copies --------------------------------------------------------------------
def _target(t: Table) -> dict[str, Any]:
    target = t.data.get("target")
    t.used.add("target")
    if target is None:
        raise t.error(t.key("target"), "missing required key")
    if not isinstance(target, dict) or not isinstance(target.get("kind"), str):
        raise t.error(t.key("target"), f"must be a table with a string 'kind', got {target!r}")
    return dict(target)


def _gflops(t: Table, accepts: list[str]) -> dict[str, float]:
    table = t.table("gflops")
    for kind in table.data:
        if kind != "default" and kind not in OP_KINDS:
            raise t.error(table.key(kind), f"unknown op kind {kind!r} (expected 'default' or "
                          f"one of {', '.join(OP_KINDS)})")
    gflops = {kind: table.number(kind, positive=True) for kind in table.data}
    if "default" not in gflops:
        if "*" in accepts:
            raise t.error(table.key("default"), "missing: required when accepts is '*'")
        for kind in accepts:
            if kind not in gflops:
                raise t.error(table.key("default"), f"missing: accepts {kind!r} has no entry")
    return gflops


def parse_unit(t: Table, name: str) -> Unit:
    """Read one ``[units.<name>]`` table (or a mesh unit template) into a :class:`Unit`."""
    target = _target(t)
    accepts = t.strings("accepts")
    for kind in accepts:
        if kind != "*" and kind not in OP_KINDS:
            raise t.error(t.key("accepts"), f"unknown op kind {kind!r} (expected '*' or one "
                          f"of {', '.join(OP_KINDS)})")
    unit = Unit(name=name, target=target, accepts=frozenset(accepts), gflops=_gflops(t, accepts),
                launch_overhead_s=1e-6 * t.number("launch_overhead_us", 0.0),
                power_w=t.number("power_w", 0.0), rpc_key=t.string("rpc_key", None))
    t.finish()
    return unit


def parse_scope(t: Table, name: str) -> Scope:
    """Read one ``[scopes.<name>]`` table (or a mesh scope template) into a :class:`Scope`."""
    scope = Scope(name=name, capacity_bytes=round(MIB * t.number("capacity_mib", positive=True)),
                  bandwidth_bps=1e9 * t.number("bandwidth_gbps", positive=True),
                  access=frozenset(t.strings("access")))
    t.finish()
    return scope


def parse_copy_fields(t: Table) -> dict[str, Any]:
    """The ``bandwidth_gbps``, ``latency_us`` and ``modes`` of a copy path, as CopyPath fields."""
    modes = t.strings("modes", ["sync"])
    for mode in modes:
        if mode not in COPY_MODES:
            raise t.error(t.key("modes"), f"unknown copy mode {mode!r} (expected one of "
                          f"{', '.join(COPY_MODES)})")
    return {"bandwidth_bps": 1e9 * t.number("bandwidth_gbps", positive=True),
            "latency_s": 1e-6 * t.number("latency_us", 0.0),
            "modes": tuple(m for m in COPY_MODES if m in modes)}


def _parse_copy(t: Table, scopes: set[str]) -> list[CopyPath]:
    src, dst = t.string("src"), t.string("dst")
    for key, name in (("src", src), ("dst", dst)):
        if name not in scopes:
            raise t.error(t.key(key), f"scope {name!r} is not defined")
    if src == dst:
        raise t.error(t.key("dst"), f"copy from scope {src!r} to itself")
    fields = parse_copy_fields(t)
    engine = t.string("dma", f"dma:{src}->{dst}")
    both = t.get("bidirectional", (bool,), "a boolean", False)
    t.finish()
    forward = CopyPath(src=src, dst=dst, engine=engine, **fields)
    return [forward, CopyPath(src=dst, dst=src, engine=engine, **fields)] if both else [forward]


# -- the whole document ---------------------------------------------------------------------------
@dataclass
class ProfileParts:
    """Units, scopes and copies read so far, with the key each unit came from (for errors)."""

    units: dict[str, Unit]
    scopes: dict[str, Scope]
    copies: list[tuple[str, CopyPath]]
    origin: dict[str, str]


def _parse_top(doc: Table) -> ProfileParts:
    has_mesh = "mesh" in doc.data
    units = doc.table("units", {} if has_mesh else _REQUIRED)
    scopes = doc.table("scopes", {} if has_mesh else _REQUIRED)
    parts = ProfileParts({}, {}, [], {})
    for name, t in units.subtables() if isinstance(units, Table) else ():
        parts.units[name] = parse_unit(t, name)
        parts.origin[name] = t.path
    for name, t in scopes.subtables() if isinstance(scopes, Table) else ():
        parts.scopes[name] = parse_scope(t, name)
    if has_mesh:
        from autoplace.profile_mesh import expand_mesh  # profile_mesh builds on this module

        expand_mesh(doc.table("mesh"), parts)
    copies, scope_names = doc.get("copies", (list,), "an array of tables", []), set(parts.scopes)
    for i, entry in enumerate(copies):
        key = f"copies[{i}]"
        if not isinstance(entry, dict):
            raise doc.error(key, f"must be a table, got {_type_name(entry)} {entry!r}")
        for path in _parse_copy(Table(doc.source, key, entry), scope_names):
            parts.copies.append((key, path))
    return parts


def _check_copies(doc: Table, parts: ProfileParts) -> None:
    seen: dict[tuple[str, str], str] = {}
    for key, c in parts.copies:
        if (c.src, c.dst) in seen:
            first = seen[c.src, c.dst]
            raise doc.error(key, f"duplicate copy path {c.src}->{c.dst} (also {first})")
        seen[c.src, c.dst] = key


def _check_access(doc: Table, parts: ProfileParts, default_scope: str) -> None:
    reached: set[str] = set()
    for name, scope in parts.scopes.items():
        for unit in sorted(scope.access - {"*"}):
            if unit not in parts.units:
                raise doc.error(f"scopes.{name}.access", f"unit {unit!r} is not defined")
        reached |= set(parts.units) if "*" in scope.access else scope.access
    default = parts.scopes[default_scope].access
    for name in parts.units:
        if name not in reached:
            raise doc.error(parts.origin[name], f"unit {name!r} can access no scope "
                            "(list it in some scope's access)")
        if "*" not in default and name not in default:
            raise doc.error(parts.origin[name], f"unit {name!r} cannot access default_scope "
                            f"{default_scope!r} (graph inputs and weights live there)")


def _parse_profile(doc: Table, stem: str) -> Profile:
    name = doc.string("name", stem)
    description = doc.string("description", "")
    host, default_scope = doc.string("host"), doc.string("default_scope")
    parts = _parse_top(doc)
    doc.finish()
    if host not in parts.units:
        raise doc.error("host", f"unit {host!r} is not defined")
    if default_scope not in parts.scopes:
        raise doc.error("default_scope", f"scope {default_scope!r} is not defined")
    _check_access(doc, parts, default_scope)
    _check_copies(doc, parts)
    return Profile(name=name, host=host, default_scope=default_scope,
                   units=tuple(parts.units.values()), scopes=tuple(parts.scopes.values()),
                   copies=tuple(c for _, c in parts.copies), description=description,
                   source=doc.source)


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
    raise ProfileError(f"{text}: no such profile file or bundled profile "
                       f"(bundled: {', '.join(bundled) or 'none'})")


def load_profile(spec: str | Path) -> Profile:
    """Load a bundled profile by name (``"soc"``) or a TOML file by path, and validate it."""
    path = _resolve(spec)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: TOML syntax error: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    return _parse_profile(Table(str(path), "", data), path.stem)


def check_graph(profile: Profile, graph: OpGraph) -> None:
    """Raise :class:`ProfileError` if some op of ``graph`` is accepted by no unit of ``profile``."""
    kinds = {op.kind for op in graph.ops}
    accepted = {k for k in kinds if any(u.accepts_kind(k) for u in profile.units)}
    for op in graph.ops:
        if op.kind not in accepted:
            raise ProfileError(f"{profile.source}: no unit accepts op {op.name!r} of kind "
                               f"{op.kind!r} (graph {graph.name})")
