"""The cost model: features, the scikit-learn contract, learning, saving, warm start."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from factories import chain_graph, fork_graph, tiny_profile
from scipy.stats import spearmanr

from autoplace.baselines.heft import heft
from autoplace.cost_model import (
    FEATURES,
    AnalyticCostModel,
    CostModelError,
    Featurizer,
    NotFittedError,
    SimulatorCostModel,
    XGBCostModel,
)
from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog
from autoplace.search import TuneConfig, tune
from autoplace.search.genetic_operators import Genomes
from autoplace.search.warm_start import load_rows
from autoplace.space import SearchSpace


def _rho(a, b) -> float:
    """Spearman's rank correlation."""
    return float(spearmanr(a, b).statistic)


def features_of(space, spec):
    feat = Featurizer(space)
    return feat, feat.transform(*space.encode([space.from_user(spec)]))[0]


def test_features_of_a_hand_checked_placement():
    # the docs' worked example: X, Z on cpu, Y on acc in sram, async copies (2 us each);
    # critical path 1 + 0.002 + 0.201 + 0.002 + 1 = 2.205 ms; cpu busy 2 ms, dma0 4 us
    space = SearchSpace(chain_graph(), tiny_profile())
    spec = {"X": "cpu", "Y": {"unit": "acc", "scope": "sram"}, "Z": "cpu"}
    feat, x = features_of(space, spec)
    f = dict(zip(FEATURES, x))
    ref = feat.reference  # fastest times: X 101 us, Y 201 us, Z 101 us, copies free
    assert ref == pytest.approx(403e-6)
    assert f["log_critical_path"] == pytest.approx(np.log(2.205e-3 / ref + 1e-3))
    assert f["log_busiest_unit"] == pytest.approx(np.log(2e-3 / ref + 1e-3))
    assert f["log_busiest_dma"] == pytest.approx(np.log(4e-6 / ref + 1e-3))
    assert f["log_estimate"] == f["log_critical_path"]  # the estimate is the max of the three
    simulated = Simulator(space).measure([space.from_user(spec)])[0].latency_s
    assert f["log_simulated"] == pytest.approx(np.log(simulated / ref))  # the targets' scale
    assert f["async_bytes"] == 1.0 and f["sync_bytes"] == 0.0  # both edges copied, async
    assert f["crossing_edges"] == 1.0 and f["unit_switches"] == 1.0
    assert f["units_used"] == 1.0 and f["no_route"] == 0.0
    assert f["ops_off_default"] == pytest.approx(1 / 3)


def test_features_do_not_depend_on_graph_size():
    # the same chain twice as long, each op on the same unit: same ratios
    one = SearchSpace(chain_graph(), tiny_profile())
    _, a = features_of(one, {"X": "cpu", "Y": "cpu", "Z": "cpu"})
    assert np.isfinite(a).all() and a.shape == (len(FEATURES),)
    _, b = features_of(one, {"X": "acc", "Y": "acc", "Z": "acc"})
    assert a[FEATURES.index("units_used")] == b[FEATURES.index("units_used")] == 0.5


