"""The energy of one inference through a pipeline plan (docs/pipeline.md, "Energy").

Each copy of a plan runs one inference per period, so an inference costs what one copy
spends in a period (``period`` below: one copy's), from the profile's energy terms:

- **busy** PE units: each op's FLOPs x its unit's energy per FLOP (``pj_per_flop``), or the
  unit's ``power_w`` x the PE-seconds of its slices (``ways`` x a slice's time);
- **idle** PE units: ``idle_w`` x the time a stage's PEs hold it and the unit does not
  compute (``pes x period`` minus its busy PE-seconds);
- **kernels**: each op reads its bytes (other ops' outputs, graph inputs, weights) from
  its PEs' local scope and writes its output there;
- **copies**, per byte: over a link (a cut between stages, a rotation's ``ways - 1``
  passes of the op's inputs) the local scope's read, the link's energy and the local
  scope's write; from the shared memory (graph inputs, streamed weights, a spilled cut read
  back) its read, the uplink's energy and the local write; to it (graph outputs, a spilled
  cut) the local read, the uplink's energy and its write.

So an op whose weights stream from the shared memory pays, each inference, their bytes x
(the shared read, the uplink and the local write) more than the same op holding them. PEs
that hold no stage and the units outside the mesh (its controller) count nothing. The
per-op placements' model is :mod:`autoplace.measure.energy`; this is the stage model's
(:mod:`autoplace.pipeline.costs`), on its figures.
"""

from __future__ import annotations

import weakref

import numpy as np

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage

_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Tables:
    """A stage model's energy figures: per PE unit its busy and idle power and per (unit,
    op) the joules of the op's FLOPs; per op the joules that no plan changes (its kernel's
    accesses, its graph inputs and outputs over the uplink); the joules per byte of a link,
    into and out of the shared memory. ``any``: whether the profile gives any."""

    def __init__(self, costs: StageCosts):
        m, e, ops = costs.machine, costs.machine.energy, costs.graph.ops
        self.power = np.array([0.0 if u.j_per_flop else u.power_w for u in m.units])
        self.idle = np.array([u.idle_w for u in m.units])
        self.flop_j = np.array([[op.flops * u.joules_per_flop(op.kind) for op in ops]
                                for u in m.units]).reshape(len(m.units), len(ops))
        self.link = e.local_read + e.link + e.local_write
        self.into = e.shared_read + e.uplink + e.local_write
        self.out = e.local_read + e.uplink + e.shared_write
        kernel = np.array([op.bytes_read * e.local_read + op.output_bytes * e.local_write
                           for op in ops], dtype=np.float64)
        fixed = kernel + costs.inputs * self.into + costs.outputs * self.out
        self.S_fixed = np.concatenate([[0.0], np.cumsum(fixed)])
        self.any = bool(self.power.any() or self.idle.any() or self.flop_j.any()
                        or e.any())

    def stage(self, costs: StageCosts, s: Stage, spilled: tuple[bool, bool],
              period: float) -> float:
        """Joules of stage ``s`` per inference (the module docstring's terms)."""
        ops, ways = np.arange(s.start, s.end), np.asarray(s.ways())
        units = costs.op_units(s)
        pe_secs = ways * costs.unit_secs[units, ways - 1, ops]
        busy = np.bincount(units, weights=pe_secs, minlength=len(self.idle))
        idle = np.maximum(s.pes * period - busy, 0.0)
        cut_in, cut_out = costs.cut[s.start], costs.cut[s.end]
        linked = float(costs.rotated[ops] @ (ways - 1)) + (0.0 if spilled[0] else cut_in)
        streamed = costs.weights[list(s.streamed or ())].sum()
        return float(self.power @ busy + self.flop_j[units, ops].sum() + self.idle @ idle
                     + self.S_fixed[s.end] - self.S_fixed[s.start] + self.link * linked
                     + self.into * (streamed + spilled[0] * cut_in)
                     + self.out * spilled[1] * cut_out)


def _tables(costs: StageCosts) -> _Tables:
    if costs not in _TABLES:
        _TABLES[costs] = _Tables(costs)
    return _TABLES[costs]


def plan_energy(plan: PipelinePlan, costs: StageCosts, period_s: float) -> float:
    """Joules per inference of ``plan`` when one copy runs an inference every
    ``period_s`` (module docstring); 0.0 at once where the profile gives no energy terms."""
    t = _tables(costs)
    if not t.any:
        return 0.0
    return sum(t.stage(costs, s, plan.spilled_at(n), period_s)
               for n, s in enumerate(plan.stages))
