"""A kernel's parallel loops in chunks its threads claim as they get to them.

TVM's CPU code generator gives each thread of a parallel loop a fixed, equal share of its
iterations, so every kernel ends when its slowest thread does. Cores are not equally fast:
a big and a little core, a core that serves interrupts, a vCPU whose host core is busy
with another tenant. On this project's machine (2 vCPUs) one vCPU ran a conv alone in
1.4-1.6x the time of the other for minutes at a time, and two threads then gained only
1.2x over one (ONNX Runtime, whose pool hands out work dynamically, 1.45x in the same
minutes).

:func:`dynamic_chunks` rewrites each parallel loop at the top of a scheduled kernel::

    for i in T.parallel(E): body(i)

into one task per thread that claims chunks of ``k`` iterations until none is left::

    ranges = autoplace_split_chunks(threads, C)            # C = ceil(E / k)
    for task in T.parallel(threads):
        for _ in range(C):
            chunk = autoplace_claim_chunk(ranges, task, threads)
            if chunk >= 0:
                for i in range(chunk * k, min(chunk * k + k, E)): body(i)

Each thread first takes the chunks of its own contiguous range, in order, so the data a
schedule keeps local to a thread (a channel block's weights, read for every row of the
block: :func:`~autoplace.deploy.cpu_rules._split_tiles`) stays so; a thread that runs out
takes chunks from the back of the range with the most left. ``chunk_claim.c`` holds the
two functions; it is linked into every library built for a target of several cores
(:data:`CLAIM_SOURCE`). The rewrite comes after the schedule, so it applies to the default
schedules and to MetaSchedule's alike, and changes no kernel's result, only which thread
computes each iteration.

The kernel is lowered up to its buffers' compaction first (the passes TVM's own pipeline
runs first; they are idempotent when it runs them again), so that a buffer local to one
iteration is compacted while that iteration is still a loop of its own.
"""

from __future__ import annotations

import math
from pathlib import Path

import tvm
from tvm import s_tir, tirx

#: the C source of the claim functions, linked into each library of parallel kernels
CLAIM_SOURCE = Path(__file__).with_name("chunk_claim.c")
#: chunks per thread: the last chunk taken ends at most ~1/16 of a thread's share late
CHUNKS_PER_THREAD = 16


def dynamic_chunks(func: tirx.PrimFunc, threads: int) -> tirx.PrimFunc:
    """``func`` (a scheduled kernel) with each parallel loop at its top run in claimed
    chunks by ``threads`` tasks; ``func`` itself when it has none or ``threads`` < 2."""
    if threads < 2 or not _top_parallel(_top(func.body)):
        return func
    func = _lowered_to_compaction(func)
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):  # a kernel written without blocks
        return func.with_body(_rewrite(realize, threads))
    block = realize.block
    block = s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint,
                         _rewrite(block.body, threads), block.init, block.alloc_buffers,
                         block.match_buffers, block.annotations)
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, block))


def _top(body):
    """The statement at the top of a kernel: its root block's body, if it has one."""
    return body.block.body if isinstance(body, s_tir.SBlockRealize) else body


def _is_parallel(stmt) -> bool:
    return (isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL
            and isinstance(stmt.extent, tirx.IntImm) and isinstance(stmt.min, tirx.IntImm)
            and int(stmt.min) == 0)


def _top_parallel(stmt) -> bool:
    if isinstance(stmt, tirx.SeqStmt):
        return any(_top_parallel(s) for s in stmt.seq)
    return _is_parallel(stmt)


def _lowered_to_compaction(func: tirx.PrimFunc) -> tirx.PrimFunc:
    passes = [s_tir.transform.CanonicalizeLoop(), s_tir.transform.LowerCrossThreadReduction(),
              s_tir.transform.LowerInitBlock(),
              s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
              s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation()]
    return tvm.ir.transform.Sequential(passes)(tvm.IRModule({"main": func}))["main"]


def _rewrite(stmt, threads: int):
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_rewrite(s, threads) for s in stmt.seq])
    return _claimed(stmt, threads) if _is_parallel(stmt) else stmt


def _i64(value: int) -> tirx.IntImm:
    return tirx.IntImm("int64", value)


def _claimed(loop: tirx.For, threads: int) -> tirx.Stmt:
    """Parallel ``loop`` as ``threads`` tasks claiming chunks of it (module docstring)."""
    extent = int(loop.extent)
    size = max(1, math.ceil(extent / (threads * CHUNKS_PER_THREAD)))
    chunks = math.ceil(extent / size)
    dtype = str(loop.loop_var.ty)
    task, attempt = tirx.Var("task", dtype), tirx.Var("attempt", dtype)
    ranges, chunk = tirx.Var("chunk_ranges", "handle"), tirx.Var("chunk", "int64")
    start = tirx.Var("chunk_start", dtype)
    claim = tirx.call_extern("int64", "autoplace_claim_chunk", ranges,
                             tirx.Cast("int64", task), _i64(threads))
    run = tirx.SeqStmt([
        tirx.Bind(start, tirx.Cast(dtype, chunk) * tirx.IntImm(dtype, size)),
        tirx.For(loop.loop_var, start,
                 tirx.min(tirx.IntImm(dtype, size), tirx.IntImm(dtype, extent) - start),
                 tirx.ForKind.SERIAL, loop.body, annotations=loop.annotations)])
    tries = tirx.For(attempt, tirx.IntImm(dtype, 0), tirx.IntImm(dtype, chunks),
                     tirx.ForKind.SERIAL,
                     tirx.SeqStmt([tirx.Bind(chunk, claim),
                                   tirx.IfThenElse(chunk >= _i64(0), run, None)]))
    split = tirx.call_extern("handle", "autoplace_split_chunks", _i64(threads), _i64(chunks))
    return tirx.SeqStmt([tirx.Bind(ranges, split),
                         tirx.For(task, tirx.IntImm(dtype, 0), tirx.IntImm(dtype, threads),
                                  tirx.ForKind.PARALLEL, tries)])