def test_the_sklearn_contract():
    for cls in (XGBCostModel, SimulatorCostModel, AnalyticCostModel):
        model = cls()
        assert not [k for k in vars(model) if k.endswith("_")]  # __init__ stores settings only
        with pytest.raises(NotFittedError, match="before fit"):
            model.predict(np.zeros((1, len(FEATURES))))
        X, y = np.random.default_rng(0).random((20, len(FEATURES))), np.zeros(20)
        assert model.fit(X, y) is model
        assert "n_features_in_" in vars(model)
    params = inspect.signature(XGBCostModel).parameters
    assert all(p.kind is p.KEYWORD_ONLY for p in params.values())
    with pytest.raises(CostModelError, match=rf"shape \(n, {len(FEATURES)}\)"):
        XGBCostModel().fit(np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(CostModelError, match="3 rows but y has 2"):
        XGBCostModel().fit(np.zeros((3, len(FEATURES))), np.zeros(2))


@pytest.fixture(scope="module")
def biglittle_data():
    """600 placements near HEFT's on squeezenet/biglittle, many over the L2 capacity."""
    graph, profile = load_graph("squeezenet"), load_profile("biglittle")
    space = SearchSpace(graph, profile)
    genomes = Genomes(space)
    rng = np.random.default_rng(0)
    c0, m0 = space.encode([heft(space)])
    choice, mode = c0, m0
    for _ in range(3):  # three rounds of mutations, each from the previous batch
        choice, mode = genomes.mutate(choice, mode, rng.integers(0, len(choice), 600), rng)
    mode = space.normalize(choice, mode)
    results = Simulator(space).measure(
        [space.decode(c, m) for c, m in zip(choice, mode)])
    lat = np.array([r.latency_s if r.ok else np.nan for r in results])
    feat = Featurizer(space)
    X = feat.transform(choice, mode)
    return X, feat.targets(lat, X), lat


def test_the_model_learns_what_the_estimate_misses(biglittle_data):
    X, y, lat = biglittle_data
    failed = np.isnan(lat).mean()
    assert 0.2 < failed < 0.9  # memory overflows: the analytic estimate cannot see them
    train, test = np.arange(len(y)) < 400, np.arange(len(y)) >= 400
    model = XGBCostModel(seed=0).fit(X[train], y[train])
    learned = _rho(model.predict(X[test]), y[test])
    analytic = _rho(AnalyticCostModel().fit(X[train], y[train]).predict(X[test]), y[test])
    random = _rho(np.random.default_rng(1).random(test.sum()), y[test])
    assert learned > 0.9
    assert learned > analytic + 0.15 and learned > abs(random) + 0.5


def test_the_model_learns_what_the_simulator_misses():
    """A measurer unlike the profile (the LITTLE cores' convolutions 3x slower, DRAM half as
    fast, as an uncalibrated profile would be): the residual over the simulator ranks unseen
    placements better than the simulator alone."""
    graph, profile = load_graph("squeezenet"), load_profile("biglittle")
    space = SearchSpace(graph, profile)
    little = profile.unit("little")
    slow = dataclasses.replace(little, gflops={**little.gflops,
                                               "conv2d": little.gflops["conv2d"] / 3})
    dram = dataclasses.replace(profile.scope("dram"),
                               bandwidth_bps=profile.scope("dram").bandwidth_bps / 2)
    truth = SearchSpace(graph, dataclasses.replace(
        profile, units=tuple(slow if u.name == "little" else u for u in profile.units),
        scopes=tuple(dram if s.name == "dram" else s for s in profile.scopes)))
    rng = np.random.default_rng(0)
    choice, mode = space.encode([heft(space)])
    for _ in range(3):
        choice, mode = Genomes(space).mutate(choice, mode, rng.integers(0, len(choice), 600),
                                             rng)
    mode = space.normalize(choice, mode)
    results = Simulator(truth).measure([truth.decode(c, m) for c, m in zip(choice, mode)])
    lat = np.array([r.latency_s if r.ok else np.nan for r in results])
    feat = Featurizer(space)
    X = feat.transform(choice, mode)
    y = feat.targets(lat, X)
    ok = ~np.isnan(lat)
    train, test = ok & (np.arange(len(y)) < 400), ok & (np.arange(len(y)) >= 400)
    learned = _rho(XGBCostModel(seed=0).fit(X[train], y[train]).predict(X[test]), y[test])
    alone = _rho(SimulatorCostModel().fit(X[train], y[train]).predict(X[test]), y[test])
    assert alone < 0.9  # the profile's simulator ranks them poorly
    assert learned > alone + 0.1 and learned > 0.9


def test_save_and_load_round_trip(tmp_path, biglittle_data):
    X, y, _ = biglittle_data
    model = XGBCostModel(seed=0).fit(X[:200], y[:200])
    for name in ("m.json", "m.ubj"):
        model.save(tmp_path / name)
        again = XGBCostModel.load(tmp_path / name)
        assert np.array_equal(again.predict(X[200:]), model.predict(X[200:])) or \
            np.allclose(again.predict(X[200:]), model.predict(X[200:]), atol=1e-6)
    with pytest.raises(CostModelError, match="ends in .json or .ubj"):
        model.save(tmp_path / "m.pkl")
    with pytest.raises(CostModelError) as unwritable:  # XGBoost's error is a stack trace
        model.save(tmp_path / "missing" / "m.json")
    assert str(unwritable.value) == f"{tmp_path / 'missing' / 'm.json'}: cannot write the " \
        "cost model (No such file or directory)"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(CostModelError, match="bad.json: not an XGBoost model file"):
        XGBCostModel.load(tmp_path / "bad.json")


def test_a_model_of_other_features_is_refused(tmp_path):
    import xgboost as xgb

    booster = xgb.train({"nthread": 1}, xgb.DMatrix(np.zeros((4, 3)), label=np.zeros(4)), 2)
    booster.save_model(str(tmp_path / "foreign.json"))
    with pytest.raises(CostModelError, match="other features"):
        XGBCostModel.load(tmp_path / "foreign.json")


def test_a_model_of_pipeline_plans_is_not_a_placement_model(tmp_path):
    """The pipeline search's model (its plans' features) saves and loads as itself, and
    is refused as a placement model."""
    from autoplace.pipeline.features import PLAN_FEATURES

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, len(PLAN_FEATURES)))
    plans = XGBCostModel(features=PLAN_FEATURES, target="throughput").fit(X, X[:, 0] + 0.1)
    plans.save(tmp_path / "plans.json")
    again = XGBCostModel.load(tmp_path / "plans.json", features=PLAN_FEATURES,
                              target="throughput")
    assert np.allclose(again.predict(X), plans.predict(X), atol=1e-6)
    with pytest.raises(CostModelError, match="other features"):
        XGBCostModel.load(tmp_path / "plans.json", target="throughput")
    with pytest.raises(CostModelError, match=r"shape \(n, 22\)"):
        XGBCostModel(target="throughput").fit(X, X[:, 0])


