"""Subcommand ``pipeline``: the best pipelined plan of a model on a mesh (docs/pipeline.md)."""

from __future__ import annotations

import time


def register(sub) -> None:
    """Add ``pipeline`` to the ``autoplace`` parser."""
    from autoplace.cli_args import positive_int

    p = sub.add_parser("pipeline",
                       help="plan a stream of inferences over a mesh: stages over groups of "
                            "PEs, ops split across a stage's PEs, pipelines replicated (the "
                            "stage model's exact dynamic program)")
    p.add_argument("model", help="bundled model name, .onnx or graph .json")
    p.add_argument("--hw", required=True, help="a profile with a [mesh] (bundled: mesh)")
    p.add_argument("--pes", type=positive_int, default=None,
                   help="PEs to use (default: the whole mesh)")
    p.add_argument("--max-split", type=positive_int, default=None,
                   help="ways an op may be split at most (default 64)")
    p.add_argument("--manifest", default=None, metavar="FILE",
                   help="write the plan as a JSON manifest for a runtime (docs/pipeline.md)")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="draw the plan on the grid (grid.png) and one period of its stream "
                        "(period.png) in DIR")
    p.set_defaults(run=cmd_pipeline)


def cmd_pipeline(args) -> int:
    """Print the DP's plan beside the equal-FLOP baseline and the bound."""
    from autoplace.models import load_graph
    from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline, throughput_bound
    from autoplace.pipeline.baselines import equal_flops
    from autoplace.pipeline.machine import MAX_SPLIT
    from autoplace.profile_io import load_profile

    graph, profile = load_graph(args.model), load_profile(args.hw)
    machine = MeshMachine.of(profile, max_split=args.max_split or MAX_SPLIT)
    pes = args.pes or machine.size
    if pes > machine.size:
        raise ValueError(f"--pes {pes}: the mesh of {args.hw} has {machine.size} PEs")
    t0 = time.perf_counter()
    costs = StageCosts(graph, machine)
    plan = best_pipeline(costs, pes)
    secs = time.perf_counter() - t0
    if plan is None:
        raise ValueError(_no_fit(costs, pes, f"{graph.name} does not fit {pes} PEs of "
                                           f"{profile.name}"))
    print(f"{graph.name} ({len(graph.ops)} ops) on {pes} PEs of {profile.name} "
          f"({machine.rows}x{machine.cols}), planned in {secs:.2f} s")
    _print_plan(plan, costs)
    naive, bound = equal_flops(costs, pes), throughput_bound(costs, pes)
    if naive is not None:
        _print_naive(naive, costs)
    print(f"bound: {bound:,.1f} inferences/s (every PE busy with useful work)")
    if args.manifest:
        from autoplace.pipeline.manifest import write_manifest

        write_manifest(args.manifest, plan, costs, profile_hash=profile.hash)
        print(f"manifest: {args.manifest}")
    if args.plot:
        _plot(plan, costs, args.plot)
    return 0


def _plot(plan, costs, out: str) -> None:
    """grid.png and period.png in ``out``."""
    from pathlib import Path

    from autoplace import plots
    from autoplace.pipeline.layout import grid_maps
    from autoplace.pipeline.stream import steady_window

    Path(out).mkdir(parents=True, exist_ok=True)
    title = f"{costs.graph.name} on {costs.machine.name}"
    plots.save(plots.pipeline_grid(*grid_maps(plan, costs), title=title), Path(out) / "grid.png")
    start, period, work = steady_window(plan, costs)
    plots.save(plots.pipeline_period(work, start, period, len(plan.stages)),
               Path(out) / "period.png")
    print(f"pictures: {Path(out) / 'grid.png'}, {Path(out) / 'period.png'}")


def _no_fit(costs, pes: int, what: str) -> str:
    """Why no pipeline fits: too few PEs for the weights and buffers, or an op too big for
    the most PEs it may be split over."""
    import math

    from autoplace.pipeline import fewest_pes

    m = costs.machine
    fewest = fewest_pes(costs, math.inf)
    if fewest is not None:
        return f"{what}: its weights and buffers need at least {fewest.pes} PEs"
    return (f"{what}: an op's weights and buffers exceed {costs.K} PEs' memory "
            f"({m.memory_bytes / 2**20:.2f} MiB each; --max-split raises the {costs.K})")


def _print_plan(plan, costs) -> None:
    from autoplace.pipeline import evaluate

    f = evaluate(plan, costs)
    print(f"best: {f.throughput:,.1f} inferences/s: {plan.replicas} copies of a pipeline of "
          f"{len(plan.stages)} stages on {plan.pes} PEs ({f.pes_used} PEs used); period "
          f"{f.period_s * 1e3:.4f} ms, latency {f.latency_s * 1e3:.4f} ms")
    names = [op.name for op in costs.graph.ops]
    for s, period, memory in zip(plan.stages, f.stage_period_s, f.stage_memory):
        print(f"  ops {s.start:>4}-{s.end - 1:<4} {names[s.start]} .. {names[s.end - 1]}: "
              f"{s.pes} PEs, period {period * 1e3:.4f} ms, {memory / 2**20:.2f} MiB per PE")


def _print_naive(plan, costs) -> None:
    from autoplace.pipeline import evaluate

    f = evaluate(plan, costs)
    print(f"equal-FLOP stages: {f.throughput:,.1f} inferences/s ({plan.replicas} copies of "
          f"{len(plan.stages)} stages on {plan.pes} PEs)")
