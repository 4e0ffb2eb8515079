"""A profile's tables, their shape already checked (:mod:`autoplace.hardware.toml_schema`),
made units, scopes and copy paths: units converted, and what no type can say checked (a
gflops entry per op kind the unit accepts, a kernel key's form, a scope a copy names
defined, keys that exclude each other), with errors naming the file and the dotted key.

Shared by :mod:`autoplace.hardware.load` (the document) and :mod:`autoplace.hardware.mesh_expansion`
(the generated grid), so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoplace.graph import OP_KINDS
from autoplace.hardware.profile import (
    COPY_MODES,
    CopyPath,
    MeshGrid,
    ProfileError,
    Scope,
    Unit,
)
from autoplace.hardware.toml_schema import CopySpec, PathSpec, ScopeSpec, UnitSpec
from autoplace.patterns import PATTERNS, known

MIB = 1 << 20


@dataclass(frozen=True)
class At:
    """Where in which file a table is (``units.cpu``), for errors."""

    source: str
    path: str

    def key(self, name: str) -> str:
        """The dotted path of ``name`` inside this table."""
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str | None, what: str) -> ProfileError:
        """A one-line error naming the file and the key ``name`` (None: the table)."""
        return ProfileError(f"{self.source}: {self.path if name is None else self.key(name)}: "
                            f"{what}")


# -- units ------------------------------------------------------------------------------------
def parse_unit(spec: UnitSpec, at: At, name: str) -> Unit:
    """One ``[units.<name>]`` table (or a mesh unit template) as a :class:`Unit`."""
    accepts, patterns = _capability(spec, at)
    return Unit(name=name, target=_target(spec, at), accepts=frozenset(accepts),
                patterns=frozenset(patterns), gflops=_gflops(spec, at, accepts, patterns),
                launch_overhead_s=1e-6 * spec.launch_overhead_us,
                handover_s=1e-6 * spec.handover_us, power_w=spec.power_w, idle_w=spec.idle_w,
                j_per_flop=_energy_per_flop(spec, at, accepts, patterns),
                rpc_key=spec.rpc_key, kernel_s=_kernel_table(spec, at),
                weights=frozenset(spec.weights), class_name=spec.class_name,
                execution=spec.execution, cores=_cores(spec, at), cpus=_cpus(spec, at),
                cross_compiler=_compiler(spec, at), codegen=_codegen(spec, at, patterns))


def _target(spec: UnitSpec, at: At) -> dict[str, Any]:
    if not isinstance(spec.target.get("kind"), str):
        raise at.error("target", f"must be a table with a string 'kind', got {spec.target!r}")
    return dict(spec.target)


def _capability(spec: UnitSpec, at: At) -> tuple[list[str], list[str]]:
    """``(accepts, patterns)``: the op kinds a unit runs, or its pattern table (the
    composites it runs, :data:`autoplace.patterns.PATTERNS`); one or the other."""
    if spec.patterns is None:
        if spec.accepts is None:
            raise at.error("accepts", "missing required key (or patterns)")
        return list(spec.accepts), []
    if spec.accepts is not None:
        raise at.error("accepts", "a unit with a pattern table runs what its patterns "
                       "match: give patterns or accepts, not both")
    for name in spec.patterns:
        if not known(name):
            raise at.error("patterns", f"unknown pattern {name!r} (expected one of "
                           f"{', '.join(PATTERNS)}, or an entry point package.module:function)")
    return [], list(spec.patterns)


def _gflops(spec: UnitSpec, at: At, accepts: list[str], patterns: list[str]) -> dict[str, float]:
    """The ``gflops`` table: per op kind the unit accepts, or per pattern of its table (the
    rate of that composite), or ``default``."""
    gflops, table = dict(spec.gflops), At(at.source, at.key("gflops"))
    for kind in gflops:
        if patterns and kind != "default" and kind not in patterns:
            raise table.error(kind, f"{kind!r} is not in the unit's patterns (expected "
                              f"'default' or one of {', '.join(patterns)})")
        if kind != "default" and kind not in OP_KINDS and not patterns:
            raise table.error(kind, f"unknown op kind {kind!r} (expected 'default' or one "
                              f"of {', '.join(OP_KINDS)})")
    if "default" not in gflops:
        if "*" in accepts:
            raise table.error("default", "missing: required when accepts is '*'")
        for key, kind in [("accepts", k) for k in accepts] + [("pattern", p) for p in patterns]:
            if kind not in gflops:
                raise table.error("default", f"missing: {key} {kind!r} has no entry")
    return gflops


def _energy_per_flop(spec: UnitSpec, at: At, accepts: list[str],
                     patterns: list[str]) -> dict[str, float]:
    """The optional ``pj_per_flop`` table (picojoules per FLOP per op kind or pattern, or
    ``default``) in joules; instead of ``power_w``: one way to say a unit's active energy."""
    if spec.pj_per_flop is None:
        return {}
    if spec.power_w:
        raise at.error("pj_per_flop", "a unit's active energy is power_w x busy time "
                       "or pj_per_flop x FLOPs: give one, not both")
    names = patterns or [k for k in accepts if k != "*"] or list(OP_KINDS)
    what = "pattern" if patterns else "op kind"
    for name in spec.pj_per_flop:
        if name != "default" and name not in (patterns or OP_KINDS):
            raise at.error(f"pj_per_flop.{name}", f"unknown {what} {name!r} (expected "
                           f"'default' or one of {', '.join(names)})")
    energy = {name: 1e-12 * pj for name, pj in spec.pj_per_flop.items()}
    if "default" not in energy and any(n not in energy for n in names):
        missing = next(n for n in names if n not in energy)
        raise at.error("pj_per_flop.default", f"missing: {missing!r} has no entry")
    return energy


