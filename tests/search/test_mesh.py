"""The mesh pipeline search in the one tuning loop: the Python entry point and the plan
space's genomes (the pipeline moves are in the strategy contract suite,
tests/search/test_strategies.py; the stream measurer in the measurer contract suite,
tests/measure/test_contract.py)."""

from __future__ import annotations

import pytest

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import evaluate
from autoplace.pipeline.stream_measurer import StreamMeasurer
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.mesh import mesh_config, plan_space, tune_mesh


@pytest.fixture(scope="module")
def space():
    return plan_space(load_graph("squeezenet"), load_profile("mesh"))


def test_python_plans_and_tunes_a_mesh(space, tmp_path):
    """The docs' example: the DP's plans first, then the search; the best record's plan is
    the best streamed one of the log, and the log holds what the result says."""
    with TuningLog(tmp_path / "mesh.jsonl") as log:
        result = tune_mesh(space, log, mesh_config(trials=30, seed=0))
    records = read(tmp_path / "mesh.jsonl")
    assert [r.trial for r in records] == list(range(len(space.starts) + 30))
    assert list(result.records) == records and result.measured == len(records)
    assert sorted(result.baselines) == ["dp", "dp-2"][:len(space.starts)]
    plan = space.candidate_of(result.best.pipeline, result.best.placement)
    best = min(r.result.period_s for r in records if r.result.period_s is not None)
    assert result.best.result.period_s == best and evaluate(plan, space.costs).fits
    assert plan in {space.candidate_of(r.pipeline, r.placement) for r in records}


def test_a_plan_space_is_tuned_for_throughput_without_descent(space, tmp_path):
    with TuningLog(tmp_path / "x.jsonl") as log:
        with pytest.raises(ValueError, match="a plan space is tuned for throughput"):
            tune(space, StreamMeasurer(space.costs), log, TuneConfig(trials=5))
    assert not (tmp_path / "x.jsonl").exists() or not read(tmp_path / "x.jsonl")


def test_a_plans_genome_is_its_text_and_its_key(space):
    choice, mode = space.encode(list(space.starts))
    assert mode.shape == (len(space.starts), 0)
    texts = [space.format_genome(c, m) for c, m in zip(choice, mode)]
    assert [space.decode(*space.parse_genome(t)) for t in texts] == list(space.starts)
    assert space.keys(choice, mode) == [t.encode() for t in texts]
    assert space.log10_size > 4  # at least the ways to cut 41 ops and share 16 PEs
