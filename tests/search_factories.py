"""Small profiles and graphs whose HEFT plan, optimum and bounds are worked out by hand."""

from __future__ import annotations

from factories import chain_graph, op, tiny_profile

from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile, Scope, Unit


def two_unit_profile() -> Profile:
    """cpu (host, 2.5 GFLOP/s, any kind) and acc (4 GFLOP/s, elementwise), one shared dram.

    With the fork graph of ``factories`` (S 1, L 4, R 4, J 1 MFLOP, tiny bytes): cpu takes
    0.4 / 1.6 / 1.6 / 0.4 ms and acc 0.25 / 1 / 1 / 0.25 ms; no copies are ever needed.
    """
    units = (
        Unit(name="cpu", target={"kind": "llvm"}, accepts=frozenset({"*"}),
             gflops={"default": 2.5}),
        Unit(name="acc", target={"kind": "llvm"}, accepts=frozenset({"elementwise"}),
             gflops={"default": 4.0}),
    )
    dram = Scope(name="dram", capacity_bytes=1 << 30, bandwidth_bps=1e12,
                 access=frozenset({"cpu", "acc"}))
    return Profile(name="two", host="cpu", default_scope="dram", units=units, scopes=(dram,),
                   copies=())


def sram_only_profile(sram_mib: float = 1.0) -> Profile:
    """The tiny profile, but acc can only use sram: a placement on acc needs copies."""
    tiny = tiny_profile(sram_mib=sram_mib)
    dram, sram = tiny.scopes
    dram = Scope(name="dram", capacity_bytes=dram.capacity_bytes,
                 bandwidth_bps=dram.bandwidth_bps, access=frozenset({"cpu"}))
    return Profile(name="tiny-sram", host="cpu", default_scope="dram", units=tiny.units,
                   scopes=(dram, sram), copies=tiny.copies)


def conv_chain() -> OpGraph:
    """The chain X -> Y -> Z with X and Z conv2d (cpu only) and Y elementwise."""
    g = chain_graph()
    ops = (op("X", 1e6, 1000, 1000, ext=1000, kind="conv2d"), g.ops[1],
           op("Z", 1e6, 1000, 1000, kind="conv2d"))
    return OpGraph(name="chain", ops=ops, edges=g.edges)
