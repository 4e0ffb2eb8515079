"""Mesh pipelines on the command line: ``pipeline`` plans one and searches from it (also
``tune --objective throughput`` on a mesh); the stage libraries are built and run by
:mod:`autoplace.cli.pipeline_stages` (docs/pipeline.md)."""

from __future__ import annotations

import time
from pathlib import Path


def register(sub) -> None:
    """Add ``pipeline`` to the ``autoplace`` parser."""
    from autoplace.cli.options import input_shapes_arg, positive_int, positive_seconds, seed_arg
    from autoplace.pipeline.plan_search import RANKINGS

    p = sub.add_parser("pipeline",
                       help="plan a stream of inferences over a mesh: stages over groups of "
                            "PEs, ops split across a stage's PEs, pipelines replicated (the "
                            "stage model's exact dynamic program)")
    p.add_argument("model", help="bundled model name, .onnx or graph .json")
    p.add_argument("--hw", required=True, help="a profile with a [mesh] (bundled: mesh)")
    input_shapes_arg(p)
    plan_args(p)
    p.add_argument("--trials", type=positive_int, default=1,
                   help="candidates measured by their streams, the DP's plan first (default 1: "
                        "the DP's plan only); the best is printed, written and drawn")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the search")
    p.add_argument("--cost-model", choices=RANKINGS, default="xgb",
                   help="what picks each trial among 8 moves: XGBoost on the stream's "
                        "slowdown over the analytic period (default), the analytic period, "
                        "or none (one move per trial)")
    p.add_argument("--log", default=None, metavar="FILE",
                   help="append every trial to FILE (the tuner's records; compile --log "
                        "reads its best)")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="also keep the trials in an Optuna study (journal:PATH, "
                        "sqlite:///PATH, postgresql://...); a search run again skips them")
    p.add_argument("--study", default=None, help="the study's name (default: one per graph "
                                                  "and mesh)")
    p.add_argument("--worker", action="store_true",
                   help="search as one of several workers sharing the study in --storage, "
                        "each with its own --log: no plan is measured twice, --trials counts "
                        "the whole study")
    p.add_argument("--grace", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="--worker: a worker silent this long is dead")
    p.add_argument("--manifest", default=None, metavar="FILE",
                   help="write the plan as a JSON manifest for a runtime (docs/pipeline.md)")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="draw the plan on the grid (grid.png) and one period of its stream "
                        "(period.png) in DIR")
    p.set_defaults(run=cmd_pipeline)


def plan_args(p) -> None:
    """The options that say how a mesh pipeline is planned (``pipeline`` and ``compile``)."""
    from autoplace.cli.options import positive_int

    p.add_argument("--pes", type=positive_int, default=None,
                   help="PEs to use (default: the whole mesh)")
    p.add_argument("--max-split", type=positive_int, default=None,
                   help="ways an op may be split at most (default 64)")
    p.add_argument("--plan", default=None, metavar="MANIFEST",
                   help="the plan of a manifest (from `autoplace pipeline --manifest`) "
                        "instead of planning again")