def _codegen(spec: UnitSpec, at: At, patterns: list[str]) -> str:
    """The ``codegen`` key: the name of a ``relax.ext.<name>`` code generator, on a unit
    with a pattern table (default "": none)."""
    if spec.codegen is None:
        return ""
    if not spec.codegen.isidentifier():
        raise at.error("codegen", "must be a code generator's name (relax.ext.<name>), got "
                       f"{spec.codegen!r}")
    if not patterns:
        raise at.error("codegen", "needs a pattern table (patterns = [...]): a code "
                       "generator builds the matches placed on the unit")
    return spec.codegen


def _cpus(spec: UnitSpec, at: At) -> tuple[int, ...]:
    """The ``cpus`` key: distinct CPU ids, as many as the target's ``num-cores`` when it
    has one (one thread of the unit's pool per CPU)."""
    value = spec.cpus
    if len(set(value)) != len(value):
        raise at.error("cpus", f"must not repeat a CPU, got {value!r}")
    cores = spec.target.get("num-cores", len(value))
    if value and cores != len(value):
        raise at.error("cpus", f"names {len(value)} CPUs, but the target has "
                       f"num-cores = {cores!r}")
    return tuple(value)


def _compiler(spec: UnitSpec, at: At) -> str:
    """The ``cross_compiler`` key: a command (default "": the host's compiler)."""
    if spec.cross_compiler is not None and not spec.cross_compiler.strip():
        raise at.error("cross_compiler", "must name a C++ compiler, got an empty string")
    return spec.cross_compiler or ""


def _cores(spec: UnitSpec, at: At) -> int:
    """The ``cores`` key: only a ``parallel`` unit has them (default 0: unbounded)."""
    if spec.cores and spec.execution != "parallel":
        raise at.error("cores", "only a unit with execution = \"parallel\" has cores")
    return spec.cores


def _kernel_table(spec: UnitSpec, at: At) -> dict[str, float]:
    """``[units.<name>.kernel_us]``: ``"kind:flops:bytes" = microseconds`` (calibrate)."""
    for key in spec.kernel_us:
        kind, *rest = key.split(":")
        if kind not in OP_KINDS or len(rest) != 2 or not _numbers(rest):
            raise at.error(f"kernel_us.{key}", "expected a kernel key 'kind:flops:bytes' "
                           "with a known op kind, e.g. 'conv2d:1.2e+08:460800', got "
                           f"{key!r}")
    return {key: 1e-6 * us for key, us in spec.kernel_us.items()}


def _numbers(texts: list[str]) -> bool:
    try:
        return all(float(x) >= 0 for x in texts)
    except ValueError:
        return False


# -- scopes and copies ------------------------------------------------------------------------
def parse_scope(spec: ScopeSpec, at: At, name: str) -> Scope:
    """One ``[scopes.<name>]`` table (or a mesh scope template) as a :class:`Scope`."""
    capacity = round(MIB * spec.capacity_mib)
    if capacity < 1:
        raise at.error("capacity_mib", f"must be at least one byte (1/{MIB} MiB), got "
                       f"{spec.capacity_mib!r}")
    return Scope(name=name, capacity_bytes=capacity, bandwidth_bps=1e9 * spec.bandwidth_gbps,
                 access=frozenset(spec.access),
                 read_j_per_byte=1e-12 * spec.read_pj_per_byte,
                 write_j_per_byte=1e-12 * spec.write_pj_per_byte)


def parse_copy_fields(spec: PathSpec) -> dict[str, Any]:
    """The ``bandwidth_gbps``, ``latency_us``, ``modes`` and ``pj_per_byte`` of a copy path,
    as CopyPath fields."""
    return {"bandwidth_bps": 1e9 * spec.bandwidth_gbps, "latency_s": 1e-6 * spec.latency_us,
            "modes": tuple(m for m in COPY_MODES if m in spec.modes),
            "j_per_byte": 1e-12 * spec.pj_per_byte}


def parse_copy(spec: CopySpec, at: At, scopes: set[str]) -> list[CopyPath]:
    """One ``[[copies]]`` entry: its path, and the reverse one if ``bidirectional``."""
    for key, name in (("src", spec.src), ("dst", spec.dst)):
        if name not in scopes:
            raise at.error(key, f"scope {name!r} is not defined")
    if spec.src == spec.dst:
        raise at.error("dst", f"copy from scope {spec.src!r} to itself")
    fields, engine = parse_copy_fields(spec), spec.dma
    engine = f"dma:{spec.src}->{spec.dst}" if engine is None else engine
    forward = CopyPath(src=spec.src, dst=spec.dst, engine=engine, **fields)
    if not spec.bidirectional:
        return [forward]
    return [forward, CopyPath(src=spec.dst, dst=spec.src, engine=engine, **fields)]


# -- the whole document ---------------------------------------------------------------------------
@dataclass
class ProfileParts:
    """Units, scopes and copies read so far, with the key each unit came from (for errors)."""

    units: dict[str, Unit]
    scopes: dict[str, Scope]
    copies: list[tuple[str, CopyPath]]
    origin: dict[str, str]
    mesh: MeshGrid | None = None
