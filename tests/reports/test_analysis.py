"""Analysis: the DataFrame of a known log, its views, and timeline tables vs the simulator."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from factories import chain_graph, contiguous_genomes, fork_graph, tiny_profile

from autoplace.frontend.tarnawski import convert, load_instance
from autoplace.hardware.load import load_profile
from autoplace.measure import ErrorKind, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import Record, RecordError, TuningLog, encode_line, load
from autoplace.reports import analysis
from autoplace.search import TuneConfig, greedy, tune
from autoplace.space import Placement, SearchSpace

GOLDEN = Path(__file__).parents[1] / "data" / "analysis_fork.jsonl"


def fork_setup():
    g, p = fork_graph(), tiny_profile(sram_mib=2500 / (1 << 20))  # sram holds 2500 bytes
    return g, p, SearchSpace(g, p)


def fork_records() -> list[Record]:
    """The golden log: baselines, search candidates, an OOM, a timeout, an invalid one."""
    g, p, space = fork_setup()
    sim = Simulator(space)
    sram = {"unit": "acc", "scope": "sram"}
    cands = [
        ("single:cpu", space.uniform("cpu")), ("single:acc", space.uniform("acc")),
        ("greedy", greedy(space)), ("tpe", space.from_user({"L": sram})),
        ("tpe", space.from_user({"ops": {"L": sram, "R": sram}, "copies": {
            "S->L": "async", "S->R": "sync", "L->J": "sync", "R->J": "async"}})),
        ("mutate", space.from_user({"S": "acc", "L": "acc", "R": sram, "J": "acc"})),
        ("tpe", space.uniform("cpu")),
        ("tpe", Placement(ops={o.name: ("gpu", "dram") for o in g.ops}, copies={})),
    ]
    results = [sim.simulate(pl) for _, pl in cands]
    results[6] = MeasureResult.failure(ErrorKind.TIMEOUT, "no answer in 10 s")
    return [
        Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name, profile_hash=p.hash,
               strategy=s, trial=i, seed=3, measurer="simulator", placement=pl, result=r,
               time=f"2026-01-01T00:00:0{i}+00:00",
               versions={"autoplace": "0.1.0", "tvm": "0.27.0"})
        for i, ((s, pl), r) in enumerate(zip(cands, results))
    ]


def test_golden_log_is_what_the_simulator_gives():
    # regenerate on purpose: write fork_records() to GOLDEN with a TuningLog
    lines = GOLDEN.read_text().splitlines()
    assert [encode_line(r.to_dict()) for r in fork_records()] == lines


@pytest.fixture(scope="module")
def df():
    return load(GOLDEN)


def test_frame_has_one_row_per_candidate_and_flat_columns(df):
    assert df.shape == (8, 25)
    assert list(df.columns[:16]) == [
        "log", "seq", "run", "graph", "graph_fp", "profile", "profile_hash", "strategy",
        "trial", "seed", "measurer", "error", "ok", "latency_s", "energy_j", "period_s"]
    # one unit does every op: its work per inference; the sram at 2,000 of its 2,500 bytes
    # cannot hold a second inference's buffers, so those streams have no period
    assert df["period_s"].tolist()[:3] == pytest.approx([10e-3, 1.004e-3, 1.004e-3])
    assert df["period_s"][[3, 5]].isna().all() and (df["peak_bytes.sram"][[3, 5]] == 2000).all()
    assert sorted(c for c in df.columns if "." in c) == [
        "busy_s.acc", "busy_s.cpu", "copy_bytes.async", "copy_bytes.sync", "peak_bytes.dram",
        "peak_bytes.sram"]
    for col in ("graph", "profile", "strategy", "measurer", "error", "log"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert list(df["error"].cat.categories) == [e.value for e in ErrorKind]
    assert str(df["peak_bytes.sram"].dtype) == "Int64"


def test_frame_values_match_the_hand_worked_fork(df):
    # all on cpu: 1 + 4 + 4 + 1 ms; all on acc: 1 us launch + flops / 10 GFLOP/s each
    assert df["latency_s"].tolist()[:3] == pytest.approx([10e-3, 1.004e-3, 1.004e-3])
    assert df["energy_j"][1] == pytest.approx(1.004e-3 * 2.0)
    assert df["busy_s.cpu"][0] == pytest.approx(10e-3)
    assert df["busy_s.acc"][0] == 0.0
    # S's graph input and J's result all run, plus three live outputs while R runs
    assert df["peak_bytes.dram"][0] == 1000 + 1000 + 3000
    assert df["peak_bytes.sram"][0] == 0  # measured: nothing lived there
    assert df["copy_bytes.async"][3] == 2000 and df["copy_bytes.sync"][4] == 2000
    assert [None if pd.isna(e) else e for e in df["error"]][4:] == [
        "out_of_memory", None, "timeout", "invalid"]
    assert df["peak_bytes.sram"][4] == 3000  # OOM keeps its metrics
    assert df["ok"].tolist() == [True] * 4 + [False, True, False, False]
    assert pd.isna(df["peak_bytes.dram"][6]) and pd.isna(df["latency_s"][6])
    assert df["placement"][3] == fork_records()[3].placement.to_json()
    assert df["time"][2] == pd.Timestamp("2026-01-01T00:00:02Z")


def test_a_failure_has_no_latency_to_rank_by(tmp_path):
    """An OOM record holds the simulated latency of a placement that does not fit; in the
    frame it is NaN, so a plain idxmin() picks a placement that ran (issue 31)."""
    records = fork_records()
    oom = records[4]
    assert oom.result.error is ErrorKind.OUT_OF_MEMORY
    fastest = dataclasses.replace(oom.result, latency_s=1e-9)  # below every feasible one
    records[4] = dataclasses.replace(oom, result=fastest)
    with TuningLog(tmp_path / "t.jsonl") as log:
        for r in records:
            log.append(r)
    df = load(tmp_path / "t.jsonl")
    assert pd.isna(df["latency_s"][4])
    assert df["latency_s"].idxmin() == 1 and df["ok"][1]


def test_a_directory_or_a_glob_loads_its_logs_but_not_their_side_files(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        shutil.copy(GOLDEN, tmp_path / name)
    (tmp_path / "a.model.jsonl").write_text('{"not": "a record"}\n')
    for given in (tmp_path, str(tmp_path / "*.jsonl")):
        df = load(given)
        assert list(df["log"].cat.categories) == [str(tmp_path / "a.jsonl"),
                                                  str(tmp_path / "b.jsonl")]
        assert len(df) == 16
    with pytest.raises(ValueError, match="no tuning logs"):
        load(str(tmp_path / "none-*.jsonl"))


def test_fast_and_standard_readers_give_the_same_frame():
    pd.testing.assert_frame_equal(load(GOLDEN), load(GOLDEN, fast=False))


def test_several_logs_are_one_frame(tmp_path, df):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    shutil.copy(GOLDEN, a)
    shutil.copy(GOLDEN, b)
    both = load(b, a)
    assert len(both) == 16
    assert both["log"].cat.categories.tolist() == [str(b), str(a)]  # in the order given
    assert analysis.convergence(both)["log"].tolist() == [str(b)] * 8 + [str(a)] * 8
    assert both["seq"].tolist() == list(range(8)) * 2


@pytest.mark.parametrize("fast", [True, False])
def test_torn_last_line_and_corrupt_lines(tmp_path, fast):
    path = tmp_path / "log.jsonl"
    text = GOLDEN.read_text()
    path.write_text(text + '{"schema": 1, "gra')
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(load(path, fast=fast)) == 8
    lines = text.splitlines()
    lines[2] = lines[2].replace('"error":null', '"error":"melted"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=r"log\.jsonl:3: corrupt record: .*melted"):
        load(path, fast=fast)
    path.write_text(text.replace('"schema":2', '"schema":3', 1))
    with pytest.raises(RecordError, match=r"log\.jsonl:1: corrupt record: schema version 3"):
        load(path, fast=fast)


def test_placements_view_has_one_row_per_candidate_and_op(df):
    g = fork_graph()
    view = analysis.placements(df, g)
    assert len(view) == 8 * 4
    row4 = view[view["candidate"] == 4].set_index("op")
    assert row4.index.tolist() == ["S", "L", "R", "J"]  # graph order
    assert row4.loc["J", "copy_in"] == "mixed" and row4.loc["J", "n_copies_in"] == 2
    assert row4.loc["R", "copy_in"] == "sync" and row4.loc["L", "copy_in"] == "async"
    assert (row4.loc["L", "unit"], row4.loc["L", "scope"]) == ("acc", "sram")
    assert row4.loc["S", "copy_in"] == "none" and row4.loc["S", "kind"] == "elementwise"
    assert view["strategy"].iloc[0] == "single:cpu"
    assert analysis.placements(df.iloc[[3]])["op"].tolist() == ["J", "L", "R", "S"]


def test_convergence_is_the_running_best(df):
    c = analysis.convergence(df)
    assert c["n"].tolist() == list(range(1, 9))
    assert c["best_s"].tolist()[:3] == pytest.approx([10e-3, 1.004e-3, 1.004e-3])
    assert c["best_s"].iloc[-1] == pytest.approx(df["latency_s"][df["ok"]].min())
    s = analysis.convergence(df, search_only=True)
    assert s["n"].tolist() == [1, 2, 3, 4, 5]
    assert s["best_s"].iloc[0] == pytest.approx(6e-3)  # the first tpe candidate
    assert np.isnan(s["latency_s"].iloc[1])  # the OOM one counts but is not feasible


def test_summary_compares_the_best_with_each_baseline(df):
    s = analysis.summary(df)
    assert s["role"].tolist() == ["best", "baseline", "baseline", "baseline"]
    assert s["strategy"].tolist()[1:] == ["single:cpu", "single:acc", "greedy"]
    assert s["vs_best"].iloc[1] == pytest.approx(df["latency_s"][0] / s["latency_ms"][0] * 1e3)
    assert s["vs_best"].iloc[0] == 1.0
    t = analysis.strategy_table(df)
    assert t.loc["tpe", "measured"] == 4 and t.loc["tpe", "feasible"] == 1
    assert t.loc["tpe", "best_ms"] == pytest.approx(6.0)


def test_study_joins_the_log_on_trial_number(tmp_path):
    g, p = load_graph("seed_te"), load_profile("soc")
    space = SearchSpace(g, p)
    log_path, storage = tmp_path / "log.jsonl", f"sqlite:///{tmp_path / 'tune.db'}"
    with TuningLog(log_path) as log:
        tune(space, Simulator(space), log,
             TuneConfig(trials=6, seed=0, batch_size=3, storage=storage))
    df = load(log_path)
    joined = analysis.join_study(df, analysis.study_trials(storage))
    assert len(joined) == len(df)
    assert (joined["study.user_attrs_strategy"] == joined["strategy"].astype(str)).all()
    feasible = joined[joined["ok"]]
    assert (feasible["study.value_latency_s"] == feasible["latency_s"]).all()  # its named value
    with pytest.raises(ValueError, match="name the study"):
        optuna.create_study(study_name="other", storage=storage)
        analysis.study_trials(storage)


# -- timelines ------------------------------------------------------------------------------
def chain_timeline():
    g, p = chain_graph(), tiny_profile()
    space = SearchSpace(g, p)
    pl = space.from_user({"Y": {"unit": "acc", "scope": "sram"}})
    return g, Simulator(space, timeline=True).simulate(pl)


def test_critical_path_of_the_worked_example():
    g, res = chain_timeline()
    path = analysis.critical_path(g, res.timeline)
    assert [(e.kind, e.name) for e in path] == [
        ("op", "X"), ("copy", "X->Y"), ("op", "Y"), ("copy", "Y->Z"), ("op", "Z")]
    assert path[-1].end == pytest.approx(2.205e-3)


def test_critical_path_follows_the_busy_unit_when_it_binds():
    # L and R both on cpu: R waits for the cpu (not for its input), so the path goes via L
    g, p = fork_graph(), tiny_profile()
    res = Simulator(SearchSpace(g, p), timeline=True).simulate(SearchSpace(g, p).uniform("cpu"))
    assert [e.name for e in analysis.critical_path(g, res.timeline)] == ["S", "L", "R", "J"]


def block_instance():
    """n5 (3 ms on the CPU) -> n7 (0.5 ms on an FPGA) -> n2 (1 ms, CPU only), the edges
    costing 0.375 and 0.125 ms: the FPGA's block reads n5's output and writes n7's."""
    node = {"cpuLatency": 3.0, "fpgaLatency": 0.5, "supportedOnFpga": 1, "size": 1.0}
    data = {"maxSizePerFPGA": 100.0, "maxFPGAs": 1, "maxCPUs": 1,
            "nodes": [dict(node, id=5), dict(node, id=7),
                      dict(node, id=2, cpuLatency=1.0, supportedOnFpga=0)],
            "edges": [{"sourceId": 5, "destId": 7, "cost": 0.375},
                      {"sourceId": 7, "destId": 2, "cost": 0.125}]}
    return convert(data, name="tiny", source="tiny.json")