def test_same_data_same_model(biglittle_data):
    X, y, _ = biglittle_data
    a = XGBCostModel(seed=3).fit(X[:300], y[:300]).predict(X[300:])
    b = XGBCostModel(seed=3).fit(X[:300], y[:300]).predict(X[300:])
    assert np.array_equal(a, b)


def run(tmp_path, graph, profile, name, **cfg):
    space = SearchSpace(graph, profile)
    with TuningLog(tmp_path / name) as log:
        return tune(space, Simulator(space), log, TuneConfig(**cfg))


def test_warm_start_from_a_saved_model_and_logs(tmp_path):
    prof = load_profile("soc")
    first = run(tmp_path, load_graph("seed_te"), prof, "seed.jsonl", trials=16,
                save_model=str(tmp_path / "model.json"))
    assert (tmp_path / "model.json").is_file() and first.stats
    other = run(tmp_path, fork_graph(), tiny_profile(), "fork.jsonl", trials=8)
    assert other.measured == 8 + 3
    warm = (str(tmp_path / "seed.jsonl"), str(tmp_path / "fork.jsonl"),
            str(tmp_path / "model.json"))
    result = run(tmp_path, load_graph("squeezenet"), prof, "sq.jsonl", trials=8,
                 warm_start=warm)
    # all 21 seed_te records (16 + 5 baselines) are used (another graph, same profile); the
    # fork's are not
    assert result.warm_start.startswith("warm start: 21 records of 1 graph(s) (seed_te)")
    assert "skipped 11 of other profiles" in result.warm_start
    assert result.stats[0]["train_rows"] == 21 + result.stats[0]["measured"] - 8


