"""``autoplace pipeline``: the DP's plan printed as a user reads it; one-line errors."""

from __future__ import annotations

import re

from test_cli import assert_one_line_error, cli

from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline, evaluate
from autoplace.pipeline.baselines import equal_flops
from autoplace.pipeline.manifest import read_manifest
from autoplace.profile_io import load_profile


def test_the_plan_printed_is_the_dynamic_programs(tmp_path):
    p = cli("pipeline", "squeezenet", "--hw", "mesh", "--manifest", tmp_path / "plan.json",
            "--plot", tmp_path / "pics")
    assert p.returncode == 0, p.stderr
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(load_profile("mesh")))
    plan = best_pipeline(costs)
    f = evaluate(plan, costs)
    assert (f"best: {f.throughput:,.1f} inferences/s: {plan.replicas} copies of a pipeline of "
            f"{len(plan.stages)} stages on {plan.pes} PEs") in p.stdout
    stages = re.findall(r"ops +(\d+)-(\d+) .*: (\d+) PEs", p.stdout)
    assert [(int(a), int(b) + 1, int(k)) for a, b, k in stages] == \
        [(s.start, s.end, s.pes) for s in plan.stages]
    naive = evaluate(equal_flops(costs), costs).throughput
    assert f"equal-FLOP stages: {naive:,.1f} inferences/s" in p.stdout
    assert naive < f.throughput
    assert read_manifest(tmp_path / "plan.json", costs) == plan
    assert all((tmp_path / "pics" / f"{name}.png").stat().st_size > 10_000
               for name in ("grid", "period"))


def test_what_does_not_fit_is_one_line():
    assert_one_line_error(cli("pipeline", "resnet50", "--hw", "mesh"),
                          "resnet50 does not fit 16 PEs of mesh", "need at least")
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "soc"), "has no [mesh]")
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "mesh", "--pes", 17),
                          "--pes 17", "has 16 PEs")