def test_critical_path_of_a_block_goes_through_its_reads_and_writes():
    g, p = block_instance()
    space = SearchSpace(g, p)
    pl = space.from_user({"n7": {"unit": "fpga0", "scope": "mem0", "weights": "resident"}})
    res = Simulator(space, timeline=True).simulate(pl)
    path = analysis.critical_path(g, res.timeline)
    assert [e.name for e in path] == ["n5", "fpga0 inputs", "n7", "fpga0 outputs", "n2"]
    assert path[-1].end == pytest.approx((3.0 + 0.375 + 0.5 + 0.125 + 1.0) * 1e-3)


def test_critical_path_of_block_model_runs_is_a_chain_from_zero_to_the_latency():
    # layers-gnmt has ops that take no time inside blocks, once a cause of an endless walk
    g, p = load_instance("layers-gnmt")
    space = SearchSpace(g, p)
    sim = Simulator(space, timeline=True)
    choice, mode = contiguous_genomes(space, 12, np.random.default_rng(0))
    checked = 0
    for c, m in zip(choice, mode):
        res = sim.simulate(space.decode(c, m))
        if not res.ok:
            continue
        path = analysis.critical_path(g, res.timeline)
        assert path[0].start == 0.0 and path[-1].end == pytest.approx(res.latency_s, rel=1e-12)
        assert all(a.end == pytest.approx(b.start, abs=1e-12) for a, b in zip(path, path[1:]))
        assert any(e.kind == "copy" and e.name.endswith(" inputs") for e in path)
        checked += 1
    assert checked >= 8


