"""The compiled batch simulator agrees with the event-by-event reference, field by field.

``Simulator.measure`` runs the compiled kernel (:mod:`autoplace.measure.batch`);
``Simulator.simulate`` is the reference written from docs/simulator.md. Both read one set of
tables (the compiled space), so this checks the schedule, the memory sweep and the result
fields: a change to either simulator alone breaks it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from factories import fork_graph, tiny_profile

from autoplace.baselines.heft import heft_genome
from autoplace.frontend.tarnawski import load_instance
from autoplace.hardware.load import bundled_profiles, load_profile
from autoplace.measure.batch import fits, fitting, simulate_batch, streams
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.search.genetic_operators import Genomes
from autoplace.space import SearchSpace

MODELS = ("squeezenet", "inception_v1", "resnet50")
FIELDS = ("latency_s", "error", "detail", "unit_busy_s", "copy_bytes", "peak_bytes", "energy_j",
          "period_s")


def genomes(space: SearchSpace, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random genomes, and mutations of HEFT's (fewer copies, realistic ones)."""
    rng = np.random.default_rng(seed)
    rc, rm = space.random_genomes(24, rng)
    hc, hm = (x[None, :] for x in heft_genome(space))
    mc, mm = Genomes(space).mutate(hc, hm, np.zeros(24, dtype=np.int64), rng)
    return np.concatenate([rc, mc]), np.concatenate([rm, mm])


def assert_same(batched, reference) -> None:
    for b, (got, want) in enumerate(zip(batched, reference)):
        for field in FIELDS:
            assert getattr(got, field) == getattr(want, field), (b, field)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("hw", sorted(bundled_profiles()))
def test_batched_equals_reference_on_random_placements(hw, model):
    space = SearchSpace(load_graph(model), load_profile(hw))
    sim = Simulator(space)
    choice, mode = genomes(space, seed=len(model) + len(hw))
    placements = [space.decode(c, m) for c, m in zip(choice, mode)]
    batched = sim.measure(placements)
    assert_same(batched, [sim.simulate(p) for p in placements])
    # the kernel's own answer to "does it fit" is what the measurements say
    assert fits(space, choice, mode).tolist() == [r.ok for r in batched]


@pytest.mark.parametrize("hw", [*sorted(bundled_profiles()), "ops-resnet50"])
def test_figures_without_the_per_unit_arrays_are_the_same(hw):
    """``per_unit=False`` (what the search ranks and filters by, made in one scratch row
    cleared where each row wrote) gives every figure it keeps as the per-unit run does; a
    row left behind in the scratch row would change the rows after it."""
    if hw.startswith("ops-"):  # a block-model profile (Tarnawski et al.'s instance)
        space = SearchSpace(*load_instance(hw))
    else:
        space = SearchSpace(load_graph("inception_v1"), load_profile(hw))
    choice, mode = genomes(space, seed=11)
    whole, lean = (simulate_batch(space, choice, mode, per_unit=p) for p in (True, False))
    for field in ("latency", "period", "over", "stream_over", "no_route", "not_contiguous",
                  "copy_bytes"):
        np.testing.assert_array_equal(getattr(lean, field), getattr(whole, field), field)
    assert lean.busy is None and lean.peak is None and lean.weights is None
    assert np.array_equal(fitting(space, lean), fitting(space, whole))
    assert np.array_equal(streams(space, lean), streams(space, whole))
    assert whole.over.any() or hw in ("host", "ops-resnet50")  # overflows were exercised


def test_the_check_covers_failures_and_the_mesh_overflows():
    space = SearchSpace(load_graph("squeezenet"), load_profile("mesh"))
    sim = Simulator(space)
    choice, mode = space.random_genomes(40, np.random.default_rng(5))
    results = sim.measure([space.decode(c, m) for c, m in zip(choice, mode)])
    kinds = {r.error for r in results}
    assert None in kinds and len(kinds) > 1  # both fitting and overflowing placements


def test_a_copy_without_a_route_is_a_failure_on_both_paths():
    prof = tiny_profile(modes=("sync",))
    prof = dataclasses.replace(prof, copies=prof.copies[:1])  # dram -> sram only
    space = SearchSpace(fork_graph(), prof)
    sim = Simulator(space)
    p = space.decode([0, 2, 2, 0], [0, 0, 0, 0])  # L, R in sram; J in dram: no way back
    out = simulate_batch(space, *space.encode([p]))
    assert out.no_route.tolist() == [True]
    assert sim.measure([p])[0].error == sim.simulate(p).error is not None


def test_a_prefix_ends_each_op_when_the_whole_run_does():
    space = SearchSpace(load_graph("inception_v1"), load_profile("soc"))
    choice, mode = genomes(space, seed=3)
    whole = simulate_batch(space, choice, mode, finish=True)
    for k in (1, 17, space.n_ops // 2):
        part = simulate_batch(space, choice, mode, prefix=k, finish=True)
        assert np.array_equal(part.finish, whole.finish[:, :k])
        assert np.array_equal(part.latency, whole.finish[:, :k].max(axis=1))


@pytest.mark.parametrize("model, hw", [("densenet121", "soc"), ("inception_v1", "mesh")])
def test_the_sweep_orders_items_the_same_by_insertion_or_by_merging_runs(monkeypatch, model,
                                                                          hw):
    """The peak sweep sorts items by insertion sort within a shift budget and past it by
    merging each resource's runs: both orders give the same figures."""
    from autoplace.measure import batch

    space = SearchSpace(load_graph(model), load_profile(hw))
    choice, mode = genomes(space, seed=3)
    outs = []
    for shifts in (10**9, batch.SHIFTS_PER_ITEM, -1):  # always insertion, default, merge
        monkeypatch.setattr(batch, "SHIFTS_PER_ITEM", shifts)
        outs.append(simulate_batch(space, choice, mode))
    for out in outs[1:]:
        for field in ("latency", "busy", "copy_bytes", "peak", "weights", "no_route"):
            np.testing.assert_array_equal(getattr(out, field), getattr(outs[0], field))
    assert outs[0].peak.max() > 0


@pytest.mark.parametrize("per_unit,finish", [(True, True), (False, False)])
def test_a_batch_in_slices_over_the_cpus_is_one_calls_batch(monkeypatch, per_unit, finish):
    """From PARALLEL_ROWS rows a batch runs in a slice per CPU, in threads: every output
    array equals the one call's, row for row (3 CPUs: slices of unequal rows)."""
    from autoplace.measure import batch

    space = SearchSpace(load_graph("inception_v1"), load_profile("soc"))
    choice, mode = space.random_genomes(batch.PARALLEL_ROWS + 5, np.random.default_rng(3))
    monkeypatch.setattr(batch, "_cpus", lambda: 1)
    one = simulate_batch(space, choice, mode, per_unit=per_unit, finish=finish)
    monkeypatch.setattr(batch, "_cpus", lambda: 3)
    monkeypatch.setattr(batch, "_pool", lambda: __import__("concurrent.futures").futures
                        .ThreadPoolExecutor(max_workers=3))
    assert len(batch._slices(len(choice))) == 3
    sliced = simulate_batch(space, choice, mode, per_unit=per_unit, finish=finish)
    for field in dataclasses.fields(one):
        a, b = getattr(one, field.name), getattr(sliced, field.name)
        assert (a is None) == (b is None), field.name
        assert a is None or np.array_equal(a, b), field.name