def test_warm_start_rows_are_featurised_on_their_own_graph(tmp_path):
    prof = load_profile("soc")
    run(tmp_path, load_graph("seed_te"), prof, "seed.jsonl", trials=8)
    space = SearchSpace(load_graph("squeezenet"), prof)
    rows = load_rows([str(tmp_path / "seed.jsonl")], space)
    seed_space = SearchSpace(load_graph("seed_te"), prof)
    from autoplace.records.tuning_log import read

    records = read(tmp_path / "seed.jsonl")
    expected = Featurizer(seed_space).transform(*seed_space.encode(
                                                        [r.placement for r in records]))
    assert np.allclose(rows.X, expected)
    assert rows.used == len(records) == 8 + 5  # 4 single units and greedy


def test_a_missing_warm_start_or_a_bad_model_fails_before_measuring(tmp_path):
    (tmp_path / "bad.ubj").write_bytes(b"not a model")
    with pytest.raises(CostModelError, match="bad.ubj: not an XGBoost model file"):
        run(tmp_path, load_graph("seed_te"), load_profile("soc"), "l.jsonl", trials=4,
            warm_start=(str(tmp_path / "bad.ubj"),))
    assert not (tmp_path / "l.jsonl").exists()  # refused before it began: no log made
    with pytest.raises(ValueError, match="need cost_model='xgb', got 'analytic'"):
        TuneConfig(cost_model="analytic", save_model="m.json")
    with pytest.raises(ValueError, match="need cost_model='xgb', got 'none'"):
        TuneConfig(cost_model="none", warm_start=("a.jsonl",))
    with pytest.raises(ValueError, match="at most one saved model"):
        TuneConfig(warm_start=("a.json", "b.ubj"))


def _numpy_copy_features(space, choice, mode):
    """The copy features as the featurizer computed them with numpy before its compiled
    kernel: unloaded copy time per edge, sync/async time and bytes, DMA engines' busy time."""
    from autoplace.space import ASYNC, SYNC

    cross, used, rid = space.copy_plan(choice, mode)
    routes = space.routes
    secs = np.where(cross, routes.lat[rid] + space.nbytes * routes.inv[rid], 0.0)
    sync, asyn = cross & (used == SYNC), cross & (used == ASYNC)
    bi, ki = np.nonzero(asyn)
    r, total = rid[bi, ki], np.zeros(len(rid) * space.n_resources)
    for h in range(routes.hop_res.shape[1]):
        res = routes.hop_res[r, h]
        on = res >= 0
        s = routes.hop_lat[r[on], h] + space.nbytes[ki[on]] / routes.hop_bw[r[on], h]
        total += np.bincount(bi[on] * space.n_resources + res[on], weights=s,
                             minlength=len(total))
    dma = total.reshape(len(rid), space.n_resources)[:, len(space.units):]
    per_mode = np.column_stack([(secs * sync).sum(axis=1), (secs * asyn).sum(axis=1),
                                (space.nbytes * sync).sum(axis=1),
                                (space.nbytes * asyn).sum(axis=1)])
    return secs, per_mode, dma.max(axis=1, initial=0.0)


@pytest.mark.parametrize("model,hw", [("densenet121", "soc"), ("resnet50", "mesh"),
                                      ("inception_v1", "soc")])
