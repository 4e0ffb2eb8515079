"""Hardware profiles: named compute units, memory scopes and copy paths.

A profile is data: a TOML file (``hwprofiles/*.toml``) read with :mod:`tomllib` into the
frozen dataclasses below. Every key is in docs/profile.md; the TOML schema, in units a
datasheet uses::

    name = "soc"
    description = "two CPUs, two accelerators, DRAM + on-chip SRAM"
    host = "cpu1"              # the unit that performs sync copies
    default_scope = "dram"     # where graph inputs and weights live; every unit reads it

    [units.cpu1]
    target = { kind = "llvm", num-cores = 1 }   # a TVM target dict
    rpc_key = "soc-cpu1"       # optional: the RPC tracker key of a real board
    accepts = ["*"]            # op kinds it runs (see autoplace.graph.OP_KINDS), "*" = all
    # patterns = ["conv2d_bias_relu", "attention"]  # or, instead of accepts: the composites
    #                          # it runs (autoplace.patterns.PATTERNS), gflops per pattern
    # codegen = "autoplace_ref"  # with patterns: the relax.ext.<name> BYOC code generator
    launch_overhead_us = 2.0   # fixed cost per kernel launch
    handover_us = 17.0         # optional: its wait for work on another unit (default 0)
    power_w = 1.5              # optional: active power, for energy (default 0)
    idle_w = 0.2               # optional: power while an inference runs and it idles
    # pj_per_flop = { default = 5.0 }  # optional, instead of power_w: energy per FLOP
    weights = ["resident", "streamed"]  # optional: where its ops' weights may live (default both)
    cpus = [0]                 # optional: the CPUs the runtime runs its kernels on (pinned)
    cross_compiler = "aarch64-linux-gnu-g++"  # optional: links its kernels (another CPU)
    [units.cpu1.gflops]        # throughput per op kind; "default" for the others
    default = 8.0
    conv2d = 12.0

    [scopes.dram]
    capacity_mib = 2048
    bandwidth_gbps = 12.8      # GB/s seen by a kernel reading or writing this scope
    access = ["cpu1", "cpu2"]  # units that may read and write it, or ["*"]
    read_pj_per_byte = 20.0    # optional: energy per byte read, and written (default 0)
    write_pj_per_byte = 25.0

    [[copies]]                 # a copy path between two scopes
    src = "dram"
    dst = "sram1"
    bandwidth_gbps = 6.0
    latency_us = 1.0
    modes = ["sync", "async"]  # sync: the host copies; async: a DMA engine copies
    dma = "dma0"               # the async engine (one copy at a time); default "dma:src->dst"
    bidirectional = true       # also dst -> src with the same numbers (default false)
    pj_per_byte = 10.0         # optional: energy per byte moved over the path (default 0)

A ``[mesh]`` table generates a grid of processing elements from templates; see
:func:`autoplace.hardware.load.load_profile` for that part of the schema.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoplace.patterns import is_entry_point

COPY_MODES = ("sync", "async")
#: how a unit runs the ops placed on it (docs/simulator.md): ``stream`` one at a time in
#: program order; ``parallel`` as many at once as are ready (no contention: a pool of cores
#: as wide as the graph); ``block`` each contiguous piece of its ops as one block that
#: starts once all its inputs are present (an accelerator loaded with a subgraph)
EXECUTIONS = ("stream", "parallel", "block")
#: where an op's weights live: ``streamed`` from the default scope each run, or ``resident``
#: in the op's own scope for the whole run (see docs/simulator.md)
WEIGHT_MODES = ("streamed", "resident")


class ProfileError(ValueError):
    """A profile is malformed; the message names the file, the key and what is wrong."""


@dataclass(frozen=True, kw_only=True)
class Unit:
    """A compute unit (the seed threads' "target_arch": ``cpu1``, ``dsp_cpu``, ...)."""

    name: str
    target: Mapping[str, object]
    accepts: frozenset[str]
    gflops: Mapping[str, float]
    launch_overhead_s: float = 0.0
    #: the time from the end of work on another resource to the start of this unit's work
    #: that waits for it (the runtime: an event set, a worker woken); not busy time
    handover_s: float = 0.0
    power_w: float = 0.0
    #: power drawn while an inference runs and the unit is not busy (static power)
    idle_w: float = 0.0
    #: energy per FLOP (joules) per op kind or pattern (``default`` for the others): the
    #: unit's active energy counted per operation instead of ``power_w`` x busy time
    j_per_flop: Mapping[str, float] = field(default_factory=dict)
    rpc_key: str | None = None
    #: measured seconds per call of known kernels (``Op.kernel_key`` -> s), from
    #: ``autoplace calibrate``; they replace the roofline estimate of those ops
    kernel_s: Mapping[str, float] = field(default_factory=dict)
    #: weight placements it supports (an analog in-memory array: ``{"resident"}``)
    weights: frozenset[str] = frozenset(WEIGHT_MODES)
    #: a label shared by units of one kind (``class = "fpga"``): a profiled graph's measured
    #: latencies may name it instead of each unit; "" means the unit's own name
    class_name: str = ""
    #: one of :data:`EXECUTIONS`
    execution: str = "stream"
    #: a ``parallel`` unit's cores: its period is at least its ops' time over them (0: as
    #: many as there are ops; its latency never waits for a core either way)
    cores: int = 0
    #: the CPUs (OS core ids) the runtime's worker for this unit and its thread pool run on,
    #: one thread each (``cpus = [0]``); empty: its ``num-cores`` threads, not pinned
    cpus: tuple[int, ...] = ()
    #: the C++ compiler that links its kernel libraries (``aarch64-linux-gnu-g++`` for a
    #: board of another architecture); "": the host's. How a build is made, not what the
    #: hardware is: it is not part of :attr:`Profile.hash`
    cross_compiler: str = ""
    #: its pattern table (names of :data:`autoplace.patterns.PATTERNS`): it runs an op only
    #: where one of them matches it (``OpGraph.matches``); empty: ``accepts`` says
    patterns: frozenset[str] = frozenset()
    #: the Relax BYOC code generator (``relax.ext.<codegen>``) that builds the matches placed
    #: on it (a unit with a pattern table); "": its kernels are built for its target. How a
    #: build is made: not part of :attr:`Profile.hash`
    codegen: str = ""

    @property
    def label(self) -> str:
        """The unit's class label: its ``class``, else its name."""
        return self.class_name or self.name

    def accepts_kind(self, kind: str) -> bool:
        """Whether it runs every op of ``kind`` (a unit with a pattern table runs none
        by kind: see :func:`autoplace.space.capability.runs`)."""
        return "*" in self.accepts or kind in self.accepts

    def joules_per_flop(self, name: str) -> float:
        """Active energy per FLOP of an op kind or pattern (0 without a ``pj_per_flop``
        table: the unit's energy is then ``power_w`` x busy time)."""
        return self.j_per_flop.get(name, self.j_per_flop.get("default", 0.0))

    def flops_per_s(self, kind: str) -> float:
        """Throughput for ``kind`` (an op kind or a pattern) in FLOP/s (``gflops[kind]`` or
        ``gflops["default"]``)."""
        return 1e9 * float(self.gflops[kind] if kind in self.gflops else self.gflops["default"])


@dataclass(frozen=True, kw_only=True)
class Scope:
    """A memory scope: capacity, bandwidth, and the units that can read and write it."""

    name: str
    capacity_bytes: int
    bandwidth_bps: float
    access: frozenset[str]
    #: energy per byte a kernel or a copy reads from it, and writes to it (joules)
    read_j_per_byte: float = 0.0
    write_j_per_byte: float = 0.0


@dataclass(frozen=True, kw_only=True)
class CopyPath:
    """A direct copy path from scope ``src`` to scope ``dst``."""

    src: str
    dst: str
    bandwidth_bps: float
    latency_s: float
    modes: tuple[str, ...]
    engine: str
    #: energy per byte moved over the path (joules), besides the two scopes' accesses
    j_per_byte: float = 0.0

    def seconds(self, nbytes: int) -> float:
        return self.latency_s + nbytes / self.bandwidth_bps


@dataclass(frozen=True, kw_only=True)
class MeshGrid:
    """Where a ``[mesh]`` table put its processing elements (PEs), for routing by formula.

    PE ``k`` sits at row ``k // cols``, column ``k % cols``; its local scopes are
    ``pe<k>.<suffix>`` for each of ``scopes``. Neighbour links join the ``link_scopes`` of
    4-neighbour PEs; uplinks join each PE's ``uplink_scopes`` and the shared scope
    ``uplink_to``. ``profile.copies[:generated_copies]`` are those links and uplinks.
    """

    rows: int
    cols: int
    scopes: tuple[str, ...]
    link_scopes: tuple[str, ...] = ()
    uplink_scopes: tuple[str, ...] = ()
    uplink_to: str | None = None
    generated_copies: int = 0
    #: whether a PE's units run ops of different inferences at once (``units_overlap``)
    units_overlap: bool = False
    #: bytes per second all uplinks move together at most (``[mesh.uplink] total_gbps``:
    #: the shared scope's bandwidth); None: each uplink at its own bandwidth
    uplink_total_bps: float | None = None

    @property
    def size(self) -> int:
        """The number of PEs."""
        return self.rows * self.cols

    def pe_of(self, name: str) -> int | None:
        """``k`` if ``name`` is a unit or scope of PE ``k`` (``pe<k>.<suffix>``), else None."""
        head, dot, _ = name.partition(".")
        if not dot or not head.startswith("pe") or not head[2:].isdigit():
            return None
        k = int(head[2:])
        return k if k < self.size and head == f"pe{k}" else None


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A validated hardware profile."""

    name: str
    host: str
    default_scope: str
    units: tuple[Unit, ...]
    scopes: tuple[Scope, ...]
    copies: tuple[CopyPath, ...]
    description: str = ""
    source: str = field(default="<memory>", compare=False)
    #: the grid a ``[mesh]`` table generated (its units, scopes and copies are in the
    #: tuples above too); None for a profile without one
    mesh: MeshGrid | None = field(default=None, compare=False)

    @functools.cached_property
    def blocks(self) -> bool:
        """Whether some unit runs its ops as blocks: the block model simulates it."""
        return any(u.execution == "block" for u in self.units)

    @property
    def calibrated(self) -> bool:
        """Whether any unit has measured kernel times (``autoplace calibrate`` wrote them);
        otherwise every time is the roofline estimate from the datasheet figures."""
        return any(u.kernel_s for u in self.units)

    @functools.cached_property
    def unit_index(self) -> dict[str, int]:
        """Unit name -> position in ``units``."""
        return {u.name: i for i, u in enumerate(self.units)}

    @functools.cached_property
    def scope_index(self) -> dict[str, int]:
        """Scope name -> position in ``scopes``."""
        return {s.name: i for i, s in enumerate(self.scopes)}

    @functools.cached_property
    def copy_index(self) -> dict[tuple[str, str], CopyPath]:
        """(src scope, dst scope) -> the direct copy path."""
        return {(c.src, c.dst): c for c in self.copies}

    @functools.cached_property
    def _scopes_by_unit(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {u.name: [] for u in self.units}
        for s in self.scopes:
            for unit in (out if "*" in s.access else s.access):
                if unit in out:
                    out[unit].append(s.name)
        return out

    def unit(self, name: str) -> Unit:
        try:
            return self.units[self.unit_index[name]]
        except KeyError:
            raise KeyError(f"profile {self.name!r} has no unit {name!r}") from None

    def scope(self, name: str) -> Scope:
        try:
            return self.scopes[self.scope_index[name]]
        except KeyError:
            raise KeyError(f"profile {self.name!r} has no scope {name!r}") from None

    def scopes_of(self, unit: str) -> list[str]:
        """Scopes ``unit`` may read and write, in profile order."""
        return list(self._scopes_by_unit.get(unit, ()))

    @functools.cached_property
    def entry_points(self) -> dict[str, str]:
        """The patterns units name by entry point (``package.module:function``) -> the
        first unit naming it."""
        out: dict[str, str] = {}
        for u in self.units:
            for name in sorted(p for p in u.patterns if is_entry_point(p)):
                out.setdefault(name, u.name)
        return out

    def home_scope(self, unit: str) -> str:
        """The scope a unit writes by default: the default scope if it can, else its first."""
        scopes = self.scopes_of(unit)
        return self.default_scope if self.default_scope in scopes else scopes[0]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "host": self.host,
            "default_scope": self.default_scope,
            "units": [
                {
                    "name": u.name,
                    "target": dict(u.target),
                    "accepts": sorted(u.accepts),
                    "gflops": dict(sorted(u.gflops.items())),
                    "launch_overhead_s": u.launch_overhead_s,
                    # only when present, so that profiles without one keep their hash
                    **({"handover_s": u.handover_s} if u.handover_s else {}),
                    "power_w": u.power_w,
                    "rpc_key": u.rpc_key,
                    # only when present, so that profiles without one keep their hash
                    **({"kernel_s": dict(sorted(u.kernel_s.items()))} if u.kernel_s else {}),
                    **({"weights": sorted(u.weights)} if u.weights != set(WEIGHT_MODES)
                       else {}),
                    **({"class": u.class_name} if u.class_name else {}),
                    **({"execution": u.execution} if u.execution != "stream" else {}),
                    **({"cores": u.cores} if u.cores else {}),
                    **({"cpus": list(u.cpus)} if u.cpus else {}),
                    **({"patterns": sorted(u.patterns)} if u.patterns else {}),
                    **({"idle_w": u.idle_w} if u.idle_w else {}),
                    **({"j_per_flop": dict(sorted(u.j_per_flop.items()))} if u.j_per_flop
                       else {}),
                }
                for u in self.units
            ],
            "scopes": [
                {
                    "name": s.name,
                    "capacity_bytes": s.capacity_bytes,
                    "bandwidth_bps": s.bandwidth_bps,
                    "access": sorted(s.access),
                    **({"read_j_per_byte": s.read_j_per_byte} if s.read_j_per_byte else {}),
                    **({"write_j_per_byte": s.write_j_per_byte} if s.write_j_per_byte
                       else {}),
                }
                for s in self.scopes
            ],
            "copies": [
                {
                    "src": c.src,
                    "dst": c.dst,
                    "bandwidth_bps": c.bandwidth_bps,
                    "latency_s": c.latency_s,
                    "modes": list(c.modes),
                    "engine": c.engine,
                    **({"j_per_byte": c.j_per_byte} if c.j_per_byte else {}),
                }
                for c in self.copies
            ],
            # only when set, so that profiles without it keep their hash
            **({"units_overlap": True} if self.mesh is not None and self.mesh.units_overlap
               else {}),
            **({"uplink_total_bps": self.mesh.uplink_total_bps}
               if self.mesh is not None and self.mesh.uplink_total_bps is not None else {}),
        }

    @functools.cached_property
    def hash(self) -> str:
        """Stable hash of the hardware described (not of the file's formatting)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
