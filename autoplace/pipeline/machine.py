"""A mesh profile's processing element, as the pipeline planner sees it.

The planner never names a PE per op (docs/pipeline.md): it needs one PE's units, its local
memory and the mesh link between neighbours, which a ``[mesh]`` profile describes once as
templates (``autoplace/hardware/mesh_expansion.py`` expands them into ``pe<k>.*``; PE 0's are read
back here).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from autoplace.hardware.profile import CopyPath, Profile, ProfileError, Unit

#: how many ways a conv2d or matmul may be split along its output channels at most (an op
#: graph carries no channel count yet; the model-zoo networks' layers have 64 or more)
MAX_SPLIT = 64


@dataclass(frozen=True, kw_only=True)
class ByteEnergy:
    """Joules per byte of a PE's accesses and copies (docs/pipeline.md, "Energy"): reads
    and writes of its local scope and of the shared scope, and a byte over a link to a
    neighbour or over the uplink (0 where the profile gives none)."""

    local_read: float = 0.0
    local_write: float = 0.0
    shared_read: float = 0.0
    shared_write: float = 0.0
    link: float = 0.0
    uplink: float = 0.0

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} >= 0 (joules per byte) must hold, got {value!r}")

    def any(self) -> bool:
        """Whether some access or copy costs energy."""
        return any(dataclasses.astuple(self))


@dataclass(frozen=True, kw_only=True)
class MeshMachine:
    """The PEs of a mesh: ``rows x cols``, each with ``units`` (named by their suffix: ``arm``,
    ``npu``), a local scope of ``memory_bytes`` at ``memory_bps``, and links to its four
    neighbours at ``link_bps`` with ``link_s`` latency per copy; ``uplink_bps`` and
    ``uplink_s``: a PE's path to the shared memory that holds the graph's inputs and outputs
    (and weights streamed from it), ``uplink_total_bps`` what every PE's path moves together
    at most (the shared memory's bandwidth; inf: no limit); ``units_overlap``: whether a
    PE's units run ops of different inferences at once (else a PE runs one op at a time);
    ``energy``: what its accesses and copies cost per byte."""

    name: str
    rows: int
    cols: int
    units: tuple[Unit, ...]
    memory_bytes: int
    memory_bps: float
    link_bps: float
    link_s: float
    uplink_bps: float
    uplink_s: float
    max_split: int = MAX_SPLIT
    units_overlap: bool = False
    uplink_total_bps: float = math.inf
    energy: ByteEnergy = ByteEnergy()

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1 or not self.units:
            raise ValueError(f"mesh {self.name}: needs rows, cols >= 1 and a unit per PE")
        if not self.uplink_total_bps > 0:
            raise ValueError(f"uplink_total_bps > 0 must hold, got {self.uplink_total_bps}")
        if self.max_split < 1:
            raise ValueError(f"max_split >= 1 must hold, got {self.max_split}")

    @property
    def size(self) -> int:
        """The number of PEs."""
        return self.rows * self.cols

    @classmethod
    def of(cls, profile: Profile, *, max_split: int = MAX_SPLIT) -> MeshMachine:
        """The mesh of ``profile`` (its ``[mesh]`` table); ProfileError without one."""
        grid = profile.mesh
        if grid is None:
            raise ProfileError(f"profile {profile.name} ({profile.source}) has no [mesh]: a "
                               "pipeline needs a mesh of processing elements")
        suffix = grid.link_scopes[0] if grid.link_scopes else grid.scopes[0] if grid.scopes \
            else None
        if suffix is None:
            raise ProfileError(f"profile {profile.name}: [mesh] has no local scope")
        local = profile.scope(f"pe0.{suffix}")
        link = _path(profile, f"pe0.{suffix}", _neighbour(grid, suffix))
        uplink = _path(profile, f"pe0.{suffix}", grid.uplink_to) if grid.uplink_to else link
        shared = profile.scope(grid.uplink_to) if grid.uplink_to else None
        energy = ByteEnergy(
            local_read=local.read_j_per_byte, local_write=local.write_j_per_byte,
            shared_read=shared.read_j_per_byte if shared else 0.0,
            shared_write=shared.write_j_per_byte if shared else 0.0,
            link=link.j_per_byte, uplink=uplink.j_per_byte)
        units = tuple(dataclasses.replace(u, name=u.name.split(".", 1)[1])
                      for u in profile.units if u.name.startswith("pe0."))
        return cls(name=profile.name, rows=grid.rows, cols=grid.cols, units=units,
                   memory_bytes=local.capacity_bytes, memory_bps=local.bandwidth_bps,
                   link_bps=link.bandwidth_bps, link_s=link.latency_s,
                   uplink_bps=uplink.bandwidth_bps, uplink_s=uplink.latency_s,
                   max_split=max_split, units_overlap=grid.units_overlap,
                   uplink_total_bps=grid.uplink_total_bps or math.inf, energy=energy)


def _neighbour(grid, suffix: str) -> str | None:
    """PE 0's neighbour's local scope (None on a one-PE mesh)."""
    if grid.size == 1:
        return None
    return f"pe{1 if grid.cols > 1 else grid.cols}.{suffix}"


def _path(profile: Profile, src: str, dst: str | None) -> CopyPath:
    """The copy path ``src -> dst``: without a destination, an instant free one;
    ProfileError if the profile has no such path."""
    if dst is None:
        return CopyPath(src=src, dst=src, bandwidth_bps=math.inf, latency_s=0.0,
                        modes=("async",), engine="")
    path = profile.copy_index.get((src, dst))
    if path is None:
        raise ProfileError(f"profile {profile.name}: no copy path {src} -> {dst}: a pipeline "
                           "needs [mesh.link] (and [mesh.uplink] for the graph's inputs)")
    return path
