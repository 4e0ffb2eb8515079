"""``--objective throughput``: the tuner minimises a stream's period, not the latency, and the
study, saved models and log readers keep the two apart."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from factories import fork_graph
from search_factories import two_unit_profile

from autoplace.cost_model import CostModelError, Featurizer, XGBCostModel
from autoplace.graph import Edge, OpGraph
from autoplace.measure.objective import LATENCY, THROUGHPUT, objective_named
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import TuningLog, best, load, read
from autoplace.reports import analysis
from autoplace.search import SearchError, TuneConfig, tune
from autoplace.space import Placement, SearchSpace

pytestmark = pytest.mark.filterwarnings("ignore:search stopped after")  # 16 placements in all


def four_op_chain() -> SearchSpace:
    """S -> L -> R -> J (1, 4, 4, 1 MFLOP) on cpu (2.5 GFLOP/s) and acc (4 GFLOP/s): acc is
    faster at every op, so the fastest inference runs all four there (2.5 ms); a stream is
    fastest with one big op on cpu (1.6 ms) and the rest on acc (1.5 ms)."""
    ops = fork_graph().ops
    edges = tuple(Edge(src=i, dst=i + 1, nbytes=1000) for i in range(3))
    return SearchSpace(OpGraph(name="chain4", ops=ops, edges=edges), two_unit_profile())


def by_hand(space: SearchSpace) -> tuple[float, float]:
    """The least latency and the least period over all 16 placements (no copies: one
    scope), from the op times alone."""
    secs = {(i, u): space.seconds_of(i, u, "dram", "streamed") for i in range(4)
            for u in ("cpu", "acc")}
    latency, period = np.inf, np.inf
    for units in itertools.product(("cpu", "acc"), repeat=4):
        load = {u: sum(secs[i, x] for i, x in enumerate(units) if x == u) for u in units}
        latency = min(latency, sum(secs[i, u] for i, u in enumerate(units)))
        period = min(period, max(load.values()))
    return latency, period


def run(tmp_path, space, name, **cfg):
    with TuningLog(tmp_path / name) as log:
        return tune(space, Simulator(space), log, TuneConfig(trials=24, **cfg))


def test_throughput_finds_the_balanced_pipeline_latency_the_fast_inference(tmp_path):
    space = four_op_chain()
    least_latency, least_period = by_hand(space)
    assert least_latency == pytest.approx(2.5e-3, rel=1e-3)
    assert least_period == pytest.approx(1.6e-3, rel=1e-3)
    fast = run(tmp_path, space, "latency.jsonl").best.result
    stream = run(tmp_path, space, "stream.jsonl", objective="throughput").best.result
    assert fast.latency_s == pytest.approx(least_latency, rel=1e-12)
    assert fast.period_s == pytest.approx(least_latency, rel=1e-12)  # one unit does it all
    assert stream.period_s == pytest.approx(least_period, rel=1e-12)
    assert stream.latency_s > fast.latency_s  # the stream's best is a slower inference


def test_the_study_remembers_its_objective(tmp_path):
    space = four_op_chain()
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    run(tmp_path, space, "a.jsonl", storage=storage, study_name="s")
    with pytest.raises(SearchError, match="minimises latency, not throughput"):
        run(tmp_path, space, "a.jsonl", storage=storage, study_name="s", resume=True,
            objective="throughput")


def test_a_saved_model_is_for_one_objective(tmp_path):
    space = four_op_chain()
    choice, mode = space.random_genomes(12, np.random.default_rng(0))
    feats = Featurizer(space, THROUGHPUT)
    X = feats.transform(choice, mode)
    model = XGBCostModel(target="throughput", n_estimators=2).fit(X, X[:, 0])
    model.save(tmp_path / "m.json")
    assert XGBCostModel.load(tmp_path / "m.json", target="throughput").predict(X).shape == (12,)
    with pytest.raises(CostModelError, match="throughput objective; this job's is latency"):
        XGBCostModel.load(tmp_path / "m.json")


def test_the_throughput_features_start_from_the_simulated_period():
    space = four_op_chain()
    choice, mode = space.random_genomes(16, np.random.default_rng(1))
    sim = Simulator(space)
    periods = [r.period_s for r in sim.measure(space.decode_rows(choice, mode))]
    feats = Featurizer(space, THROUGHPUT)
    assert np.exp(feats.transform(choice, mode)[:, 0]) * feats.reference == \
        pytest.approx(periods, rel=1e-12)


def test_best_reads_either_objective_from_one_log(tmp_path):
    space = four_op_chain()
    run(tmp_path, space, "both.jsonl", objective="throughput")
    records = read(tmp_path / "both.jsonl")
    assert best(records).result.latency_s == min(r.result.latency_s for r in records)
    assert best(records, objective=THROUGHPUT).result.period_s == \
        min(r.result.period_s for r in records)
    frame = load(tmp_path / "both.jsonl")
    assert frame["period_s"].tolist() == [r.result.period_s for r in records]
    top = analysis.summary(frame).iloc[0]  # the best by latency, with its period beside it
    assert top["period_ms"] == pytest.approx(best(records).result.period_s * 1e3, rel=1e-12)


def test_objectives_by_name():
    assert objective_named("latency") is LATENCY
    assert objective_named("throughput").value(
        Simulator(four_op_chain()).simulate(Placement(
            ops={n: ("acc", "dram") for n in "SLRJ"}, copies={}))) == pytest.approx(2.5e-3,
                                                                                      rel=1e-3)
    with pytest.raises(ValueError, match="objective must be one of"):
        objective_named("peak_memory")  # a criterion of a front, not searched for
    with pytest.raises(ValueError, match="objective must be one of"):
        TuneConfig(objective="power")


def hungry_chain() -> SearchSpace:
    """:func:`four_op_chain` where acc, the faster unit, draws 5 W and cpu 1 W: each op's
    energy is its seconds times its unit's power (no idle power, no memory energy)."""
    from dataclasses import replace

    prof = two_unit_profile()
    units = tuple(replace(u, power_w={"cpu": 1.0, "acc": 5.0}[u.name]) for u in prof.units)
    space = four_op_chain()
    return SearchSpace(space.graph, replace(prof, units=units))