def test_compiled_copy_features_equal_the_numpy_formulas(model, hw):
    from autoplace.cost_model import copy_sums

    space = SearchSpace(load_graph(model), load_profile(hw))
    choice, mode = space.random_genomes(64, np.random.default_rng(5))
    cross, used, rid = plan = space.copy_plan(choice, mode)
    r = space.routes
    got = copy_sums(cross, used, rid, space.nbytes, r.lat, r.inv, r.hop_res, r.hop_lat,
                  r.hop_bw, len(space.units), space.n_resources, space.transfer_s)
    for a, b in zip(got, _numpy_copy_features(space, choice, mode)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    assert got[1][:, 1].any() and got[2].any()  # async copies and DMA work were exercised
    f = Featurizer(space)
    np.testing.assert_array_equal(f.transform(choice, mode), f.transform(choice, used, plan))


def _per_row_sum(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    flat = (np.arange(len(index))[:, None] * n + index).ravel()
    return np.bincount(flat, weights=np.asarray(values, dtype=np.float64).ravel(),
                       minlength=len(index) * n).reshape(len(index), n)


@pytest.mark.parametrize("model,hw", [("densenet121", "soc"), ("inception_v1", "mesh")])
def test_compiled_op_sums_equal_the_numpy_formulas(model, hw):
    """The busiest, second busiest and host unit (with the sync copies), units busy, scope
    pressure, the biggest output over its capacity, unit switches and ops off the default
    scope: exactly the numpy formulas over every unit and scope (same sums, same order),
    though the kernel sums only the units and scopes each row uses."""
    from autoplace.cost_model import op_sums

    t = SearchSpace(load_graph(model), load_profile(hw))
    choice, _ = t.random_genomes(64, np.random.default_rng(6))
    ops = np.arange(t.n_ops)
    unit, scope, dur = t.c_unit[ops, choice], t.c_scope[ops, choice], t.c_dur[ops, choice]
    sync = np.random.default_rng(7).random(64) * np.arange(64) % 2  # none on even rows
    got = op_sums(unit, scope, dur, t.out_bytes, t.capacity, t.src, t.dst, t.default_scope,
                   len(t.units), len(t.scopes), t.host, sync)
    busy = _per_row_sum(unit, dur, len(t.units))
    busy[:, t.host] += sync
    ranked = np.sort(busy, axis=1)[:, ::-1]
    held = _per_row_sum(scope, np.broadcast_to(t.out_bytes, scope.shape), len(t.scopes))
    want = (ranked[:, 0], ranked[:, 1], busy[:, t.host], (busy > 0).sum(axis=1),
            (held / t.capacity).max(axis=1),
            (t.out_bytes / t.capacity[scope]).max(axis=1, initial=0.0),
            (unit[:, t.src] != unit[:, t.dst]).sum(axis=1),
            (scope != t.default_scope).sum(axis=1))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert got[6].any() and got[7].any() and got[3].max() > 1 and (got[1] > 0).any()


def test_with_the_simulator_as_the_measurer_the_residual_is_zero(biglittle_data):
    X, y, lat = biglittle_data  # measured by the simulator of the featurizer's own profile
    ok = ~np.isnan(lat)
    assert ok.sum() > 100
    np.testing.assert_allclose(y[ok], X[ok, 0], rtol=0, atol=1e-9)


def test_a_model_of_the_simulators_own_figures_boosts_no_trees_until_saved(
        tmp_path, monkeypatch, biglittle_data):
    """Every training row at the simulator's figure (the simulator as the measurer): the
    model predicts the simulator's figure without boosting; saving boosts the trees (40
    rounds), and the saved model predicts the same."""
    import xgboost as xgb

    X, _, lat = biglittle_data
    X = X[~np.isnan(lat)]
    boosted, train = [], xgb.train
    monkeypatch.setattr(xgb, "train", lambda *a, **k: boosted.append(1) or train(*a, **k))
    model = XGBCostModel(seed=0).fit(X[:200], X[:200, 0])
    np.testing.assert_array_equal(model.predict(X[200:]), X[200:, 0])
    assert not boosted
    model.save(tmp_path / "m.json")
    assert boosted == [1] and model.booster_.num_boosted_rounds() == 40
    np.testing.assert_array_equal(XGBCostModel.load(tmp_path / "m.json").predict(X[200:]),
                                  X[200:, 0])
    tilted = XGBCostModel(seed=0).fit(X[:200], X[:200, 0] + 0.1 * X[:200, 1])
    assert not np.array_equal(tilted.predict(X[200:]), X[200:, 0]) and boosted == [1, 1]
