"""A placement built into one Relax VM executable (docs/build.md): ``build``, ``apply_best``
(a log's best record, :func:`autoplace.records.tuning_log.best`, applied), ``build_te``. Imports
TVM."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import tvm

from autoplace.deploy.compiler import compile_placed
from autoplace.deploy.place import apply
from autoplace.deploy.run import Loaded
from autoplace.deploy.targets import BuildError
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.records.tuning_log import Record, best
from autoplace.space import Placement, SearchSpace


@dataclass(frozen=True, kw_only=True)
class Built:
    """A compiled placement: the placed module, the executable, the placement."""

    placement: Placement
    module: tvm.IRModule
    executable: tvm.runtime.Executable

    def export(self, path: str) -> None:
        """Write the library (``.so``); ``autoplace run`` and RPC servers load it."""
        self.executable.export_library(path)

    def load(self) -> Loaded:
        """The executable in a Relax VM on this host's devices."""
        return Loaded(self.executable)


def build(mod: tvm.IRModule, placement: Placement, profile: Profile, *,
          graph: OpGraph | None = None, memory_scopes: str = "global",
          kernels=None) -> Built:
    """:func:`apply` then compile (TVM's pipeline without StaticPlanBlockMemory); ``kernels``:
    a :class:`~autoplace.deploy.kernel_db.KernelDatabase` scheduling the kernels."""
    placed = apply(mod, placement, profile, graph=graph, memory_scopes=memory_scopes,
                   kernels=kernels)
    return Built(placement=placement, module=placed, executable=compile_placed(placed))


def apply_best(mod: tvm.IRModule, records: Iterable[Record], profile: Profile, *,
               graph: OpGraph | None = None) -> tvm.IRModule:
    """``mod`` placed by the best record of a tuning log
    (``autoplace.records.tuning_log.read(path)``).

    Like AutoTVM's ``apply_history_best``: the lowest latency among the placements (not a
    pipeline's plans) of this graph (by fingerprint) and this profile (by hash); none is a
    :class:`BuildError`.
    """
    if graph is None:
        from autoplace.frontend.relax import op_graph

        graph = op_graph(mod, "module")
    records = list(records)
    rec = best(records, graph_fp=graph.fingerprint, profile_hash=profile.hash, plans=False)
    if rec is None:
        raise BuildError(f"no valid record for graph {graph.name} (fingerprint "
                         f"{graph.fingerprint}) on profile {profile.name} (hash {profile.hash}) "
                         f"among {len(records)} records")
    return apply(mod, rec.placement, profile, graph=graph)


def build_te(outputs: Sequence, inputs: Sequence, spec: Mapping, profile: Profile, *,
             name: str = "te") -> Built:
    """Build a TE graph with its ops mapped by name: ``{"C": "cpu1", "D": "accelerator1"}``.

    ``spec`` is what :meth:`SearchSpace.from_user` takes: op -> unit, or op ->
    ``{"unit": ..., "scope": ...}``, optionally with ``{"ops": ..., "copies": {"C->D":
    "async"}}``. Ops left out run on the host unit.
    """
    from autoplace.frontend.te import from_te

    mod, graph = from_te(outputs, inputs, name)
    placement = SearchSpace(graph, profile).from_user(spec)
    return build(mod, placement, profile, graph=graph)
