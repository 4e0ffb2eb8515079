"""The front of throughput and energy over a mesh's pipeline plans (``--objective
throughput,energy`` on a mesh; the strategy's contract is in tests/search/test_strategies.py,
the CLI in tests/cli/test_pipeline_commands.py)."""

from __future__ import annotations

import numpy as np
import pytest
from mesh_search import mesh_with_energy

from autoplace.hardware.load import load_profile
from autoplace.measure.objective import objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.pipeline import evaluate
from autoplace.pipeline.log import best_plan
from autoplace.pipeline.plan_space import plan_of
from autoplace.pipeline.stream_measurer import StreamMeasurer, plan_figures
from autoplace.records.front import KNEE, figures, front, knee, nondominated
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.mesh import mesh_config, plan_space, tune_mesh
from autoplace.search.pipeline_front import PipelineFront
from autoplace.space import SearchSpace

CRITERIA = objective_named("throughput,energy").criteria


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """The mesh with energy per byte moved and no idle power: splitting an op over more PEs
    is faster and moves more bytes (with idle power, a faster stream also costs less, and
    squeezenet's front is one or two plans)."""
    return load_profile(mesh_with_energy(tmp_path_factory.mktemp("mesh")))


@pytest.fixture(scope="module")
def space(profile):
    return plan_space(load_graph("squeezenet"), profile)


def job(space, path, objective: str, trials: int = 64) -> list:
    with TuningLog(path) as log:
        tune_mesh(space, log, mesh_config(trials=trials, seed=0, objective=objective))
    return read(path)


def test_the_front_job_streams_every_plan_and_finds_a_front(space, tmp_path):
    """A front job bounds no plan by the fastest (a slower one may cost less), every
    record's energy is its plan's at its streamed period, and the front has several plans,
    of which the fastest is faster than the DP's plans."""
    records = job(space, tmp_path / "front.jsonl", "throughput,energy")
    assert {r.pipeline["status"] for r in records} <= {"ok", "no-fit"}
    for r in records[:10]:
        if r.result.period_s is not None:
            period = r.result.period_s * r.pipeline["replicas"]
            assert plan_figures(plan_of(r.pipeline), space.costs, period) == \
                (r.result.period_s, r.result.energy_j)
    points = front(records, CRITERIA)
    assert len(points) >= 2 and {r.objective for r in records} == {"throughput,energy"}
    starts = [r.result.period_s for r in records[:len(space.starts)] if r.result.period_s]
    assert points[0].result.period_s < min(starts)


def test_turns_name_an_objectives_end_or_the_fronts_points(space):
    for turns in ((), (2,), (0, "front")):
        with pytest.raises(ValueError, match="turns: some of 0, 1"):
            PipelineFront(space, objective_named("throughput,energy"), turns=turns)


@pytest.mark.parametrize("objective", ["throughput,energy", "energy,throughput"])
def test_the_front_it_moves_from_is_the_logs(space, tmp_path, objective):
    """In either order of the objectives, the figures the search keeps of each plan it
    streamed are the record's (its period and energy, in the objective's order), and the
    front it moves from is the log's. (With energy first, it once took the energy for the
    period: the loop handed it the first objective's figure alone.)"""
    config = mesh_config(trials=24, seed=0, objective=objective)
    search = PipelineFront(space, config.goal, seed=0)
    with TuningLog(tmp_path / "f.jsonl") as log:
        tune_mesh(space, log, config, strategy=search)
    streamed = [r for r in read(tmp_path / "f.jsonl") if r.result.period_s is not None]
    fields = [c.field for c in config.goal.criteria]
    want = np.array([[getattr(r.result, f) for f in fields] for r in streamed])
    np.testing.assert_allclose(search.F, want, rtol=1e-11)
    points = front(streamed, config.goal.criteria)
    np.testing.assert_allclose(np.unique(search.F[nondominated(search.F)], axis=0),
                               np.unique([[getattr(r.result, f) for f in fields]
                                          for r in points], axis=0), rtol=1e-11)


def test_compile_picks_the_fronts_knee_from_the_log(space, profile, tmp_path):
    """``best_plan(how="knee")`` (``compile --pick knee``) builds the front's knee; by
    default the plan of the highest throughput."""
    records = job(space, tmp_path / "front.jsonl", "throughput,energy", trials=24)
    points = front(records, CRITERIA)
    want = points[knee(figures(points, CRITERIA))]
    plan, rec = best_plan(tmp_path / "front.jsonl", space.costs, profile.hash, how=KNEE)
    assert rec.trial == want.trial and plan == plan_of(want.pipeline)
    _, fastest = best_plan(tmp_path / "front.jsonl", space.costs, profile.hash)
    assert fastest.result.period_s == min(r.result.period_s for r in points)


def test_throughput_goes_beside_energy_alone_and_over_plans_only(space, tmp_path):
    assert [c.name for c in objective_named("energy,throughput").criteria] == \
        ["energy", "throughput"]
    for spec in ("throughput,peak_memory", "throughput,latency",
                 "throughput,energy,latency", "throughput,throughput"):
        with pytest.raises(ValueError, match="throughput .a stream's period. is searched "
                                             "alone, or beside energy"):
            objective_named(spec)
    placements = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    with TuningLog(tmp_path / "p.jsonl") as log, \
            pytest.raises(ValueError, match="over a mesh's pipeline plans"):
        tune(placements, Simulator(placements), log, TuneConfig(objective="throughput,energy"))
    with TuningLog(tmp_path / "m.jsonl") as log, \
            pytest.raises(ValueError, match="a plan space is tuned for throughput"):
        tune_mesh(space, log, mesh_config(objective="latency,energy"))
    assert not (tmp_path / "p.jsonl").exists() and not (tmp_path / "m.jsonl").exists()


def test_the_analytic_figures_rank_no_plan_above_what_it_streams(tmp_path):
    """What the front's moves rank by is a bound: the analytic period is no more than the
    streamed one, and the energy at it less than at the streamed period (idle power is
    paid over a longer period)."""
    space = plan_space(load_graph("squeezenet"),
                       load_profile(mesh_with_energy(tmp_path, idle=True)))
    plans = list(space.starts)
    for plan, result in zip(plans, StreamMeasurer(space.costs).measure(plans)):
        bound = plan_figures(plan, space.costs, evaluate(plan, space.costs).period_s)
        assert bound[0] <= result.period_s and bound[1] < result.energy_j


def test_the_fronts_fastest_end_walks_as_a_search_for_throughput_alone(tmp_path):
    """resnet50 over 8x8 PEs: after 256 trials the front's fastest plan streams at least 99%
    of the throughput a search for throughput alone reaches in a quarter of them. When every
    turn moved the fastest streamed plan, with one random stream, plans the other turns found
    pulled it into their basins: it stalled at 252.5 inferences/s where that search reaches
    263.3; each end now walks on its own (its own plans, its own random stream)."""
    text = mesh_with_energy(tmp_path).read_text().replace("rows = 4\ncols = 4\n",
                                                          "rows = 8\ncols = 8\n")
    (tmp_path / "mesh8x8.toml").write_text(text.replace('name = "mesh"', 'name = "mesh8x8"'))
    space = plan_space(load_graph("resnet50"), load_profile(tmp_path / "mesh8x8.toml"))
    fronted = job(space, tmp_path / "front.jsonl", "throughput,energy", trials=256)
    alone = job(space, tmp_path / "alone.jsonl", "throughput", trials=64)
    fastest = [max(1 / r.result.period_s for r in log if r.result.period_s)
               for log in (fronted, alone)]
    assert fastest[0] >= 0.99 * fastest[1], fastest