def planned(args, log: str | None = None):
    """(graph, profile, costs, plans, pes, seconds) of ``args``: the DP's plans (the best
    first, :func:`~autoplace.pipeline.best_pipelines`), --plan's, or the best of the
    pipeline log ``log``."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline import MeshMachine, StageCosts, best_pipelines
    from autoplace.pipeline.machine import MAX_SPLIT

    graph, profile = load_graph(args.model, args.input_shapes), load_profile(args.hw)
    machine = MeshMachine.of(profile, max_split=args.max_split or MAX_SPLIT)
    pes = args.pes or machine.size
    if pes > machine.size:
        raise ValueError(f"--pes {pes}: the mesh of {args.hw} has {machine.size} PEs")
    t0 = time.perf_counter()
    costs = StageCosts(graph, machine)
    if args.plan:
        from autoplace.pipeline.manifest import read_manifest

        plans = [read_manifest(args.plan, costs)]
    elif log:
        from autoplace.pipeline.log import best_plan

        plans = [best_plan(log, costs, profile.hash)[0]]
    else:
        plans = best_pipelines(costs, pes)
    if not plans:
        raise ValueError(_no_fit(costs, pes, f"{graph.name} does not fit {pes} PEs of "
                                           f"{profile.name}"))
    return graph, profile, costs, plans, pes, time.perf_counter() - t0


def cmd_pipeline(args) -> int:
    """Print the DP's plan beside the equal-FLOP baseline and the bound."""
    from autoplace.pipeline import throughput_bound
    from autoplace.pipeline.equal_flops import equal_flops

    opened = _open(args)  # a bad log or storage is refused before anything is planned
    graph, profile, costs, plans, pes, secs = planned(args)
    plan, machine = plans[0], costs.machine
    print(f"{graph.name} ({len(graph.ops)} ops) on {pes} PEs of {profile.name} "
          f"({machine.rows}x{machine.cols}), planned in {secs:.2f} s")
    print_plan(plan, costs)
    naive, bound = equal_flops(costs, pes), throughput_bound(costs, pes)
    if naive is not None:
        _print_naive(naive, costs)
    print(f"bound: {bound:,.1f} inferences/s (every PE busy with useful work)")
    if args.trials > 1 or args.log or args.storage:
        plan = _search(args, costs, profile, plans, pes, opened)
    if args.manifest:
        from autoplace.pipeline.manifest import write_manifest

        write_manifest(args.manifest, plan, costs, profile_hash=profile.hash, model=args.model,
                       input_shapes=args.input_shapes)
        print(f"manifest: {args.manifest}")
    if args.plot:
        _plot(plan, costs, args.plot)
    return 0


def _open(args) -> tuple[list[dict] | None, object]:
    """``--log``'s lines (None if it does not exist yet) and ``--storage``'s storage."""
    lines = storage = None
    if args.log and Path(args.log).exists():
        from autoplace.pipeline.log import read_lines

        lines = read_lines(args.log)
    if args.storage:
        from autoplace.search.study_storage import open_storage

        storage = open_storage(args.storage)
    return lines, storage


def _search(args, costs, profile, starts, pes: int, opened):
    """Measure the DP's plans and ``--trials`` in all by their streams; the best plan."""
    from autoplace.pipeline.plan_search import STATUSES, PipelineSearch
    from autoplace.search.interrupt import CtrlC
    from autoplace.search.workers import worker_seed

    known, record, log, worker = _recorders(args, costs, profile, *opened)
    mine = []  # trials this run measured
    seed = args.seed if worker is None else worker_seed(args.seed, worker.id)
    t0 = time.perf_counter()
    try:
        with CtrlC() as ctrl_c:
            def on_trial(trial) -> None:
                for r in (*record, mine.append):
                    r(trial)
                ctrl_c.check()  # a Ctrl-C a finalizer swallowed: now the trial is logged

            search = PipelineSearch(costs, pes, seed=seed, known=known, shared=worker,
                                    on_trial=on_trial, ranking=args.cost_model)
            best = search.run(starts[0], args.trials, also=starts[1:])
    except KeyboardInterrupt:
        if args.log:  # counted in the log itself: a Ctrl-C may fall between two recorders
            from autoplace.pipeline.log import read_lines

            n = len(read_lines(args.log)) - len(opened[0] or [])
            print(f"interrupted: {n} trials of this run in {args.log} (the same "
                  "command goes on from them, measuring none again)")
        raise
    finally:
        for r in (log, worker):
            if r is not None:
                r.close()
    dps = [search.seen[p] for p in starts if p in search.seen]
    dp = max(dps, key=lambda t: t.throughput or 0.0)  # the DP's plan that streams best
    again = sum(1 for plan in search.seen if plan in search.known)
    counts = {s: sum(1 for t in search.seen.values() if t.status == s) for s in STATUSES}
    if worker is not None:
        print(f"worker {worker.id}: measured {len(mine)} of the study's trials")
    print(f"search: {len(search.seen)} trials in {time.perf_counter() - t0:.1f} s: "
          f"{counts['ok']} streamed (two inferences in flight per stage), "
          f"{counts['bounded']} bounded by their analytic throughput, {counts['no-fit']} "
          "too big for their PEs"
          + (f"; {again} known from the log or study, not measured again" if again else ""))
    if worker is None and len(search.seen) < args.trials:
        asked = getattr(args, "trials_asked", None) or args.trials  # (tune: + the DP's plan)
        print(f"  stopped short of the {asked} trials asked: the moves from the best plan "
              "found no plan not measured yet (the mesh's plans near it are all known)")
    if dp.throughput is None or best.throughput is None:
        return starts[0]
    which = "plan" if len(dps) == 1 else "better plan (weights streamed, or held)"
    print(f"  the DP's {which} streams {dp.throughput:,.1f} inferences/s; the best, trial "
          f"{best.number} ({best.move}), {best.throughput:,.1f} "
          f"({best.throughput / dp.throughput:.3f}x)")
    if best.plan != starts[0]:
        print("tuned plan:")
        print_plan(best.plan, costs)
    return best.plan