def test_occupancy_peaks_are_the_simulator_peaks():
    g, p = load_graph("squeezenet"), load_profile("soc")
    space = SearchSpace(g, p)
    sim = Simulator(space, timeline=True)
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(12):
        pl = space.decode(*(x[0] for x in space.random_genomes(1, rng)))
        res = sim.simulate(pl)
        if res.error not in (None, ErrorKind.OUT_OF_MEMORY):
            continue
        occ = analysis.occupancy(g, res.timeline, sim.held(pl))
        peaks = occ.groupby("scope")["live_bytes"].max()
        assert {s: int(v) for s, v in peaks.items() if v} == dict(res.peak_bytes)
        assert (occ.groupby("scope")["live_bytes"].last() == 0).all()  # all freed at the end
        checked += 1
    assert checked >= 6


def test_utilisation_bins_add_up_to_busy_time():
    g, res = chain_timeline()
    u = analysis.utilisation(res.timeline, bins=10, units=["cpu", "acc"])
    assert u.index.tolist() == ["cpu", "acc", "dma0"]
    width = res.latency_s / 10
    assert (u.to_numpy() * width).sum(axis=1) == pytest.approx(
        [2e-3, 0.201e-3, 4e-6])
    assert u.to_numpy().max() <= 1.0 + 1e-9


