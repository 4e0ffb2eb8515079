"""The mesh pipeline search in the one tuning loop: the Python entry point, the plan space's
genomes, the pipeline moves under the strategy contract (the stream measurer is in the
measurer contract suite, tests/measure/test_contract.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import PipelinePlan, evaluate
from autoplace.pipeline.stream_measurer import StreamMeasurer
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.checkpoint import CheckpointWriter, read_checkpoint
from autoplace.search.mesh import mesh_config, plan_space, tune_mesh
from autoplace.search.pipeline_moves import PipelineMoves


@pytest.fixture(scope="module")
def space():
    return plan_space(load_graph("squeezenet"), load_profile("mesh"))


def periods(space, proposal) -> np.ndarray:
    results = StreamMeasurer(space.costs).measure(space.decode_rows(proposal.choice,
                                                                    proposal.mode))
    return np.array([r.period_s if r.period_s is not None else np.nan for r in results])


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


def test_the_moves_propose_new_plans_of_the_space_and_take_them_back(space):
    """The strategy contract: proposals are plans over the space's PEs, never one proposed
    or observed before; observing without a prediction (a replay) is fine."""
    s = PipelineMoves(space, seed=4)
    choice, mode = space.encode(list(space.starts))
    from autoplace.search.strategy import Proposal

    starts = Proposal(choice=choice, mode=mode, labels=("dp",) * len(choice))
    s.observe(starts, periods(space, starts))
    seen = set(space.starts)
    for _ in range(4):
        proposal = s.propose(3)
        plans = space.decode_rows(proposal.choice, proposal.mode)
        assert 0 < len(plans) <= 3 and all(isinstance(p, PipelinePlan) for p in plans)
        assert all(p.pes * p.replicas <= space.pes for p in plans)
        assert not set(plans) & seen and set(proposal.labels) <= set(s.moves)
        seen.update(plans)
        s.observe(proposal.take(range(len(proposal) - 1)), periods(space, proposal)[:-1])


def test_a_restored_state_proposes_what_the_moves_proposed(space, tmp_path):
    s = PipelineMoves(space, seed=4)
    choice, mode = space.encode(list(space.starts))
    from autoplace.search.strategy import Proposal

    shown = [Proposal(choice=choice, mode=mode, labels=("dp",) * len(choice))]
    s.observe(shown[0], periods(space, shown[0]))
    path = tmp_path / "t.state.jsonl"
    writer = CheckpointWriter(path, run="r", sampler="moves", seed=4, batch_size=1,
                              objective="throughput")
    for _ in range(12):
        writer.write(len(shown), s.state())
        proposal = s.propose(1)
        s.observe(proposal, periods(space, proposal))
        shown.append(proposal)
    writer.write(len(shown), s.state())
    json.dumps(s.state())
    nxt = s.propose(2)
    fresh = PipelineMoves(space, seed=99)
    for proposal in shown:
        fresh.observe(proposal, periods(space, proposal))
    fresh.restore(read_checkpoint(path, run="r").strategy)
    again = fresh.propose(2)
    assert again.labels == nxt.labels and list(again.choice) == list(nxt.choice)