def _recorders(args, costs, profile, lines, storage):
    """(known trials, recorders in order, the log, this worker) of --log (its ``lines``
    read), --storage (its ``storage`` opened) and --worker: the log first, the source of
    truth, then the study."""
    from autoplace.pipeline.log import TrialLog

    if args.worker and not (args.storage and args.log):
        raise ValueError("--worker needs --storage (the study the workers share) and --log "
                         "(this worker's own)")
    known, record, study, log, worker = [], [], None, None, None
    if args.storage:  # opened first: a bad URL appends nothing to the log
        from autoplace.search.pipeline_study import known_in_study, open_pipeline_study

        study = open_pipeline_study(args.storage, costs, profile.hash, args.study,
                                    storage=storage)
        known += known_in_study(study)
    if args.log:
        log = TrialLog(args.log, costs, profile_hash=profile.hash, seed=args.seed, lines=lines)
        known += log.known()
        record.append(log)
    if study is not None:
        from autoplace.records.tuning_log import new_run_id
        from autoplace.search.pipeline_study import PipelineWorker, StudyRecorder

        kw = {"profile_hash": profile.hash, "seed": args.seed,
              "run": log.run if log is not None else new_run_id()}
        worker = PipelineWorker(study, storage, costs, log=Path(args.log), grace_s=args.grace,
                                **kw) if args.worker else None
        record.append(worker or StudyRecorder(study, costs, **kw))
    return known, record, log, worker


def _plot(plan, costs, out: str) -> None:
    """grid.png and period.png in ``out``."""
    from autoplace.reports.pipeline_report import plan_pictures

    paths = plan_pictures(plan, costs, Path(out))
    print(f"pictures: {paths['grid']}, {paths['period']}")


def _no_fit(costs, pes: int, what: str) -> str:
    """Why no pipeline fits: too few PEs for the weights (streamed or not) and buffers, or
    an op too big for the most PEs it may be split over."""
    import math

    from autoplace.pipeline import fewest_pes

    m = costs.machine
    fewest = [p for p in (fewest_pes(costs, math.inf, streamed=s) for s in (False, True))
              if p is not None]
    if fewest:
        return (f"{what}: its buffers and weights (streamed from the shared memory or not) "
                f"need at least {min(p.pes for p in fewest)} PEs")
    return (f"{what}: an op's buffers and weights exceed {costs.K} PEs' memory "
            f"({m.memory_bytes / 2**20:.2f} MiB each; --max-split raises the {costs.K})")