def test_an_empty_log_is_an_empty_frame(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    df = load(path)
    assert len(df) == 0 and {"log", "latency_s", "ok", "placement"} <= set(df.columns)
    assert analysis.summary(df).empty and analysis.convergence(df).empty


def test_a_pipeline_log_as_a_frame(tmp_path):
    """One row per trial of ``autoplace pipeline --log``; the best row is the plan
    ``compile --log`` builds."""
    from mesh_search import search

    from autoplace.pipeline import MeshMachine, StageCosts
    from autoplace.pipeline.log import best_plan

    profile = load_profile("mesh")
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))
    search(costs, 30, pes=16, log=tmp_path / "pipe.jsonl")
    df = analysis.load_pipeline(tmp_path / "pipe.jsonl")
    assert len(df) == 30 and df["trial"].tolist() == list(range(30))
    assert df["move"].iloc[0] == "dp" and set(df["status"]) <= {"ok", "no-fit", "bounded"}
    assert df["throughput"].isna().tolist() == (df["status"] != "ok").tolist()
    assert (df["pes_used"] <= 16).all() and (df["pes_used"] == df["pes"] * df["replicas"]).all()
    plan, record = best_plan(tmp_path / "pipe.jsonl", costs, profile.hash)
    top = df.loc[df["throughput"].idxmax()]
    assert top["trial"] == record.trial and top["stages"] == len(plan.stages)
    with pytest.raises(ValueError, match="at least one"):
        analysis.load_pipeline()
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty.jsonl: no pipeline trial"):
        analysis.load_pipeline(tmp_path / "empty.jsonl")


