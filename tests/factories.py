"""A tiny hand-made profile and graphs whose simulated results can be worked out by hand."""

from __future__ import annotations

import socket

from autoplace.graph import Edge, Op, OpGraph
from autoplace.profile import CopyPath, Profile, Scope, Unit

GB = 1e9


def tiny_profile(*, sram_mib: float = 1.0, modes=("sync", "async")) -> Profile:
    """cpu (host, 1 GFLOP/s, any kind) + acc (10 GFLOP/s, elementwise only).

    dram (1 GB/s, both units), sram (10 GB/s, acc only); dram<->sram copies at 1 GB/s with
    1 us latency on DMA engine dma0.
    """
    units = (
        Unit(name="cpu", target={"kind": "llvm"}, accepts=frozenset({"*"}),
             gflops={"default": 1.0}, launch_overhead_s=0.0, power_w=1.0),
        Unit(name="acc", target={"kind": "llvm"}, accepts=frozenset({"elementwise"}),
             gflops={"default": 10.0}, launch_overhead_s=1e-6, power_w=2.0),
    )
    scopes = (
        Scope(name="dram", capacity_bytes=1 << 30, bandwidth_bps=1 * GB,
              access=frozenset({"cpu", "acc"})),
        Scope(name="sram", capacity_bytes=int(sram_mib * (1 << 20)), bandwidth_bps=10 * GB,
              access=frozenset({"acc"})),
    )
    copies = tuple(
        CopyPath(src=a, dst=b, bandwidth_bps=1 * GB, latency_s=1e-6, modes=tuple(modes),
                 engine="dma0")
        for a, b in (("dram", "sram"), ("sram", "dram"))
    )
    return Profile(name="tiny", host="cpu", default_scope="dram", units=units,
                   scopes=scopes, copies=copies)


def op(name: str, flops: float, read: int, out: int, ext: int = 0, kind="elementwise") -> Op:
    return Op(name=name, kind=kind, flops=flops, bytes_read=read, output_bytes=out,
              external_bytes=ext)


def chain_graph() -> OpGraph:
    """X -> Y -> Z, 1000 bytes per tensor, X reads 1000 external bytes."""
    ops = (
        op("X", 1e6, 1000, 1000, ext=1000),
        op("Y", 2e6, 1000, 1000),
        op("Z", 1e6, 1000, 1000),
    )
    edges = (Edge(src=0, dst=1, nbytes=1000), Edge(src=1, dst=2, nbytes=1000))
    return OpGraph(name="chain", ops=ops, edges=edges)


def fork_graph() -> OpGraph:
    """S -> (L, R) -> J: a fork/join whose branches can run in parallel."""
    ops = (
        op("S", 1e6, 1000, 1000, ext=1000),
        op("L", 4e6, 1000, 1000),
        op("R", 4e6, 1000, 1000),
        op("J", 1e6, 2000, 1000),
    )
    edges = (Edge(src=0, dst=1, nbytes=1000), Edge(src=0, dst=2, nbytes=1000),
             Edge(src=1, dst=3, nbytes=1000), Edge(src=2, dst=3, nbytes=1000))
    return OpGraph(name="fork", ops=ops, edges=edges)


def resident_and_streamed(space):
    """On ``soc``, for a graph of two ops with weights (tests/measure/conftest.py ``weighted``):
    the first keeps its weights in sram1, the second streams them to sram2."""
    first, second = (op.name for op in space.graph.ops)
    return space.from_user({"ops": {
        first: {"unit": "accelerator1", "scope": "sram1", "weights": "resident"},
        second: {"unit": "accelerator2", "scope": "sram2", "weights": "streamed"}}})


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