def every_placement(space: SearchSpace) -> list[tuple[float, float]]:
    """(latency, energy) of all 16 placements, by hand: a chain runs one op at a time."""
    power = {"cpu": 1.0, "acc": 5.0}
    secs = {(i, u): space.seconds_of(i, u, "dram", "streamed") for i in range(4)
            for u in ("cpu", "acc")}
    return [(sum(secs[i, u] for i, u in enumerate(units)),
             sum(secs[i, u] * power[u] for i, u in enumerate(units)))
            for units in itertools.product(("cpu", "acc"), repeat=4)]


@pytest.mark.parametrize("objective, limits, want", [
    ("energy", {}, lambda lat, e: e),
    ("energy", {"latency_s": 3.5e-3}, lambda lat, e: e if lat <= 3.5e-3 else np.inf),
    ("latency", {"energy_j": 6e-3}, lambda lat, e: lat if e <= 6e-3 else np.inf),
])
def test_the_best_within_limits_is_the_enumerated_one(tmp_path, objective, limits, want):
    """The least energy (and within a latency bound), the least latency within an energy
    bound: what enumerating the 16 placements by hand gives."""
    from autoplace.measure.limits import Limits

    space = hungry_chain()
    goal = min(want(lat, e) for lat, e in every_placement(space))
    bounds = Limits(**limits)
    res = run(tmp_path, space, "l.jsonl", objective=objective, limits=bounds).best.result
    got = res.energy_j if objective == "energy" else res.latency_s
    assert got == pytest.approx(goal, rel=1e-9) and bounds.admits(res)
    unbounded = min(x[objective == "energy"] for x in every_placement(space))
    assert (goal > unbounded) == bool(limits)  # the bounds bind


def test_a_bounded_objective_keeps_its_name_target_and_feasibility():
    from autoplace.measure.batch import simulate_batch
    from autoplace.measure.limits import Limits

    space = hungry_chain()
    bounded = LATENCY.bounded(Limits(energy_j=6e-3))
    assert LATENCY.bounded(Limits()) is LATENCY
    assert bounded.name == "latency --max-energy 0.006" and bounded.target == "latency"
    assert bounded.per_unit and not LATENCY.per_unit
    c, m = space.random_genomes(64, np.random.default_rng(0))
    out = simulate_batch(space, c, m)
    results = Simulator(space).measure(space.decode_rows(c, m))
    kept = [r.energy_j <= 6e-3 for r in results]
    assert bounded.feasible(space, out).tolist() == kept and 0 < sum(kept) < 64
    assert [bounded.value(r) is not None for r in results] == kept


def test_the_excess_over_limits_is_the_sum_of_each_bounds_share_over():
    """On the 16 placements of the hungry chain, by hand: the share by which the latency
    exceeds 3.5 ms plus the share by which the energy exceeds 8 mJ, 0 for each kept."""
    from dataclasses import replace

    from autoplace.measure.batch import simulate_batch
    from autoplace.measure.limits import Limits

    space = hungry_chain()
    limits = Limits(latency_s=3.5e-3, energy_j=8e-3)
    home = space.uniform("cpu")
    names = [op.name for op in space.graph.ops]
    placements = [replace(home, ops={n: (u, "dram") for n, u in zip(names, units)})
                  for units in itertools.product(("cpu", "acc"), repeat=4)]
    out = simulate_batch(space, *space.encode(placements))
    want = [max(lat / 3.5e-3 - 1, 0) + max(e / 8e-3 - 1, 0)
            for lat, e in every_placement(space)]
    got = limits.excess(space, out)
    assert got == pytest.approx(want) and 0 < np.count_nonzero(got) < 16
    assert (got == 0).tolist() == limits.within(space, out).tolist()
    assert LATENCY.excess(space, out).tolist() == [0.0] * 16  # (no limits)


def test_a_study_of_other_limits_is_refused(tmp_path):
    from autoplace.measure.limits import Limits

    space, storage = hungry_chain(), f"sqlite:///{tmp_path / 'study.db'}"
    lean = Limits(energy_j=6e-3)
    run(tmp_path, space, "a.jsonl", storage=storage, study_name="s", limits=lean)
    run(tmp_path, space, "a.jsonl", storage=storage, study_name="s", limits=lean, resume=True)
    with pytest.raises(SearchError, match="minimises latency --max-energy 0.006, not latency;"):
        run(tmp_path, space, "a.jsonl", storage=storage, study_name="s", resume=True)