def print_plan(plan, costs) -> None:
    from autoplace.pipeline import evaluate

    f = evaluate(plan, costs)
    print(f"best: {f.throughput:,.1f} inferences/s: {plan.replicas} copies of a pipeline of "
          f"{len(plan.stages)} stages on {plan.pes} PEs ({f.pes_used} PEs used); period "
          f"{f.period_s * 1e3:.4f} ms, latency {f.latency_s * 1e3:.4f} ms")
    names = [op.name for op in costs.graph.ops]
    if f.shared_period_s >= max(f.stage_period_s):
        print(f"  the shared memory sets the period: {f.shared_period_s * 1e3:.4f} ms per "
              "inference of each copy for its inputs, outputs, streamed weights and "
              "spilled cuts")
    for index, (s, period, memory) in enumerate(zip(plan.stages, f.stage_period_s,
                                                    f.stage_memory)):
        units = ", ".join(f"{n} on {u}" for u, n in costs.ops_per_unit(s).items())
        streamed = f"; {len(s.streamed)} streaming their weights" if s.streamed else ""
        streamed += "; its input through the shared memory" if plan.spilled_at(index)[0] \
            else ""
        print(f"  ops {s.start:>4}-{s.end - 1:<4} {names[s.start]} .. {names[s.end - 1]}: "
              f"{s.pes} PEs, period {period * 1e3:.4f} ms, {memory / 2**20:.2f} MiB per PE; "
              f"{units}{streamed}")


def _print_naive(plan, costs) -> None:
    from autoplace.pipeline import evaluate

    f = evaluate(plan, costs)
    print(f"equal-FLOP stages: {f.throughput:,.1f} inferences/s ({plan.replicas} copies of "
          f"{len(plan.stages)} stages on {plan.pes} PEs)")


# -- compile and run -------------------------------------------------------------------
def is_pipeline_job(args) -> bool:
    """``tune`` and ``compile`` for ``--objective throughput`` on a mesh profile search and
    build a pipeline."""
    from autoplace.hardware.load import load_profile

    return args.objective == "throughput" and load_profile(args.hw).mesh is not None


#: ``tune``'s options (TuneConfig's fields) a pipeline search has no other value of: it
#: measures one plan per trial (no ``--batch-size``), ranks a few moves (not ``--candidates``),
#: has no descent, and always goes on from its log (``--resume``'s meaning, never ``--append``)
_PLACEMENT_ONLY = ("sampler", "warm_start", "save_model", "batch_size", "candidates",
                   "descent", "append")


def _placement_options(args) -> list[str]:
    """The placement search's options ``args`` gives other values than their defaults."""
    from autoplace.pipeline.plan_search import RANKINGS
    from autoplace.search import TuneConfig

    default = TuneConfig()
    given = [f"--{name.replace('_', '-')}" for name in _PLACEMENT_ONLY
             if _value(getattr(args, name)) != getattr(default, name)]
    given += ["--measurer"] if args.measurer != "simulator" else []
    return given + ([f"--cost-model {args.cost_model}"] if args.cost_model not in RANKINGS
                    else [])


def _value(option):
    return tuple(option) if isinstance(option, list) else option


def tune_pipeline(args) -> int:
    """``tune --objective throughput`` on a mesh: the pipeline search of ``autoplace
    pipeline`` from the DP's plan (the baseline) and ``--trials`` more, with tune's seed,
    log, storage, study, cost model and workers."""
    import argparse

    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    given = _placement_options(args)
    if given:
        raise ValueError(f"tune --objective throughput on a mesh searches pipelines "
                         f"(docs/pipeline.md): {', '.join(given)} only go with a placement "
                         "search")
    graph, profile = load_graph(args.model, args.input_shapes), load_profile(args.hw)
    log = args.log or f"tune-{graph.name}-{profile.name}.jsonl"
    print(f"tuning {graph.name} on {profile.name} for throughput: a pipeline over the "
          f"mesh's PEs (stages, PEs per stage, splits), log {log}")
    code = cmd_pipeline(argparse.Namespace(
        model=args.model, input_shapes=args.input_shapes, hw=args.hw, pes=None,
        max_split=None, plan=None,
        trials=args.trials + 1, trials_asked=args.trials, seed=args.seed, log=log,
        storage=args.storage,
        study=args.study, manifest=None, plot=None, cost_model=args.cost_model,
        worker=args.worker, grace=args.grace))
    print(f"next: autoplace compile {args.model} --hw {args.hw} --objective throughput "
          f"--log {log} -o piped/")
    return code
