"""Unit classes and interchangeable units: relabellings of one placement are one genome."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autoplace.frontend.tarnawski import load_instance
from autoplace.hardware.load import load_profile
from autoplace.hardware.profile import CopyPath
from autoplace.measure.batch import simulate_batch
from autoplace.models import load_graph
from autoplace.space import SearchSpace


def twin_soc():
    """soc with accelerator2 a copy of accelerator1 (each with its own SRAM and DMA engine)."""
    soc = load_profile("soc")
    acc1 = soc.unit("accelerator1")
    units = tuple(dataclasses.replace(acc1, name="accelerator2") if u.name == "accelerator2"
                  else u for u in soc.units)
    sram2 = dataclasses.replace(soc.scope("sram2"), access=frozenset({"accelerator2"}))
    sram1 = dataclasses.replace(soc.scope("sram1"), access=frozenset({"accelerator1"}))
    scopes = tuple(sram1 if s.name == "sram1" else sram2 if s.name == "sram2" else s
                   for s in soc.scopes)
    copies = tuple(c for c in soc.copies if {c.src, c.dst} != {"sram1", "sram2"})
    return dataclasses.replace(soc, units=units, scopes=scopes, copies=copies)


def _swapped(space: SearchSpace, choice: np.ndarray, units: list[str], scopes: list[str]):
    """``choice`` with the named units (and their scopes) renamed by a cyclic shift."""
    ops = np.broadcast_to(np.arange(space.n_ops), choice.shape)
    unit, scope = space.c_unit[ops, choice], space.c_scope[ops, choice]
    u = [space.profile.unit_index[n] for n in units]
    s = [space.profile.scope_index[n] for n in scopes]
    new_unit, new_scope = unit.copy(), scope.copy()
    for a in range(len(u)):
        b = (a + 1) % len(u)
        new_unit[unit == u[a]], new_scope[scope == s[a]] = u[b], s[b]
    out = space.choice_index(ops, new_unit, new_scope, space.c_resident[ops, choice])
    assert (out >= 0).all()
    return out


@pytest.mark.parametrize("case", ["instance", "twin_soc"])
def test_relabellings_over_interchangeable_units_have_one_canonical_genome(case):
    if case == "instance":
        space = SearchSpace(*load_instance("ops-bert_l-3"))
        units, scopes = [f"fpga{i}" for i in range(4)], [f"mem{i}" for i in range(4)]
    else:
        space = SearchSpace(load_graph("squeezenet"), twin_soc())
        units, scopes = ["accelerator1", "accelerator2"], ["sram1", "sram2"]
    assert [space.units[u] for u in space.symmetries[0].units] == units
    choice, mode = space.canonical(*space.random_genomes(40, np.random.default_rng(2)))
    other = _swapped(space, choice, units, scopes)
    assert (other != choice).any(axis=1).all()
    again, mode2 = space.canonical(other, mode)
    np.testing.assert_array_equal(again, choice)
    np.testing.assert_array_equal(mode2, mode)
    np.testing.assert_allclose(simulate_batch(space, other, mode).latency,
                               simulate_batch(space, choice, mode).latency, rtol=1e-12)
    first = space.c_unit[np.arange(space.n_ops), choice[0]]
    used = [u for u in dict.fromkeys(first.tolist()) if space.units[u] in units]
    assert [space.units[u] for u in used] == units[:len(used)]  # named in order of first use


def test_units_with_their_own_routes_are_not_interchangeable():
    """Alike but not interchangeable: a mesh's PEs (neighbour links make distances differ),
    twin accelerators with a path between their SRAMs, or sharing one of their DMA engines
    (sharing all of them is symmetric)."""
    mesh = SearchSpace(load_graph("squeezenet"), load_profile("mesh"))
    assert len(set(mesh.unit_class.tolist())) < len(mesh.units) and not mesh.symmetries
    twins = twin_soc()
    linked = dataclasses.replace(twins, copies=twins.copies + (
        CopyPath(src="sram1", dst="sram2", bandwidth_bps=3e9, latency_s=3e-6, modes=("sync",),
                 engine="x"),))
    shared = dataclasses.replace(twins, copies=tuple(dataclasses.replace(c, engine="dma0")
                                                     for c in twins.copies))
    overlap = dataclasses.replace(twins, copies=tuple(
        dataclasses.replace(c, engine="back") if c.dst == "dram" else c for c in twins.copies))
    for profile, symmetric in ((twins, True), (shared, True), (linked, False),
                               (overlap, False)):
        assert bool(SearchSpace(load_graph("squeezenet"), profile).symmetries) == symmetric
