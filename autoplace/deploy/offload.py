"""Partition a model for the accelerators of a placement, as TVM's BYOC flow does.

For every unit with a pattern table and a code generator (``codegen``), the build runs
``FuseOpsByPattern`` over the unit's patterns (``<codegen>.<pattern>``, longest first) with
a check that follows the placement: a match is grouped for the unit only if it is one of
the graph's matches (``OpGraph.matches``) and the placement put all its ops there. Then
``MergeCompositeFunctions`` merges adjacent composites of one code generator into regions
(it keeps apart those whose merge would make a cycle: TVM issue 19887) and ``RunCodegen``
hands each region to ``relax.ext.<codegen>``. :class:`Offload` says what was built: the
matches offloaded, the region calls (what each reads and writes, as graph values:
:mod:`autoplace.deploy.region_calls`), and the placed groups the merge split.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.relax.backend.pattern_registry import FusionPattern

from autoplace.deploy import reference_accelerator  # noqa: F401  (registers its generator)
from autoplace.deploy.region_calls import RegionCall, region_calls
from autoplace.deploy.targets import BuildError
from autoplace.frontend.fold import fold
from autoplace.frontend.patterns import pattern
from autoplace.frontend.relax import kernel_of_calls
from autoplace.graph import Match, OpGraph
from autoplace.hardware.profile import Profile, Unit
from autoplace.patterns import PATTERNS
from autoplace.space import Placement


@dataclass(frozen=True)
class Offload:
    """What a partition offloaded: per unit, the matches (graph op indices); the region
    calls in ``main``, in its order (regions alike share one function, and symbol);
    ``groups``: the placed groups (ops on the unit joined by edges), which the merge should
    make one region each."""

    matches: dict[str, tuple[Match, ...]]
    calls: tuple[RegionCall, ...]
    groups: dict[str, int]

    @property
    def symbols(self) -> dict[str, tuple[str, ...]]:
        """Per unit, the symbols of its region calls, in ``main``'s order."""
        return {u: tuple(c.symbol for c in self.calls if c.unit == u) for u in self.groups}

    @property
    def regions(self) -> dict[str, int]:
        """Per unit, the region calls the code generator's build makes."""
        return {u: len(s) for u, s in self.symbols.items()}

    def split_of(self, unit: str) -> int:
        """How many more regions the merge built on ``unit`` than it has placed groups."""
        return max(0, self.regions[unit] - self.groups[unit])

    @property
    def split(self) -> int:
        return sum(self.split_of(u) for u in self.symbols)


def offload_units(profile: Profile) -> list[Unit]:
    """The units whose placed matches a code generator builds."""
    return [u for u in profile.units if u.codegen]


def check_codegens(profile: Profile) -> list[Unit]:
    """The units with a code generator; a BuildError naming the key where one is not
    registered (``relax.ext.<codegen>``)."""
    units = offload_units(profile)
    for unit in units:
        if tvm.get_global_func(f"relax.ext.{unit.codegen}", allow_missing=True) is None:
            raise BuildError(f"{profile.source}: units.{unit.name}.codegen: no code generator "
                             f"relax.ext.{unit.codegen} is registered")
    return units


def _check(unit: Unit, pattern: str, graph: OpGraph, placement: Placement,
           kernel_of: dict[str, int], taken: list):
    """FuseOpsByPattern's check for ``pattern`` on ``unit``: the match is a graph match
    whose ops the placement put on the unit (recorded in ``taken``)."""
    def check(ctx) -> bool:
        names = {v.name for v in ctx.matched_bindings.keys()}
        ops = tuple(sorted({kernel_of[n] for n in names if n in kernel_of}))
        match = Match(pattern=pattern, ops=ops) if ops else None
        ok = match in graph.matches and all(
            placement.ops[graph.ops[i].name][0] == unit.name for i in ops)
        if ok:
            taken.append(match)
        return ok
    return check


