"""Features of pipeline plans, for the cost model that ranks the search's candidates.

A plan's stream runs slower than its analytic period when its stages are tightly balanced
(docs/pipeline.md, "The stage model"): with two inferences in flight per stage, a stage
waits for its neighbours. Column 0, ``log_analytic``, is the log of the analytic period of
one copy (the base of :class:`~autoplace.cost_model.XGBCostModel`: before it is trained, a
model ranks plans as the stage model does); the others describe the balance the stream is
sensitive to, as shares of the period. A plan's target is the log of its streamed period, so
the trees learn the stream's slowdown over the analytic period (docs/pipeline.md, "Search").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan

#: feature names, in column order
PLAN_FEATURES = (
    "log_analytic",  # log of the analytic period of one copy (the base)
    "log_latency_periods",  # log of one inference's latency over the period: the depth
    "stages",
    "mean_stage_share",  # a stage's period over the plan's, on average
    "second_stage_share",  # the second slowest stage's share
    "stages_near_period",  # stages within 5% of the period
    "stages_over_80",  # stages over 80% of it
    "mean_overlap_share",  # min(compute, communication) of a stage over the period
    "max_overlap_share",
    "mean_comm_ratio",  # communication over compute, on average
)


def plan_features(plans: Sequence[PipelinePlan],
                  costs: StageCosts) -> tuple[np.ndarray, np.ndarray]:
    """``(X, fits)``: each plan's features (``len(plans) x len(PLAN_FEATURES)``) and
    whether it fits its PEs' memory."""
    X = np.zeros((len(plans), len(PLAN_FEATURES)))
    fits = np.zeros(len(plans), dtype=bool)
    for n, plan in enumerate(plans):
        X[n], fits[n] = _features(plan, costs)
    return X, fits


def _features(plan: PipelinePlan, costs: StageCosts) -> tuple[list[float], bool]:
    figures = costs.plan_stages(plan)
    period = np.array([f["period"] for f in figures])
    compute = np.array([f["compute"] for f in figures])
    comm = np.array([f["comm"] for f in figures])
    P = max(float(period.max()), costs.shared_seconds(plan), 1e-15)
    share = period / P
    overlap = np.minimum(compute, comm) / P
    latency = float(sum(f["latency"] for f in figures))
    second = float(np.sort(share)[-2]) if len(share) > 1 else 0.0
    return [np.log(P), np.log(max(latency / P, 1e-12)), len(share), float(share.mean()),
            second, float((share > 0.95).sum()), float((share > 0.8).sum()),
            float(overlap.mean()), float(overlap.max()),
            float((comm / np.maximum(compute, 1e-15)).mean())], \
        all(f["fits"] for f in figures)
