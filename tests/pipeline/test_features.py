"""A plan's features (worked by hand on one stage), and the cost model they feed: boosted
on the stream's slowdown, it predicts unseen plans' streams better than the analytic
period."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from mesh_search import search
from scipy.stats import spearmanr
from test_plan_search import MS, rotating_pair

from autoplace.cost_model import XGBCostModel
from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage, StageCosts
from autoplace.pipeline.features import PLAN_FEATURES, plan_features
from autoplace.pipeline.stream_measurer import measure


def test_the_features_of_one_stage_worked_by_hand():
    """The pair on 4 PEs (test_search): compute 2 ms, communication 4.501 ms."""
    plan = PipelinePlan(stages=(Stage(0, 2, 4),))
    X, fits = plan_features([plan], rotating_pair())
    f = dict(zip(PLAN_FEATURES, X[0]))
    period, latency = 4.501 * MS, 6.501 * MS
    assert f["log_analytic"] == pytest.approx(math.log(period))
    assert f["log_latency_periods"] == pytest.approx(math.log(latency / period))
    assert (f["stages"], f["mean_stage_share"], f["second_stage_share"]) == (1, 1, 0)
    assert (f["stages_near_period"], f["stages_over_80"]) == (1, 1)
    assert f["mean_overlap_share"] == pytest.approx(2 / 4.501)
    assert f["mean_comm_ratio"] == pytest.approx(4.501 / 2)
    assert fits.tolist() == [True]


def test_the_learned_model_predicts_streams_better_than_the_analytic_period():
    """Plans an unranked search visits on inception_v1 over 8 x 8 PEs, every one streamed:
    trained on half, the model's error on the other half is under half the analytic
    period's, and it ranks them better."""
    mesh = dataclasses.replace(MeshMachine.of(load_profile("mesh")), rows=8, cols=8)
    costs = StageCosts(load_graph("inception_v1"), mesh)
    _, trials = search(costs, 500, ranking="none")
    plans = [t.plan for t in trials if t.status != "no-fit"]
    X, _ = plan_features(plans, costs)
    y = np.log([measure(p, costs)[1] for p in plans])
    assert len(plans) >= 100 and (y - X[:, 0]).mean() > 0.005  # streams are slower
    train, test = np.arange(0, len(y), 2), np.arange(1, len(y), 2)
    model = XGBCostModel(features=PLAN_FEATURES, target="throughput").fit(X[train], y[train])
    learned, analytic = model.predict(X[test]), X[test, 0]
    assert np.abs(learned - y[test]).mean() < 0.5 * np.abs(analytic - y[test]).mean()
    assert spearmanr(learned, y[test])[0] > spearmanr(analytic, y[test])[0]
