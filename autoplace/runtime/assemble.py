"""A placement assembled from compiled kernels: the calls of every piece of scheduled work.

:func:`assemble` binds every piece of a :class:`~autoplace.space.schedule.Schedule` to what
runs it: an op to its unit's compiled kernel with its argument and output tensors, a copy
hop to a copy of the edge's tensors from one scope's buffer into the next. Nothing is
compiled (the kernels come from :class:`~autoplace.runtime.libraries.KernelLibraries`);
buffers come from one pool per scope (:mod:`autoplace.runtime.memory`); resident weights
are copied into their op's scope here, once. An offloaded region (``regions``: the calls a
code generator built, :class:`~autoplace.deploy.region_calls.RegionCall`) is one piece of
work calling the region's function: its inputs are read where the placement's copies put
them, its results get buffers written when it runs, its own values get none.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi

from autoplace.deploy.region_calls import RegionCall
from autoplace.measure.simulator import Simulator
from autoplace.runtime.libraries import KernelLibraries
from autoplace.runtime.memory import ALIGN, PoolPlan, Request
from autoplace.runtime.native import NativePlan
from autoplace.runtime.program import Program, TensorSpec
from autoplace.space import Placement, SearchSpace
from autoplace.space.schedule import Schedule, Timing, with_regions

_COPY = tvm.get_global_func("runtime.TVMTensorCopyFromTo")


def copy_tensor(src, dst) -> None:
    """Copy ``src`` into ``dst`` (TVM's copy, which releases the GIL)."""
    _COPY(src, dst)


#: one call of a piece of work: a TVM FFI function and the tensors it is called with
Call = tuple[tvm_ffi.Function, tuple]


@dataclass(frozen=True, kw_only=True)
class Assembled:
    """A placement ready to run: per piece of work, its calls and what it waits for."""

    schedule: Schedule
    #: per work item, its calls in order (a kernel; a copy hop's copies)
    calls: tuple[tuple[Call, ...], ...]
    #: per work item: the work on *other* resources it waits for
    waits: tuple[tuple[int, ...], ...]
    #: per work item: whether work on another resource waits for it
    signals: tuple[bool, ...]
    #: per work item: the event set when it is done (None where nothing waits for it)
    events: tuple
    #: per work item: what it is, for messages (``op conv2d#2 on cpu1``)
    labels: tuple[str, ...]
    inputs: tuple
    results: tuple
    #: bytes of each scope's pool
    pool_bytes: dict

    @functools.cached_property
    def native(self) -> NativePlan:
        """The calls and waits as the C worker loop reads them (made on first use)."""
        return NativePlan.of(self.calls, self.waits, self.schedule.order)


class _Binder:
    """Plans every buffer of a schedule, then makes its tensors."""

    def __init__(self, program: Program, space: SearchSpace, placement: Placement,
                 timing: Timing, regions: tuple[RegionCall, ...] = ()):
        schedule = timing.schedule
        self.program, self.space, self.p, self.s = program, space, placement, schedule
        self.regions = {c.ops: c for c in regions}
        self.plan = PoolPlan(timing, {c.name: c.capacity_bytes for c in space.profile.scopes})
        self.start = timing.start
        self.default = space.profile.default_scope
        self.slots: dict[tuple, tuple[tuple[str, int], TensorSpec]] = {}
        self.edge_of = {(e.src, e.dst): k for k, e in enumerate(space.graph.edges)}
        self.routes = schedule.routes()
        self.readers = self._readers()

    def scope(self, op: int) -> str:
        return self.p.ops[self.space.graph.ops[op].name][1]

    def _readers(self) -> dict[int, list[int]]:
        """Work index -> the work that reads its output (op consumers, next hops)."""
        out: dict[int, list[int]] = {}
        for dst, sources in enumerate(self.s.reads):
            for source in sources:
                out.setdefault(source, []).append(self.s.op_work[dst])
        for hops in self.routes.values():
            src = self.space.graph.edges[self.s.work[hops[0]].edge].src
            out.setdefault(self.s.op_work[src], []).append(hops[0])
            for a, b in zip(hops, hops[1:]):
                out.setdefault(a, []).append(b)
        return out

    def request(self, key: tuple, scope: str, spec: TensorSpec, writer: int,
                pinned: bool = False) -> None:
        slot = self.plan.place(Request(scope=scope, nbytes=spec.nbytes, writer=writer,
                                       readers=self.readers.get(writer, []), pinned=pinned))
        self.slots[key] = (slot, spec)

    def plan_all(self) -> None:
        """Plan the weights and inputs, then every written tensor in the order its writer
        starts (the simulated timing)."""
        prog, results = self.program, set(self.program.results)
        for i, spec in enumerate(prog.inputs):
            self.request(("input", i), self.default, spec, -1, pinned=True)
        for spec in prog.weights:  # the program's own tensors, counted in the default scope
            self.plan.hold(self.default, spec.nbytes)
        for k in range(len(self.s.op_work)):
            self._plan_resident(k)
        for item in sorted(range(len(self.s.work)), key=lambda i: (self.start[i], i)):
            w = self.s.work[item]
            if w.kind == "op":
                for f, spec in enumerate(prog.kernels[w.op].outputs):
                    key = ("op", w.op, f)
                    self.request(key, w.dst, spec, item, pinned=key in results)
            elif w.kind == "region":
                for key in self.region_outputs(w):
                    spec = prog.kernels[key[1]].outputs[key[2]]
                    self.request(key, self.scope(key[1]), spec, item, pinned=key in results)
            else:
                src = self.space.graph.edges[w.edge].src
                for f in prog.edge_fields(src, w.op):
                    self.request(("hop", item, f), w.dst, prog.kernels[src].outputs[f], item)

    def region_outputs(self, w) -> list[tuple]:
        """The program's refs of the results of region work ``w``."""
        return [field_of(self.program, v) for v in self.regions[w.ops].outputs]

    def _plan_resident(self, k: int) -> None:
        """A copy in op ``k``'s scope of each weight it keeps resident there (once per
        weight and scope; a region reads it there where it takes the weight as an input)."""
        op, scope = self.space.graph.ops[k], self.scope(k)
        if self.p.weights.get(op.name) != "resident" or scope == self.default:
            return
        for a in self.program.kernels[k].args:
            if a[0] == "weight" and ("resident", a[1], scope) not in self.slots:
                self.request(("resident", a[1], scope), scope, self.program.weights[a[1]], -1,
                             pinned=True)

    def tensors(self, inputs: dict, weights: tuple) -> dict[tuple, object]:
        """Each planned buffer as a tensor: a view of its scope's storage; the graph's
        weights are the program's own tensors, resident copies filled from them."""
        arenas = {scope: _arena(n) for scope, n in self.plan.arena_bytes.items()}
        out = {}
        for key, ((scope, offset), spec) in self.slots.items():
            if key[0] == "input" and key in inputs:
                out[key] = inputs[key]
            else:
                view = arenas[scope][offset:offset + spec.nbytes].view(spec.dtype)
                out[key] = tvm_ffi.from_dlpack(view.reshape(spec.shape))
        for key in out:
            if key[0] == "resident":
                copy_tensor(weights[key[1]], out[key])
        out.update({("weight", w): value for w, value in enumerate(weights)})
        return out


def field_of(program: Program, value: tuple) -> tuple:
    """The program's ref of a region's value: ``("op", k, shape, dtype)``, the output of
    kernel *k* of that shape and dtype; ``("weight", ...)``, the weight kernel *k* reads of
    that shape and dtype; an input as it is."""
    if value[0] == "input":
        return tuple(value)
    k, spec = value[1], TensorSpec(tuple(value[2]), str(value[3]))
    if value[0] == "op":
        found = [("op", k, f) for f, o in enumerate(program.kernels[k].outputs) if o == spec]
    else:
        found = list(dict.fromkeys(a for a in program.kernels[k].args
                                   if a[0] == "weight" and program.weights[a[1]] == spec))
    if len(found) != 1:
        raise ValueError(f"kernel {k} has {len(found)} {value[0]}s of {spec}; a region's "
                         "value must be one of them")
    return found[0]


def _arena(nbytes: int) -> np.ndarray:
    """``nbytes`` of host memory starting at an :data:`ALIGN`-byte boundary."""
    base = np.empty(nbytes + ALIGN, dtype=np.uint8)
    skip = -base.ctypes.data % ALIGN
    return base[skip:skip + nbytes]


def _arg(b: _Binder, t: dict, ref: tuple, k: int):
    """The tensor op ``k`` reads for argument ``ref``."""
    if ref[0] == "input":
        return t[ref]
    if ref[0] == "weight":
        return t.get(("resident", ref[1], b.scope(k)), t[ref]) \
            if b.p.weights.get(b.space.graph.ops[k].name) == "resident" else t[ref]
    src = ref[1]
    if b.scope(src) == b.scope(k):
        return t[("op", src, ref[2])]
    last = b.routes[b.edge_of[src, k]][-1]
    return t[("hop", last, ref[2])]


def _calls(b: _Binder, t: dict, item: int, libraries: KernelLibraries,
           copy: tvm_ffi.Function, functions: dict) -> tuple[Call, ...]:
    """Work item ``item``'s calls: its kernel with its inputs and outputs, or a copy per
    field of the edge its hop copies."""
    w = b.s.work[item]
    if w.kind == "region":
        return (_region_call(b, t, w, functions),)
    if w.kind == "op":
        kernel = b.program.kernels[w.op]
        args = [_arg(b, t, a, w.op) for a in kernel.args]
        for spec in libraries.packs(w.resource).get(kernel.func, ()):  # weights read packed
            args[spec.param] = libraries.packed(w.resource, kernel.func, spec,
                                                kernel.args[spec.param][1])
        outs = [t[("op", w.op, f)] for f in range(len(kernel.outputs))]
        return ((libraries.function(w.resource, kernel.func), (*args, *outs)),)
    src = b.space.graph.edges[w.edge].src
    pairs = []
    for f in b.program.edge_fields(src, w.op):
        before = t[("op", src, f)] if w.hop == 0 else t[("hop", w.after[0], f)]
        pairs.append((copy, (before, t[("hop", item, f)])))
    return tuple(pairs)


def _region_call(b: _Binder, t: dict, w, functions: dict) -> Call:
    """A region's call: its function, its inputs where its first op reading each finds
    it, then its results."""
    call, args = b.regions[w.ops], []
    for value in call.args:
        ref = field_of(b.program, value)
        reader = next(k for k in w.ops if ref in b.program.kernels[k].args)
        args.append(_arg(b, t, ref, reader))
    outs = [t[key] for key in b.region_outputs(w)]
    return (functions[call.symbol], (*args, *outs))


def _label(space: SearchSpace, w) -> str:
    if w.kind == "region":
        return f"region of {len(w.ops)} ops (last {space.graph.ops[w.op].name}) on {w.resource}"
    if w.kind == "op":
        return f"op {space.graph.ops[w.op].name} on {w.resource}"
    return f"{w.mode} copy {space.edge_names[w.edge]} ({w.src} -> {w.dst}) on {w.resource}"


def _cross(schedule: Schedule, reuse: set[tuple[int, int]]
           ) -> tuple[tuple[tuple[int, ...], ...], tuple[bool, ...]]:
    """Per item, the work it waits for on other resources (what it reads, what it follows
    on a shared CPU, and what it overwrites: ``reuse``); whether anything waits on it."""
    waits, signals = [], [False] * len(schedule.work)
    extra: dict[int, list[int]] = {}
    for u, w in sorted(reuse):
        extra.setdefault(w, []).append(u)
    for i, w in enumerate(schedule.work):
        mine = tuple(a for a in dict.fromkeys([*w.after, *w.follows, *extra.get(i, [])])
                     if schedule.work[a].resource != w.resource
                     or w.resource in schedule.unordered)
        for a in mine:
            signals[a] = True
        waits.append(mine)
    return tuple(waits), tuple(signals)


def timing_of(space: SearchSpace, placement: Placement,
              regions: tuple[RegionCall, ...] = ()) -> Timing:
    """The schedule the runtime runs, with its simulated timing: the simulator's, each
    region one piece of work."""
    timing = Simulator(space).timing(placement)
    return with_regions(space, timing, [c.ops for c in regions]) if regions else timing


def plan_buffers(program: Program, space: SearchSpace, placement: Placement, *,
                 capacity_check: bool = True, regions: tuple[RegionCall, ...] = ()
                 ) -> _Binder:
    """Every buffer of ``placement``'s schedule planned in its scope's pool (nothing
    allocated, no kernel loaded); a pool over its scope's capacity is a PoolError."""
    binder = _Binder(program, space, placement, timing_of(space, placement, regions), regions)
    binder.plan_all()
    if capacity_check:
        binder.plan.check({s.name: s.capacity_bytes for s in space.profile.scopes})
    return binder


def assemble(program: Program, space: SearchSpace, placement: Placement,
             libraries: KernelLibraries, *, inputs: dict | None = None,
             copy: Callable = copy_tensor, capacity_check: bool = True,
             regions: tuple[RegionCall, ...] = (), functions: dict | None = None
             ) -> Assembled:
    """Bind ``placement``'s schedule to compiled kernels and pooled buffers.

    ``inputs`` maps ``("input", i)`` to tensors to read the graph inputs from (default: a
    buffer of the default scope each, filled by the caller); ``copy(src, dst)`` is how copy
    engines move bytes (a board's DMA driver would be called here); ``regions``: the
    offloaded regions' calls, ``functions`` their functions by symbol.
    """
    binder = plan_buffers(program, space, placement, capacity_check=capacity_check,
                          regions=regions)
    schedule = binder.s
    t = binder.tensors(inputs or {}, program.weight_values)
    engine = _COPY if copy is copy_tensor else tvm_ffi.convert(copy)
    calls = tuple(_calls(binder, t, i, libraries, engine, functions or {})
                  for i in range(len(schedule.work)))
    waits, signals = _cross(schedule, binder.plan.waits)
    results = tuple(t[r] if r[0] != "op" else t[("op", r[1], r[2])] for r in program.results)
    return Assembled(schedule=schedule, calls=calls, waits=waits, signals=signals,
                     events=tuple(threading.Event() if s else None for s in signals),
                     labels=tuple(_label(space, w) for w in schedule.work),
                     inputs=tuple(t[("input", i)] for i in range(len(program.inputs))),
                     results=results, pool_bytes=binder.plan.bytes_by_scope)
