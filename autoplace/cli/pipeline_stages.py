"""``autoplace compile --objective throughput`` on a mesh and ``autoplace run DIR``: a
pipeline's stage libraries built, streamed through on this host, timed on boards
(docs/pipeline.md, "Stage libraries and the host runner")."""

from __future__ import annotations

import time
from pathlib import Path

from autoplace.cli.options import limits_of
from autoplace.cli.pipeline_commands import planned, print_plan
from autoplace.measure.objective import THROUGHPUT

MANIFEST = "manifest.json"
#: inferences ``run`` streams through a pipeline at most (each output is kept, to check it)
MAX_INFERENCES = 10_000
#: distinct random inputs made (the stream cycles through them)
DISTINCT_INPUTS = 16


def compile_pipeline(args) -> int:
    """Plan (or read --plan), slice the model into stages, write their libraries and the
    manifest into the directory ``-o``."""
    from autoplace.deploy.shard import SPLIT_KINDS
    from autoplace.deploy.stages import export_stages, slice_stages
    from autoplace.deploy.toolchain import llvm_for
    from autoplace.models import load_module_for
    from autoplace.pipeline.manifest import write_manifest

    pick = {"how": args.pick or THROUGHPUT.name, "criteria": args.criteria,
            "limits": limits_of(args)}
    if (args.pick or args.criteria or pick["limits"]) and not args.log:
        raise ValueError("compile: --pick, --criteria and the limits choose a plan of --log "
                         "LOG (without it the DP's plan is built)")
    profile, space, _ = planned(args.model, args.hw, args.input_shapes, pes=args.pes,
                                max_split=args.max_split, plan=args.plan, log=args.log,
                                pick=pick)
    graph, costs, plans = space.graph, space.costs, space.starts
    plan = plans[0]
    mod = load_module_for(args.model, graph, args.input_shapes)
    t0 = time.perf_counter()
    splits = {graph.ops[i].name: ways for s in plan.stages
              for i, ways in zip(range(s.start, s.end), s.ways())
              if ways > 1 and graph.ops[i].kind in SPLIT_KINDS}
    stages = slice_stages(mod, [op.name for op in graph.ops],
                          [(s.start, s.end) for s in plan.stages], splits)
    builds = [llvm_for([costs.machine.units[u] for u in set(costs.op_units(s).tolist())],
                       profile, args.cross_compiler, f"stage {n}")
              for n, s in enumerate(plan.stages)]
    libraries = export_stages(stages, args.output, builds)
    path = Path(args.output) / MANIFEST
    write_manifest(path, plan, costs, profile_hash=profile.hash, model=args.model,
                   input_shapes=args.input_shapes,
                   libraries=libraries)
    print_plan(plan, costs)
    split = sum(len(s.shards) for s in stages)
    print(f"{len(stages)} stage libraries compiled in {time.perf_counter() - t0:.1f} s, "
          f"{split} of the {len(splits)} conv2d/matmul ops the plan splits split inside "
          f"them -> {path}")
    return 0


def run_args(p) -> None:
    """``run``'s options for a compiled pipeline."""
    from autoplace.cli.options import positive_int

    p.add_argument("--inferences", type=positive_int, default=None,
                   help="pipeline: inferences streamed (default 16)")
    p.add_argument("--check", action="store_true",
                   help="compare the outputs with the unplaced model's (TVM's default build)")
    p.add_argument("--rpc-tracker", default=None, metavar="HOST:PORT",
                   help="pipeline: time each stage library on a board of the tracker")
    p.add_argument("--rpc-key", default=None,
                   help="pipeline: the key of those boards (default: each stage's unit's key)")


def is_pipeline_dir(target: str) -> bool:
    """Whether ``target`` is a compiled pipeline (its directory, or its manifest): a
    manifest that is not a placed build's (whose format says so)."""
    from autoplace.deploy.artefact import PLACED_FORMAT, manifest_format

    path = Path(target)
    path = path if path.name == MANIFEST else path / MANIFEST
    return path.is_file() and manifest_format(path) != PLACED_FORMAT


