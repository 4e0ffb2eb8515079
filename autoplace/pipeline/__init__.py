"""Pipelined placement on a mesh of processing elements (docs/pipeline.md): stages of
contiguous ops over groups of PEs, big ops split across a stage's PEs, whole pipelines
replicated to fill the mesh; the stage model, its exact dynamic program, baselines and the
layout on the grid."""

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.dp import (
    best_pipeline,
    best_pipelines,
    fewest_pes,
    least_period,
    throughput_bound,
)
from autoplace.pipeline.machine import MeshMachine
from autoplace.pipeline.plan import PipelinePlan, PlanFigures, Stage, evaluate

__all__ = ["MeshMachine", "PipelinePlan", "PlanFigures", "Stage", "StageCosts", "best_pipeline",
           "best_pipelines",
           "evaluate", "fewest_pes", "least_period", "throughput_bound"]