def test_a_journal_study_reads_by_its_path_as_optuna_dashboard_opens_it(tmp_path):
    """``journal:PATH`` and the bare path give one study; Optuna's own journal backend
    (what ``optuna-dashboard PATH`` opens) reads the same trials."""
    g, p = load_graph("seed_te"), load_profile("soc")
    space = SearchSpace(g, p)
    journal = tmp_path / "study.journal"
    with TuningLog(tmp_path / "log.jsonl") as log:
        tune(space, Simulator(space), log,
             TuneConfig(trials=6, seed=0, batch_size=3, storage=f"journal:{journal}"))
    by_scheme = analysis.study_trials(f"journal:{journal}")
    by_path = analysis.study_trials(str(journal))
    assert len(by_scheme) >= 6 and by_scheme.equals(by_path)
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    plain = JournalStorage(JournalFileBackend(str(journal)))
    name = optuna.get_all_study_names(plain)[0]
    values = [t.values for t in optuna.load_study(study_name=name, storage=plain).trials]
    assert values == [None if v != v else [v] for v in by_scheme["value_latency_s"]]


def test_the_hypervolume_grows_to_that_of_the_final_front(tmp_path):
    """After each candidate, the hypervolume of the front so far: 0 before the first valid
    one, never falling, and at the end that of the records' front (records.front) to the
    same reference point."""
    import subprocess
    import sys

    from autoplace.measure.objective import ENERGY, LATENCY
    from autoplace.records.front import figures, front, hypervolume
    from autoplace.records.tuning_log import read

    log = tmp_path / "bl.jsonl"
    subprocess.run([sys.executable, "-m", "autoplace", "tune", "squeezenet", "--hw",
                    "biglittle", "--trials", "40", "--log", str(log), "--no-progress"],
                   check=True, capture_output=True)
    df = analysis.load(log)
    history = analysis.hypervolume_history(df)
    assert history["n"].tolist() == list(range(1, len(df) + 1))
    assert (np.diff(history["hypervolume"]) >= 0).all() and history["hypervolume"].iloc[-1] > 0
    records = read(log)
    ref = figures([r for r in records if r.result.ok], (LATENCY, ENERGY)).max(axis=0)
    final = hypervolume(figures(front(records, (LATENCY, ENERGY)), (LATENCY, ENERGY)), ref)
    assert history["hypervolume"].iloc[-1] == pytest.approx(final, rel=1e-12)
