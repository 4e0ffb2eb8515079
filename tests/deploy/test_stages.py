"""A pipeline's stages as TVM libraries, run by the host pipeline runner (real compiles, real
Relax VM runs, a thread per stage): outputs equal the unplaced model's, in order."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tvm
from references import Reference

from autoplace.deploy import BuildError, compile_unplaced, random_inputs
from autoplace.deploy.artefact import ArtefactError
from autoplace.deploy.runner import PipelineRunner, carried, load_stage_libraries, stage_meta
from autoplace.deploy.shard import SPLIT_KINDS, shard_ways
from autoplace.deploy.stages import OUTPUT, export_stages, slice_stages


def singles_then_rest(n_ops: int, singles: int, parts: int) -> list[tuple[int, int]]:
    """The first ``singles`` ops a stage each (cuts through branches), the rest in ``parts``."""
    bounds = [(i, i + 1) for i in range(singles)]
    edges = np.linspace(singles, n_ops, parts + 1).astype(int)
    return bounds + [(int(a), int(b)) for a, b in zip(edges, edges[1:]) if b > a]


def asked_splits(graph) -> dict[str, int]:
    """Every conv2d and matmul op split 2, 3 or 4 ways (3 rarely divides the channels)."""
    ops = [op for op in graph.ops if op.kind in SPLIT_KINDS]
    return {op.name: 2 + i % 3 for i, op in enumerate(ops)}


#: conv2d/matmul ops each model has, and how many of them split inside their stage (alexnet:
#: its two matmuls giving a (dropout) tuple run whole; its grouped convs fall to 2 ways, as
#: many as their groups, which test_shard.py shows are right where 4 are not)
SPLITS = {"squeezenet": (26, 26), "alexnet": (8, 6), "shufflenet": (50, 50)}


@pytest.fixture(scope="module", params=["squeezenet", "alexnet", "shufflenet"])
def piped(request, tmp_path_factory):
    """A bundled model with random weights, cut into stages, its conv2d and matmul ops split
    inside their stages, compiled, in a runner."""
    ref = Reference(request.param, tmp_path_factory.mktemp(request.param))
    names = [op.name for op in ref.graph.ops]
    bounds = singles_then_rest(len(names), 4, 2)
    stages = slice_stages(ref.mod, names, bounds, asked_splits(ref.graph))
    return ref, bounds, stages, PipelineRunner([s.compile() for s in stages])


def stream(ref: Reference, runner: PipelineRunner, n: int) -> list[dict]:
    return [dict(zip(runner.inputs, random_inputs({"inputs": runner.input_specs()}, seed)))
            for seed in range(n)]


def test_pipelined_outputs_equal_the_unplaced_models_in_order(piped):
    ref, _, _, runner = piped
    feeds = stream(ref, runner, 3)
    run = runner.run(feeds)
    assert len(run.outputs) == 3 and run.throughput > 0
    for feed, got in zip(feeds, run.outputs):
        want = ref.run([feed[name] for name in runner.inputs])
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=ref.rtol, atol=1e-6)
    # distinct inputs give distinct outputs, so the order above is really checked
    assert not np.allclose(run.outputs[0][0], run.outputs[1][0])
    seq = runner.run_sequential(feeds[:2])
    for a, b in zip(run.outputs, seq.outputs):
        np.testing.assert_array_equal(a[0], b[0])


def test_each_stage_holds_only_its_ops_kernels(piped):
    ref, bounds, stages, _ = piped
    assert len(stages) == len(bounds) == 6
    for (start, end), stage in zip(bounds, stages):
        kernels = {gv.name_hint for gv, f in stage.module.functions_items()
                   if isinstance(f, tvm.tirx.PrimFunc)}
        whole = {op.func for op in ref.graph.ops[start:end] if op.name not in stage.shards}
        assert kernels == whole | {v["kernel"] for v in stage.shards.values()}
    assert stages[0].inputs == tuple(ref.input_names)
    assert stages[1].inputs == (ref.graph.ops[0].name,)
    assert stages[-1].outputs == (OUTPUT,)


def test_a_value_read_two_stages_later_is_forwarded(piped):
    """Between stages, the item holds every value a later stage reads (skip connections)."""
    _, _, stages, runner = piped
    metas = runner.metas
    carry = carried(metas)
    for s in range(len(metas) - 1):
        later = {i["name"] for m in metas[s + 1:] for i in m["inputs"]}
        made = {o for m in metas[:s + 1] for o in m["outputs"]} | set(runner.inputs)
        assert set(carry[s]) == later & made
    forwarded = [(s, v) for s in range(1, len(metas) - 1) for v in carry[s]
                 if v not in stages[s].outputs]
    assert forwarded, "each model has a branch (fire, LRN, shuffle) that the cuts go through"


def test_split_ops_run_as_shards_of_their_output_channels(piped):
    """Each op asked to split is, where its channels divide and its kernel allows: a shard
    kernel computing 1/ways of the output channels, called once per way."""
    ref, _, stages, _ = piped
    asked = asked_splits(ref.graph)
    split = {name: v for stage in stages for name, v in stage.shards.items()}
    assert (len(asked), len(split)) == SPLITS[ref.graph.name]
    shapes = dict(zip((op.name for op in ref.graph.ops), _kernel_outputs(ref.mod["main"])))
    for stage in stages:
        calls = _kernels(stage.module["main"])
        for name, v in stage.shards.items():
            out = shapes[name]
            assert v["ways"] == shard_ways(out[v["axis"]], asked[name]) >= 2
            shard = [[int(d) for d in b.value.ty.shape.values] for b in calls
                     if b.value.args[0].name_hint == v["kernel"]]
            assert len(shard) >= v["ways"]
            assert {s[v["axis"]] * v["ways"] for s in shard} == {out[v["axis"]]}


def _kernel_outputs(main) -> list[list[int]]:
    return [[int(d) for d in b.value.ty.shape.values] if hasattr(b.value.ty, "shape") else []
            for b in _kernels(main)]


def _kernels(main) -> list:
    from autoplace.deploy.shard import is_kernel_call

    return [b for blk in main.body.blocks for b in blk.bindings if is_kernel_call(b.value)]


def test_bad_stage_bounds_are_refused(piped):
    ref, _, _, _ = piped
    names = [op.name for op in ref.graph.ops]
    with pytest.raises(BuildError, match="do not cover"):
        slice_stages(ref.mod, names, [(0, 3), (4, len(names))])
    with pytest.raises(BuildError, match="do not cover"):
        slice_stages(ref.mod, names, [(0, len(names)), (len(names), len(names))])
    with pytest.raises(BuildError, match="kernels"):
        slice_stages(ref.mod, names[:-1], [(0, len(names) - 1)])


def test_a_failing_stage_stops_the_stream_with_its_index(piped):
    ref, _, _, runner = piped
    feeds = stream(ref, runner, 3)
    name = runner.inputs[0]
    feeds[1] = {name: np.zeros((1, 2, 3), dtype="float32")}
    with pytest.raises(BuildError, match="stage 0 failed"):
        runner.run(feeds)
    with pytest.raises(ValueError, match="missing"):
        runner.run([{}])


def test_libraries_written_and_loaded_back(tmp_path):
    ref = Reference("squeezenet", tmp_path)
    names = [op.name for op in ref.graph.ops]
    stages = slice_stages(ref.mod, names, [(0, 20), (20, len(names))])
    entries = export_stages(stages, tmp_path / "out")
    assert [e["file"] for e in entries] == ["stage0.so", "stage1.so"]
    manifest = {"format": "autoplace-pipeline", "version": 1,
                "stages": [{"library": e} for e in entries]}
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(manifest))
    _, libs = load_stage_libraries(tmp_path / "out" / "manifest.json")
    assert [stage_meta(lib)["outputs"] for lib in libs] == [e["outputs"] for e in entries]
    runner = PipelineRunner(libs)
    out = runner.run([dict(zip(runner.inputs, ref.inputs))])
    np.testing.assert_allclose(out.outputs[0][0], ref.outputs[0], rtol=ref.rtol, atol=1e-6)
    with pytest.raises(BuildError, match="not a stage library"):
        PipelineRunner([compile_unplaced(ref.mod)])
    with pytest.raises(BuildError, match="at least one stage library, got none"):
        PipelineRunner([])
    with pytest.raises(BuildError, match=r"out of order: stages \[1, 0\]"):
        PipelineRunner(libs[::-1])
    bad = tmp_path / "bad"  # not the loaded file: overwriting a loaded library crashes
    bad.mkdir()
    (bad / "stage0.so").write_text("garbage")
    (bad / "manifest.json").write_text(json.dumps({**manifest,
                                                   "stages": [{"library": entries[0]}]}))
    with pytest.raises(ArtefactError, match="'stage0.so' is not the file .* SHA-256 differs"):
        load_stage_libraries(bad / "manifest.json")  # refused before it is loaded
    with pytest.raises(ArtefactError, match="stage0.so: not JSON"):
        load_stage_libraries(tmp_path / "out" / "stage0.so")
