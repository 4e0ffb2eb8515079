"""TOML reading helpers for profiles: typed table access with file + dotted-key errors.

Shared by :mod:`autoplace.hardware.load` (the document) and :mod:`autoplace.hardware.mesh_expansion`
(the generated grid), so neither imports the other's internals.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from autoplace.graph import OP_KINDS
from autoplace.hardware.profile import (
    COPY_MODES,
    EXECUTIONS,
    WEIGHT_MODES,
    CopyPath,
    MeshGrid,
    ProfileError,
    Scope,
    Unit,
)
from autoplace.patterns import PATTERNS, known

REQUIRED: Any = object()
#: the largest number a profile may hold (1e12 MiB, GB/s, GFLOP/s or us: far past any
#: hardware, and small enough that bytes and seconds derived from it stay finite)
MAX_NUMBER = 1e12

_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a float",
               dict: "a table", list: "an array"}
MIB = 1 << 20


def type_name(value: object) -> str:
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

    def get(self, name: str, kinds: tuple[type, ...], what: str, default: Any = REQUIRED) -> Any:
        """The value of ``name`` if its type is one of ``kinds``, else ``default``."""
        self.used.add(name)
        if name not in self.data:
            if default is REQUIRED:
                raise self.error(self.key(name), "missing required key" + self._misspelt(name))
            return default
        value = self.data[name]
        # bool is an int subclass in Python, but `true` is never a valid TOML number here
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error(self.key(name), f"must be {what}, got {type_name(value)} {value!r}")
        return value

    def string(self, name: str, default: Any = REQUIRED) -> Any:
        """A string value."""
        return self.get(name, (str,), "a string", default)

    def number(self, name: str, default: Any = REQUIRED, *, positive: bool = False) -> float:
        """A finite number that is > 0 (``positive``) or >= 0, and at most
        :data:`MAX_NUMBER` (so every figure derived from it stays finite)."""
        value = self.get(name, (int, float), "a number", default)
        if not math.isfinite(value):
            raise self.error(self.key(name), f"must be a finite number, got {value!r}")
        if value > MAX_NUMBER:
            raise self.error(self.key(name), f"must be at most {MAX_NUMBER:g}, got {value!r}")
        if positive and not value > 0:
            raise self.error(self.key(name), f"must be > 0, got {value!r}")
        if not value >= 0:
            raise self.error(self.key(name), f"must be >= 0, got {value!r}")
        return float(value)

    def strings(self, name: str, default: Any = REQUIRED) -> list[str]:
        """A non-empty array of strings."""
        value = self.get(name, (list,), "an array of strings", default)
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise self.error(self.key(name), f"must be an array of strings, got {bad[0]!r}")
        if not value:
            raise self.error(self.key(name), "must not be empty")
        return list(value)

    def table(self, name: str, default: Any = REQUIRED) -> Table | Any:
        """A sub-table, read as a :class:`Table`."""
        value = self.get(name, (dict,), "a table", default)
        return Table(self.source, self.key(name), value) if isinstance(value, dict) else value

    def subtables(self) -> Iterator[tuple[str, Table]]:
        """Every entry of this table, each of which must itself be a table."""
        for name in self.data:
            yield name, self.table(name)

    def _misspelt(self, name: str) -> str:
        """Where the table has a key like ``name`` that no getter asked for: saying so."""
        near = difflib.get_close_matches(name, [k for k in self.data if k not in self.used],
                                         n=1, cutoff=0.6)
        return f" (the table has {near[0]!r}: misspelt?)" if near else ""

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


def _gflops(t: Table, accepts: list[str], patterns: list[str]) -> dict[str, float]:
    """The ``gflops`` table: per op kind the unit accepts, or per pattern of its table (the
    rate of that composite), or ``default``."""
    table = t.table("gflops")
    for kind in table.data:
        if patterns and kind != "default" and kind not in patterns:
            raise t.error(table.key(kind), f"{kind!r} is not in the unit's patterns (expected "
                          f"'default' or one of {', '.join(patterns)})")
        if kind != "default" and kind not in OP_KINDS and not patterns:
            raise t.error(table.key(kind), f"unknown op kind {kind!r} (expected 'default' or "
                          f"one of {', '.join(OP_KINDS)})")
    gflops = {kind: table.number(kind, positive=True) for kind in table.data}
    if "default" not in gflops:
        if "*" in accepts:
            raise t.error(table.key("default"), "missing: required when accepts is '*'")
        for key, kind in [("accepts", k) for k in accepts] + [("pattern", p) for p in patterns]:
            if kind not in gflops:
                raise t.error(table.key("default"), f"missing: {key} {kind!r} has no entry")
    return gflops


def _capability(t: Table) -> tuple[list[str], list[str]]:
    """``(accepts, patterns)``: the op kinds a unit runs, or its pattern table (the
    composites it runs, :data:`autoplace.patterns.PATTERNS`); one or the other."""
    if "patterns" not in t.data:
        accepts = t.strings("accepts")
        for kind in accepts:
            if kind != "*" and kind not in OP_KINDS:
                raise t.error(t.key("accepts"), f"unknown op kind {kind!r} (expected '*' or "
                              f"one of {', '.join(OP_KINDS)})")
        return accepts, []
    patterns = t.strings("patterns")
    if "accepts" in t.data:
        raise t.error(t.key("accepts"), "a unit with a pattern table runs what its patterns "
                      "match: give patterns or accepts, not both")
    for name in patterns:
        if not known(name):
            raise t.error(t.key("patterns"), f"unknown pattern {name!r} (expected one of "
                          f"{', '.join(PATTERNS)}, or an entry point package.module:function)")
    return [], patterns


def parse_unit(t: Table, name: str) -> Unit:
    """Read one ``[units.<name>]`` table (or a mesh unit template) into a :class:`Unit`."""
    target = _target(t)
    accepts, patterns = _capability(t)
    unit = Unit(name=name, target=target, accepts=frozenset(accepts),
                patterns=frozenset(patterns), gflops=_gflops(t, accepts, patterns),
                launch_overhead_s=1e-6 * t.number("launch_overhead_us", 0.0),
                handover_s=1e-6 * t.number("handover_us", 0.0),
                power_w=t.number("power_w", 0.0), idle_w=t.number("idle_w", 0.0),
                j_per_flop=_energy_per_flop(t, accepts, patterns),
                rpc_key=t.string("rpc_key", None),
                kernel_s=_kernel_table(t), weights=_weight_modes(t),
                class_name=t.string("class", ""), execution=_execution(t), cores=_cores(t),
                cpus=_cpus(t, target), cross_compiler=_compiler(t), codegen=_codegen(t, patterns))
    t.finish()
    return unit


def _energy_per_flop(t: Table, accepts: list[str], patterns: list[str]) -> dict[str, float]:
    """The optional ``pj_per_flop`` table (picojoules per FLOP per op kind or pattern, or
    ``default``) in joules; instead of ``power_w``: one way to say a unit's active energy."""
    table = t.table("pj_per_flop", None)
    if table is None:
        return {}
    if t.number("power_w", 0.0):
        raise t.error(t.key("pj_per_flop"), "a unit's active energy is power_w x busy time "
                      "or pj_per_flop x FLOPs: give one, not both")
    names = patterns or [k for k in accepts if k != "*"] or list(OP_KINDS)
    for name in table.data:
        if name != "default" and name not in (patterns or OP_KINDS):
            raise t.error(table.key(name), f"unknown {'pattern' if patterns else 'op kind'} "
                          f"{name!r} (expected 'default' or one of {', '.join(names)})")
    energy = {name: 1e-12 * table.number(name) for name in table.data}
    if "default" not in energy and any(n not in energy for n in names):
        missing = next(n for n in names if n not in energy)
        raise t.error(table.key("default"), f"missing: {missing!r} has no entry")
    return energy


