"""Blocked activations between kernels: the channels of an NCHW tensor in blocks, innermost.

ONNX Runtime's convs on x86 (MLAS) read and write NCHWc: a tensor ``[n, c, h, w]`` held as
``[n, c // b, h, w, c % b]``, so that a vector of ``b`` output channels is one contiguous
store and the input a conv reads is one stream per block of channels, not one per channel.
:func:`blocked_program` holds a :class:`~autoplace.runtime.program.Program`'s activations so:
every tensor an op makes and only ops read (not a graph input or result) that is 4-D
float32 with channels a multiple of 16 (else of 8) is blocked by 16 (else by 8). The graph,
the ops and what each computes are unchanged; only the kernels' PrimFuncs are rewritten,
by TVM's own primitives:

- each parameter that is passed a blocked tensor, and each 4-D buffer the kernel allocates
  whose channels block alike, is re-laid (``transform_layout``);
- each block iterates in blocked order first (``transform_block_layout``): an iterator that
  indexes a blocked buffer's channel axis splits into the block index, in its place, and
  the channel within the block, innermost among the iterators of its kind (spatial, then
  reduction), so a conv's loops read ``[c // b, kh, kw, c % b]`` and the default schedule
  vectorises the block's channels (:mod:`autoplace.deploy.cpu_rules`);
- a condition that the channel within the block cannot change (a concatenation's along
  channels, ``64 <= c * 16 + i``) is written without it
  (:mod:`autoplace.runtime.uniform_conditions`: ``4 <= c``), so that nest is vectorised too.

A PrimFunc that several ops call keeps a parameter plain unless every call passes a blocked
tensor there (and the ops that make those tensors then keep them plain); so does one whose
blocks would index a blocked buffer's channel within the block by anything but an iterator
(:func:`_check_within_block`: a grouped conv whose groups are no multiple of the block, a
reshape), and every op a unit with a code generator may run (its BYOC region computes on
plain tensors: :func:`runtime_program`) or that reads rows (matmul, softmax). A
blocked tensor has the bytes of the plain one (no padding), so copies between units and the
simulator's sizes are the same. Every op on one core of the host, against the plain layout
in the same minute: squeezenet 9.72 -> 7.32 ms (its first conv 0.33x, its 1x1 squeezes
0.51-0.54x), resnet50 0.82x, densenet121 0.79x (experiments/results/bench_blocked_layout.md).
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir

from autoplace.deploy.nest_rules import REFUSED
from autoplace.deploy.offload import offload_units
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.runtime.program import Program, Ref, TensorSpec, read_program
from autoplace.runtime.uniform_conditions import without_uniform_iterators
from autoplace.space.capability import capable

#: channel blocks, the first that divides a tensor's channels is its block
BLOCKS = (16, 8)
#: kinds of op that read their last axes as rows (attention's matmuls and softmax), and ops
#: of no known kind: their tensors stay plain (not "norm": densenet121's batch norms, which
#: no conv before them absorbs, are per channel; with them plain, 63 of its 242 tensors
#: were blocked instead of 241)
ROW_KINDS = frozenset({"matmul", "softmax", "other"})
#: (PrimFunc's structural hash, its blocked parameters) -> the blocked PrimFunc, None when
#: refused: a process that reads a model again (a measurer after a runtime, calibrate's
#: units) re-lays nothing (densenet121's 188 PrimFuncs take 1.5 s)
_MEMO: dict[tuple, object] = {}


def block_of(shape, dtype: str) -> int | None:
    """The block of a tensor of ``shape`` and ``dtype``: None unless it is 4-D float32 with
    channels (dimension 1) a multiple of one of :data:`BLOCKS`."""
    if len(shape) != 4 or dtype != "float32":
        return None
    return next((b for b in BLOCKS if int(shape[1]) % b == 0), None)


def _calls(program: Program) -> dict[str, list[list[Ref]]]:
    """PrimFunc name -> per call of it, the ref each parameter is passed (the arguments,
    then the outputs)."""
    out = collections.defaultdict(list)
    for k, kern in enumerate(program.kernels):
        out[kern.func].append([tuple(a) for a in kern.args]
                              + [("op", k, f) for f in range(len(kern.outputs))])
    return out


def runtime_program(mod: tvm.IRModule, graph: OpGraph, profile: Profile) -> Program:
    """The :class:`Program` the runtime runs ``mod`` as on ``profile``'s units: its
    activations blocked, except those an op that a unit with a code generator may run
    makes or reads (a BYOC region computes on plain tensors), or an op of
    :data:`ROW_KINDS` (a 4-D tensor of attention is ``[batch, heads, rows, columns]``:
    blocks of heads would gain nothing)."""
    rows = frozenset(k for k, op in enumerate(graph.ops) if op.kind in ROW_KINDS)
    return blocked_program(read_program(mod), region_ops(graph, profile) | rows)


def region_ops(graph: OpGraph, profile: Profile) -> frozenset[int]:
    """The ops some unit with a code generator may run (:func:`capable`)."""
    coded = [profile.unit_index[u.name] for u in offload_units(profile)]
    if not coded:
        return frozenset()
    return frozenset(np.flatnonzero(capable(graph, profile)[:, coded].any(axis=1)).tolist())


def blocked_tensors(program: Program, plain_ops: frozenset[int] = frozenset(),
                    plain: frozenset[Ref] = frozenset()) -> dict[Ref, int]:
    """The ops' outputs :func:`blocked_program` blocks, with their blocks (none of
    ``plain``, none an op of ``plain_ops`` makes or reads, and at every call of a PrimFunc
    each parameter blocked alike)."""
    kept = {tuple(r) for r in program.results} | set(plain)
    kept |= {tuple(a) for k in plain_ops for a in program.kernels[k].args}
    kept |= {("op", k, f) for k in plain_ops for f in range(len(program.kernels[k].outputs))}
    chosen = {("op", k, f): block_of(s.shape, s.dtype) for k, kern in enumerate(program.kernels)
              for f, s in enumerate(kern.outputs)}
    chosen = {ref: b for ref, b in chosen.items() if b is not None and ref not in kept}
    calls = _calls(program)
    while mixed := {c[p] for cs in calls.values() for p in range(len(cs[0]))
                    if len({chosen.get(c[p]) for c in cs}) > 1 for c in cs if c[p] in chosen}:
        chosen = {ref: b for ref, b in chosen.items() if ref not in mixed}
    return chosen


def blocked_program(program: Program, plain_ops: frozenset[int] = frozenset()) -> Program:
    """``program`` with its activations blocked (module docstring) but those of
    ``plain_ops``; ``program`` itself when none is. A PrimFunc TVM will not re-lay keeps its
    tensors plain."""
    refused: frozenset[Ref] = frozenset()
    while True:  # (the calls' agreement holds again after each refusal)
        chosen = blocked_tensors(program, plain_ops, refused)
        funcs, failed = _blocked_funcs(program, chosen)
        if not failed:
            break
        refused = refused | failed
    if not chosen:
        return program
    kernels = tuple(dataclasses.replace(kern, outputs=tuple(
        _blocked_spec(s, chosen.get(("op", k, f))) for f, s in enumerate(kern.outputs)))
        for k, kern in enumerate(program.kernels))
    hashes = {f: program.func_hashes[f] if pf is program.funcs[f]
              else str(tvm_ffi.structural_hash(pf)) for f, pf in funcs.items()}
    return dataclasses.replace(program, kernels=kernels, funcs=funcs, func_hashes=hashes)


def _blocked_funcs(program: Program, chosen: dict[Ref, int]) -> tuple[dict, set[Ref]]:
    """(the PrimFuncs with ``chosen`` blocked, the tensors of the PrimFuncs TVM refused)."""
    funcs, failed = dict(program.funcs), set()
    for name, cs in _calls(program).items():
        blocks = {p: chosen[ref] for p, ref in enumerate(cs[0]) if ref in chosen}
        if not blocks:
            continue
        func = program.funcs[name]
        key = (program.func_hashes.get(name) or str(tvm_ffi.structural_hash(func)),
               tuple(sorted(blocks.items())))
        if key not in _MEMO:
            try:
                _MEMO[key] = blocked_func(func, blocks)
            except REFUSED:
                _MEMO[key] = None
        if _MEMO[key] is None:
            failed |= {c[p] for c in cs for p in blocks}
        else:
            funcs[name] = _MEMO[key]
    return funcs, failed


def _blocked_spec(spec: TensorSpec, block: int | None) -> TensorSpec:
    if block is None:
        return spec
    n, c, h, w = spec.shape
    return TensorSpec((n, c // block, h, w, block), spec.dtype)


def blocked_func(func: tvm.tirx.PrimFunc, params: dict[int, int]) -> tvm.tirx.PrimFunc:
    """``func`` with parameter ``p`` blocked by ``params[p]`` (positions -> blocks), its
    own 4-D buffers blocked where their channels allow, its blocks iterating in blocked
    order (module docstring); ValueError (or TVM's refusal) when it would access a blocked
    buffer across its blocks."""
    sch = s_tir.Schedule(func)
    blocks = {func.params[p].name: b for p, b in params.items()}
    root = sch.get(sch.get_sblock("root"))
    blocks |= {buf.name: b for buf in root.alloc_buffers
               if (b := block_of(buf.shape, str(buf.dtype))) is not None}
    for block in _blocks(sch):
        try:  # (a block TVM will not re-iterate computes as before, over re-laid buffers)
            _iterate_blocked(sch, block, blocks)
        except REFUSED:
            pass
    for name, b in blocks.items():
        touching = [blk for blk in _blocks(sch) if name in _buffers(sch, blk)]
        if touching:
            sch.transform_layout(touching[0], name, _to_blocked(b))
    for block in _blocks(sch):
        _check_within_block(sch.get(block), blocks)
    return without_uniform_iterators(sch.mod["main"])


def _check_within_block(stmt, blocks: dict[str, int]) -> None:
    """ValueError unless each access of block ``stmt`` to a blocked buffer indexes the
    channel within the block by an iterator or a constant: a vector over the block's
    channels is then one contiguous access. (A grouped conv of 68 channels a group reads
    ``((c // 68) * 68 + r) % 16``: a gather per lane, 15x slower than plain; a reshape
    reads through the flattened index.)"""
    for region in list(stmt.reads) + list(stmt.writes):
        if region.source.name in blocks and not isinstance(
                region.region[-1].min, (tvm.tirx.Var, tvm.tirx.IntImm)):
            raise ValueError(f"{stmt.name_hint} reads or writes {region.source.name} "
                             "across its channel blocks")


def _to_blocked(block: int):
    def index(n, c, h, w):
        return (n, c // block, h, w, c % block)
    return index


def _blocks(sch: s_tir.Schedule) -> list:
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def _buffers(sch: s_tir.Schedule, block) -> set[str]:
    stmt = sch.get(block)
    return {r.source.name for r in list(stmt.reads) + list(stmt.writes)}


def _iterate_blocked(sch: s_tir.Schedule, block, blocks: dict[str, int]) -> None:
    """Block ``block`` iterating in blocked order over the buffers ``blocks`` names: each
    iterator that is a blocked buffer's channel index splits (the first buffer's block)."""
    stmt = sch.get(block)
    ivs = [iv.var for iv in stmt.iter_vars]
    split: dict[int, int] = {}
    for region in list(stmt.reads) + list(stmt.writes):
        b = blocks.get(region.source.name)
        if b is not None and len(region.region) == 4:
            for k, v in enumerate(ivs):
                if v.same_as(region.region[1].min):
                    split.setdefault(k, b)
    if not split:
        return
    kinds = [int(iv.iter_type) for iv in stmt.iter_vars]
    groups = [[k for k in range(len(ivs)) if (kinds[k] == 0) == spatial]
              for spatial in (True, False)]

    def mapping(*v):
        out = []
        for group in groups:
            out += [v[k] // split[k] if k in split else v[k] for k in group]
            out += [v[k] % split[k] for k in group if k in split]
        return tuple(out)

    sch.transform_block_layout(block, tvm.tirx.IndexMap.from_func(
        mapping, ndim=len(ivs), index_dtype="int64"))