def run_pipeline(args) -> int:
    """Stream inferences through the stage libraries: pipelined, then one at a time."""
    from autoplace.deploy.artefact import field
    from autoplace.deploy.run import random_inputs
    from autoplace.deploy.runner import PipelineRunner, load_stage_libraries

    n = args.inferences or 16
    if n > MAX_INFERENCES:
        raise ValueError(f"--inferences {n}: at most {MAX_INFERENCES:,} (every output is kept "
                         "to be checked)")
    path = Path(args.target)
    path = path / MANIFEST if path.is_dir() else path
    manifest, libs = load_stage_libraries(path)
    graph = field(manifest, "graph", dict, path)
    runner = PipelineRunner(libs)
    distinct = [dict(zip(runner.inputs, random_inputs({"inputs": runner.input_specs()},
                                                      args.seed + i)))
                for i in range(min(n, DISTINCT_INPUTS))]
    feeds = [distinct[i % len(distinct)] for i in range(n)]
    runner.run_sequential(feeds[:1])  # warm-up
    piped, alone = runner.run(feeds), runner.run_sequential(feeds)
    print(f"{path}: {graph.get('name')} in {len(libs)} stages on this host; "
          f"{len(feeds)} inferences: {piped.throughput:,.2f} inferences/s pipelined, "
          f"{alone.throughput:,.2f} one at a time ({piped.throughput / alone.throughput:.2f}x)")
    if args.check:
        check_outputs(graph, feeds, piped.outputs, "pipeline")
    if args.rpc_tracker:
        _time_on_boards(args, manifest, path.parent)
    return 0


def check_outputs(graph: dict, feeds: list[dict], outputs: list, what: str) -> None:
    """Every output against TVM's default build of the unplaced model ``graph`` names
    (``model``, ``fingerprint``: a manifest's); ValueError naming the first that differs.
    ``feeds``: per inference, input name -> array."""
    import numpy as np

    from autoplace.deploy import Loaded, compile_unplaced
    from autoplace.models import load_module

    model = graph.get("model")
    if model is None:
        raise ValueError(f"--check: the {what} does not say which model it was built from")
    mod, g = load_module(model, graph.get("input_shapes"))
    if g.fingerprint != graph.get("fingerprint"):
        raise ValueError(f"--check: {model} is not the model the {what} was built from")
    loaded, worst = Loaded(compile_unplaced(mod)), 0.0
    for n, (feed, out) in enumerate(zip(feeds, outputs)):
        want = loaded.run(loaded.inputs([feed[i["name"]] for i in loaded.meta["inputs"]]))
        for a, b in zip(out, want):
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-6):
                raise ValueError(f"--check: inference {n}: the {what}'s output differs "
                                 f"from the unplaced model's")
            worst = max(worst, float(np.max(np.abs(a - b))) if a.size else 0.0)
    print(f"check: all {len(outputs)} outputs equal the unplaced {model}'s "
          f"(max abs difference {worst:.3g})")


def _time_on_boards(args, manifest: dict, where) -> None:
    """Each stage library timed on a board through RPC; the period composed from them."""
    from autoplace.deploy.run import TimeSettings
    from autoplace.measure.rpc_stages import time_stages_rpc

    stages = manifest["stages"]
    keys = [args.rpc_key or s.get("rpc_key") for s in stages]
    if None in keys:
        raise ValueError(f"--rpc-tracker: stage {keys.index(None)}'s unit has no rpc_key in "
                         "the profile; give --rpc-key KEY")
    settings = TimeSettings(number=args.number, repeat=args.repeat, warmup=args.warmup)
    times = time_stages_rpc([where / s["library"]["file"] for s in stages], keys,
                            args.rpc_tracker, settings=settings, seed=args.seed)
    for s, secs in zip(stages, times):
        print(f"  stage {s['index']} on {keys[s['index']]}: {secs * 1e3:.4f} ms "
              f"(planned {s['period_s'] * 1e3:.4f} ms)")
    slowest = max(range(len(times)), key=times.__getitem__)
    print(f"rpc: period {times[slowest] * 1e3:.4f} ms (stage {slowest}, the slowest), "
          f"{1 / times[slowest]:,.1f} inferences/s per pipeline")