def _codegen(t: Table, patterns: list[str]) -> str:
    """The ``codegen`` key: the name of a ``relax.ext.<name>`` code generator, on a unit
    with a pattern table (default "": none)."""
    value = t.string("codegen", "")
    if "codegen" in t.data and not value.isidentifier():
        raise t.error(t.key("codegen"), f"must be a code generator's name (relax.ext.<name>), "
                      f"got {value!r}")
    if value and not patterns:
        raise t.error(t.key("codegen"), "needs a pattern table (patterns = [...]): a code "
                      "generator builds the matches placed on the unit")
    return value


def _cpus(t: Table, target: dict) -> tuple[int, ...]:
    """The ``cpus`` key: distinct CPU ids (integers >= 0), as many as the target's
    ``num-cores`` when it has one (one thread of the unit's pool per CPU)."""
    value = t.get("cpus", (list,), "an array of CPU ids", [])
    if any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in value):
        raise t.error(t.key("cpus"), f"must be CPU ids (integers >= 0), got {value!r}")
    if len(set(value)) != len(value):
        raise t.error(t.key("cpus"), f"must not repeat a CPU, got {value!r}")
    cores = target.get("num-cores", len(value))
    if value and cores != len(value):
        raise t.error(t.key("cpus"), f"names {len(value)} CPUs, but the target has "
                      f"num-cores = {cores!r}")
    return tuple(value)


