"""The energy of one inference (docs/simulator.md, "Energy").

``E = sum over units of (busy x power_w + (latency - busy) x idle_w)`` (``busy`` beyond
the latency, as a pool of cores can be, idles for none of it)
``+ sum over ops of (FLOPs x J/FLOP of its unit, where the unit gives pj_per_flop instead
of power_w; its reads of other ops' outputs x its scope's read energy per byte; its reads
of graph inputs x the default scope's; its weights x their scope's; its output x its
scope's write energy)``
``+ sum over copies of bytes x (per hop: the source scope's read energy, the path's energy
and the destination scope's write energy per byte)``.

A placement that streams an op's weights from the default scope pays that scope's read
energy for them; resident in the op's scope, that scope's. One function for both
simulators: the batch one (every row) and the event one (one placement). A mesh pipeline
plan's energy is the stage model's (:mod:`autoplace.pipeline.energy`).
"""

from __future__ import annotations

import weakref

import numpy as np

from autoplace.space import SearchSpace

_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Model:
    """A space's energy figures as arrays: per unit its busy and idle power; per (op,
    choice) the joules of its FLOPs and memory accesses, and whether copies cost any
    (None / False where the profile gives none: the batch then costs what it did before
    there was an energy model)."""

    def __init__(self, space: SearchSpace):
        from autoplace.space.capability import joules_per_flop

        g, p = space.graph, space.profile
        self.power = np.array([0.0 if u.j_per_flop else u.power_w for u in p.units])
        self.idle = np.array([u.idle_w for u in p.units])
        read = np.array([s.read_j_per_byte for s in p.scopes])
        write = np.array([s.write_j_per_byte for s in p.scopes])
        self.copies = bool(read.any() or write.any() or any(c.j_per_byte for c in p.copies))
        self.ops = None
        if self.copies or any(u.j_per_flop for u in p.units):
            flops = np.array([op.flops for op in g.ops])[:, None]
            internal = np.array([op.bytes_read - op.external_bytes for op in g.ops])[:, None]
            self.ops = (flops * joules_per_flop(g, p, space.c_unit)
                        + internal * read[space.c_scope]
                        + space.input_bytes[:, None] * read[space.default_scope]
                        + space.weight_bytes[:, None] * read[space.c_wscope]
                        + space.out_bytes[:, None] * write[space.c_scope])


def _model(space: SearchSpace) -> _Model:
    if space not in _MODELS:
        _MODELS[space] = _Model(space)
    return _MODELS[space]


def inference_energy(space: SearchSpace, choice: np.ndarray, cross: np.ndarray,
                     rid: np.ndarray, busy: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Joules per row of a batch (module docstring): ``choice[B, ops]``, its copy plan's
    ``cross`` and ``rid`` ``[B, edges]``, ``busy[B, units]`` seconds and ``latency[B]``."""
    m = _model(space)
    busy = busy[:, :len(m.power)]
    energy = (busy * m.power).sum(axis=1)
    if m.idle.any():
        energy += (np.maximum(latency[:, None] - busy, 0.0) * m.idle).sum(axis=1)
    if m.ops is not None:
        energy += np.take_along_axis(m.ops, choice.T, axis=1).sum(axis=0)
    if m.copies:
        energy += (np.where(cross, space.nbytes * space.routes.joules[rid], 0.0)).sum(axis=1)
    return energy
