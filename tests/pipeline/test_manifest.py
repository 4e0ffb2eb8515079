"""The manifest a custom runtime loads: what it says, and that it reads back to its plan."""

from __future__ import annotations

import json

import pytest

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline, evaluate
from autoplace.pipeline.layout import layout
from autoplace.pipeline.manifest import ManifestError, read_manifest, write_manifest


@pytest.fixture(scope="module")
def planned():
    profile = load_profile("mesh")
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))
    return costs, best_pipeline(costs), profile.hash


def test_a_manifest_reads_back_to_its_plan(tmp_path, planned):
    costs, plan, hash_ = planned
    write_manifest(tmp_path / "plan.json", plan, costs, profile_hash=hash_)
    assert read_manifest(tmp_path / "plan.json", costs) == plan


def test_the_manifest_says_what_a_runtime_needs(tmp_path, planned):
    costs, plan, hash_ = planned
    write_manifest(tmp_path / "plan.json", plan, costs, profile_hash=hash_)
    d = json.loads((tmp_path / "plan.json").read_text())
    assert (d["format"], d["version"]) == ("autoplace-pipeline", 1)
    assert d["mesh"]["profile_hash"] == hash_ and d["graph"]["ops"] == 41
    ops = [op["name"] for stage in d["stages"] for op in stage["ops"]]
    assert ops == [op.name for op in costs.graph.ops]  # every op once, in stage order
    assert {op["unit"] for stage in d["stages"] for op in stage["ops"]} <= {"arm", "npu"}
    assert [s["pes"] for s in d["stages"]] == [s.pes for s in plan.stages]
    assert d["replicas"] == [[[list(pe) for pe in st] for st in rep]
                             for rep in layout(plan, 4, 4)]
    figures = evaluate(plan, costs)
    assert d["figures"]["period_s"] == figures.period_s
    assert all(s["buffers"]["bytes_per_pe"] <= costs.machine.memory_bytes
               for s in d["stages"])
    later = d["stages"][1]
    assert later["copies"][0] == {"kind": "from_previous_stage", "path": "link",
                                  "mode": "async", "bytes": float(costs.cut[plan.stages[1].start])}


def test_a_manifest_of_another_graph_or_version_is_refused(tmp_path, planned):
    costs, plan, _ = planned
    path = tmp_path / "plan.json"
    write_manifest(path, plan, costs)
    other = StageCosts(load_graph("inception_v1"), costs.machine)
    with pytest.raises(ManifestError, match="another graph"):
        read_manifest(path, other)
    d = json.loads(path.read_text())
    path.write_text(json.dumps({**d, "version": 99}))
    with pytest.raises(ManifestError, match="manifest version 99"):
        read_manifest(path, costs)
    path.write_text("{")
    with pytest.raises(ManifestError, match="cannot read manifest"):
        read_manifest(path, costs)
    for bad, message in (({**d, "graph": "squeezenet"}, "another graph"),
                         ({**d, "stages": [{"index": 0, "ops": [], "pes": 1}]},
                          "malformed stages"),
                         ({**d, "stages": [{"ops": [{"name": "nope"}], "pes": 1}]},
                          "malformed stages")):
        path.write_text(json.dumps(bad))
        with pytest.raises(ManifestError, match=message):
            read_manifest(path, costs)
