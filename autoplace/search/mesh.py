"""Plan and tune a pipeline over a mesh from Python (docs/pipeline.md).

>>> space = plan_space(load_graph("squeezenet"), load_profile("mesh"), pes=64)
>>> result = tune_mesh(space, TuningLog("mesh.jsonl"), mesh_config(trials=100, seed=0))
>>> plan = space.candidate_of(result.best.pipeline, result.best.placement)

The dynamic program's plans are the baselines; :class:`~autoplace.search.pipeline_moves.
PipelineMoves` proposes the search's plans and :class:`~autoplace.pipeline.stream_measurer.
StreamMeasurer` measures them, in the one tuning loop (:func:`autoplace.search.job.tune`):
its log, study, workers, resume and Ctrl-C are the placement search's.
"""

from __future__ import annotations

from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.pipeline import MeshMachine, StageCosts, best_pipelines
from autoplace.pipeline.machine import MAX_SPLIT
from autoplace.pipeline.plan import PipelinePlan
from autoplace.pipeline.plan_space import PlanSpace
from autoplace.pipeline.stream_measurer import StreamMeasurer
from autoplace.records.tuning_log import TuningLog
from autoplace.search.config import TuneConfig, TuneResult
from autoplace.search.job import tune
from autoplace.search.strategy import SearchStrategy


def plan_space(graph: OpGraph, profile: Profile, *, pes: int | None = None,
               max_split: int | None = None,
               starts: list[PipelinePlan] | None = None) -> PlanSpace:
    """The plans of ``graph`` over ``pes`` PEs (default: all) of ``profile``'s mesh, ops
    split ``max_split`` ways at most (default 64), searched from ``starts`` (default: the
    dynamic program's plans). ValueError if the profile has no mesh, ``pes`` is more than it
    has, or no plan fits."""
    costs, pes = mesh_costs(graph, profile, pes=pes, max_split=max_split)
    starts = best_pipelines(costs, pes) if starts is None else starts
    if not starts:
        raise ValueError(f"{graph.name} does not fit {pes} PEs of {profile.name}")
    return PlanSpace(costs, profile, pes, starts)


def mesh_costs(graph: OpGraph, profile: Profile, *, pes: int | None = None,
               max_split: int | None = None) -> tuple[StageCosts, int]:
    """(the stage model of ``graph`` on ``profile``'s mesh, the PEs to use: ``pes`` or all);
    ValueError if the profile has no mesh or ``pes`` is more than it has."""
    machine = MeshMachine.of(profile, max_split=max_split or MAX_SPLIT)
    pes = pes or machine.size
    if pes > machine.size:
        raise ValueError(f"--pes {pes}: the mesh of {profile.name} has {machine.size} PEs")
    return StageCosts(graph, machine), pes


def mesh_config(**settings) -> TuneConfig:
    """A job's settings for a plan space: the throughput objective, one plan measured per
    round, no descent; ``settings``: the others (trials, seed, storage, worker, resume,
    cost_model: ``xgb``, ``analytic`` or ``none``...)."""
    return TuneConfig(**{"objective": "throughput", "batch_size": 1, "descent": 0.0,
                         **settings})


def tune_mesh(space: PlanSpace, log: TuningLog, config: TuneConfig | None = None, *,
              strategy: SearchStrategy | None = None) -> TuneResult:
    """Measure the start plans of ``space``, then search it for ``config.trials`` more
    (:func:`mesh_config`'s defaults when None; ``config.limits``: bounds on a plan's
    latency and energy per inference that its best keeps), every plan in ``log``;
    ``strategy``: the proposer (default: the pipeline moves, seeded with ``config.seed``)."""
    config = config or mesh_config()
    measurer = StreamMeasurer(space.costs, limits=config.limits)
    return tune(space, measurer, log, config, strategy=strategy)