def _patterns(unit: Unit, graph, placement, kernel_of, taken) -> list[FusionPattern]:
    """The unit's pattern table as TVM's, in :data:`PATTERNS` order reversed (the longer
    composites of a family come later there: they must match first), then its entry
    points."""
    names = [n for n in reversed(PATTERNS) if n in unit.patterns]
    names += sorted(unit.patterns - set(PATTERNS))  # (entry points: first-come)
    return [FusionPattern(f"{unit.codegen}.{n}", pattern(n), {},
                          _check(unit, n, graph, placement, kernel_of, taken)) for n in names]


def _groups(graph: OpGraph, ops: set[int]) -> int:
    """The number of groups of ``ops`` joined by the graph's edges among them."""
    parent = {i: i for i in ops}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for e in graph.edges:
        if e.src in ops and e.dst in ops:
            parent[root(e.src)] = root(e.dst)
    return len({root(i) for i in ops})


def _options(unit: Unit) -> dict:
    """What the code generator is told of the unit (its modelled time)."""
    return {"launch_s": unit.launch_overhead_s, "gflops": dict(unit.gflops)}


def partition(mod: tvm.IRModule, graph: OpGraph, placement: Placement,
              profile: Profile) -> tuple[tvm.IRModule, Offload]:
    """``mod`` (as imported, the graph's model) with the matches placed on code-generator
    units offloaded to their generators, and what was offloaded."""
    units = check_codegens(profile)
    before = fold(mod)
    kernel_of, taken = kernel_of_calls(before), {u.name: [] for u in units}
    patterns = [p for u in units
                for p in _patterns(u, graph, placement, kernel_of, taken[u.name])]
    grouped = relax.transform.FuseOpsByPattern(patterns, bind_constants=True)(before)
    merged = relax.transform.MergeCompositeFunctions()(grouped)
    offload = Offload(matches={u: _distinct(ms) for u, ms in taken.items()},
                      calls=region_calls(before, merged, kernel_of,
                                         {u.codegen: u.name for u in units}),
                      groups={u.name: _groups(graph, {i for m in taken[u.name] for i in m.ops})
                              for u in units})
    _check_placed(graph, placement, offload)
    options = {u.codegen: _options(u) for u in units}
    return relax.transform.RunCodegen(target_options=options)(merged), offload


def _distinct(matches: list[Match]) -> tuple[Match, ...]:
    """One match per op set, the first accepted (TVM groups the ops once: a later check of
    the same ops under another pattern, as matmul_bias and matmul_transposed_bias on one
    classifier, offloads nothing more)."""
    first: dict[tuple[int, ...], Match] = {}
    for m in matches:
        first.setdefault(m.ops, m)
    return tuple(first.values())


def _check_placed(graph: OpGraph, placement: Placement, offload: Offload) -> None:
    """Every op placed on a code-generator unit was offloaded (else the build would run it
    elsewhere than placed)."""
    for unit, matches in offload.matches.items():
        done = {i for m in matches for i in m.ops}
        for i, op in enumerate(graph.ops):
            if placement.ops[op.name][0] == unit and i not in done:
                raise BuildError(f"op {op.name!r} is placed on {unit}, but no match of its "
                                 "pattern table there was offloaded")




def region_functions(built: tvm.IRModule, offload: Offload) -> dict[str, object]:
    """The function of each region symbol of ``offload``: exported by a module the code
    generator returned (``external_mods`` of ``built``), else registered globally under
    the symbol (as the reference accelerator does)."""
    modules = list(built.attrs.get("external_mods", [])) if built.attrs is not None else []
    out = {}
    for symbol in {c.symbol for c in offload.calls}:
        found = next((m.get_function(symbol, True) for m in modules
                      if m.implements_function(symbol, True)), None)
        found = found or tvm.get_global_func(symbol, allow_missing=True)
        if found is None:
            raise BuildError(f"offload: the code generator built no function {symbol!r}")
        out[symbol] = found
    return out