def _compiler(t: Table) -> str:
    """The ``cross_compiler`` key: a command (default "": the host's compiler)."""
    value = t.string("cross_compiler", "")
    if "cross_compiler" in t.data and not value.strip():
        raise t.error(t.key("cross_compiler"), "must name a C++ compiler, got an empty string")
    return value


def _cores(t: Table) -> int:
    """The ``cores`` key of a ``parallel`` unit: a positive integer (default 0: unbounded)."""
    value = t.number("cores", 0.0)
    if value != 0 and t.string("execution", "stream") != "parallel":
        raise t.error(t.key("cores"), "only a unit with execution = \"parallel\" has cores")
    if value < 0 or value != int(value):
        raise t.error(t.key("cores"), f"must be a positive integer, got {value!r}")
    return int(value)


def _execution(t: Table) -> str:
    """The ``execution`` key: one of EXECUTIONS (default ``stream``)."""
    value = t.string("execution", "stream")
    if value not in EXECUTIONS:
        raise t.error(t.key("execution"), f"must be one of {', '.join(EXECUTIONS)}, got "
                      f"{value!r}")
    return value


def _weight_modes(t: Table) -> frozenset[str]:
    """The ``weights`` key: a non-empty subset of WEIGHT_MODES (default: all)."""
    modes = t.strings("weights", list(WEIGHT_MODES))
    bad = [m for m in modes if m not in WEIGHT_MODES]
    if bad or not modes:
        what = f"unknown weight placement {bad[0]!r}" if bad else "must not be empty"
        raise t.error(t.key("weights"), f"{what} (expected some of {', '.join(WEIGHT_MODES)})")
    return frozenset(modes)


def _kernel_table(t: Table) -> dict[str, float]:
    """``[units.<name>.kernel_us]``: ``"kind:flops:bytes" = microseconds`` (calibrate)."""
    table = t.table("kernel_us", None)
    if table is None:
        return {}
    out = {}
    for key in table.data:
        kind, *rest = key.split(":")
        if kind not in OP_KINDS or len(rest) != 2 or not _numbers(rest):
            raise t.error(table.key(key), "expected a kernel key 'kind:flops:bytes' with a "
                          f"known op kind, e.g. 'conv2d:1.2e+08:460800', got {key!r}")
        out[key] = 1e-6 * table.number(key, positive=True)
    return out


def _numbers(texts: list[str]) -> bool:
    try:
        return all(float(x) >= 0 for x in texts)
    except ValueError:
        return False


def parse_scope(t: Table, name: str) -> Scope:
    """Read one ``[scopes.<name>]`` table (or a mesh scope template) into a :class:`Scope`."""
    capacity = round(MIB * t.number("capacity_mib", positive=True))
    if capacity < 1:
        raise t.error(t.key("capacity_mib"), f"must be at least one byte (1/{MIB} MiB), got "
                      f"{t.data['capacity_mib']!r}")
    scope = Scope(name=name, capacity_bytes=capacity,
                  bandwidth_bps=1e9 * t.number("bandwidth_gbps", positive=True),
                  access=frozenset(t.strings("access")),
                  read_j_per_byte=1e-12 * t.number("read_pj_per_byte", 0.0),
                  write_j_per_byte=1e-12 * t.number("write_pj_per_byte", 0.0))
    t.finish()
    return scope


def parse_copy_fields(t: Table) -> dict[str, Any]:
    """The ``bandwidth_gbps``, ``latency_us``, ``modes`` and ``pj_per_byte`` of a copy path,
    as CopyPath fields."""
    modes = t.strings("modes", ["sync"])
    for mode in modes:
        if mode not in COPY_MODES:
            raise t.error(t.key("modes"), f"unknown copy mode {mode!r} (expected one of "
                          f"{', '.join(COPY_MODES)})")
    return {"bandwidth_bps": 1e9 * t.number("bandwidth_gbps", positive=True),
            "latency_s": 1e-6 * t.number("latency_us", 0.0),
            "modes": tuple(m for m in COPY_MODES if m in modes),
            "j_per_byte": 1e-12 * t.number("pj_per_byte", 0.0)}


def parse_copy(t: Table, scopes: set[str]) -> list[CopyPath]:
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
    mesh: MeshGrid | None = None
