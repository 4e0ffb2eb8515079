"""Mesh pipelines on the command line: ``pipeline`` plans one and searches from it (also
``tune --objective throughput`` on a mesh); the stage libraries are built and run by
:mod:`autoplace.cli.pipeline_stages` (docs/pipeline.md)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


def register(sub) -> None:
    """Add ``pipeline`` to the ``autoplace`` parser."""
    from autoplace.cli.options import input_shapes_arg, positive_int, positive_seconds, seed_arg
    from autoplace.measure.objective import PLAN_FRONT, THROUGHPUT
    from autoplace.search.config import RANKINGS

    p = sub.add_parser("pipeline",
                       help="plan a stream of inferences over a mesh: stages over groups of "
                            "PEs, ops split across a stage's PEs, pipelines replicated (the "
                            "stage model's exact dynamic program)")
    p.add_argument("model", help="bundled model name, .onnx, .pt2 (torch.export) or graph .json")
    p.add_argument("--hw", required=True, help="a profile with a [mesh] (bundled: mesh)")
    input_shapes_arg(p)
    plan_args(p)
    p.add_argument("--trials", type=positive_int, default=1,
                   help="candidates measured by their streams, the DP's plan first (default 1: "
                        "the DP's plan only); the best is printed, written and drawn")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the search")
    p.add_argument("--objective", choices=(THROUGHPUT.name, ",".join(PLAN_FRONT)),
                   default=THROUGHPUT.name,
                   help="search the highest throughput (default), or the front of throughput "
                        "and energy per inference (docs/pareto.md); the front's knee is "
                        "printed, written and drawn")
    p.add_argument("--cost-model", choices=RANKINGS, default="xgb",
                   help="what picks each trial among 8 moves: XGBoost on the stream's "
                        "slowdown over the analytic period (default), the analytic period, "
                        "or none (one move per trial)")
    p.add_argument("--log", default=None, metavar="FILE",
                   help="append every trial to FILE (the tuner's records; compile --log "
                        "reads its best; with --storage, by default "
                        "pipeline-GRAPH-PROFILE.jsonl: the log is the source of truth); a "
                        "search goes on from its own log and refuses another job's")
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


def planned(model: str, hw: str, input_shapes=None, *, pes: int | None = None,
            max_split: int | None = None, plan: str | None = None, log: str | None = None,
            pick: dict | None = None):
    """(profile, space, seconds): the plan space of ``model`` on ``pes`` PEs (default: all)
    of ``hw``'s mesh, its start plans the DP's (the best first,
    :func:`~autoplace.pipeline.best_pipelines`), the manifest ``plan``'s, or the one of the
    pipeline log ``log`` that ``pick`` chooses (:func:`~autoplace.pipeline.log.best_plan`'s
    ``how``, ``criteria`` and ``limits``; default: the best by throughput)."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline import best_pipelines
    from autoplace.pipeline.plan_space import PlanSpace
    from autoplace.search.mesh import mesh_costs

    graph, profile = load_graph(model, input_shapes), load_profile(hw)
    t0 = time.perf_counter()
    costs, pes = mesh_costs(graph, profile, pes=pes, max_split=max_split)
    starts = [_given_plan(costs, profile, plan, log, pick or {})] if plan or log else \
        best_pipelines(costs, pes)
    if not starts:
        raise ValueError(_no_fit(costs, pes, f"{graph.name} does not fit {pes} PEs of "
                                             f"{profile.name}"))
    return profile, PlanSpace(costs, profile, pes, starts), time.perf_counter() - t0


def _given_plan(costs, profile, manifest: str | None, log: str | None, pick: dict):
    """The plan of a manifest, or the one of a pipeline log ``pick`` chooses."""
    if manifest:
        from autoplace.pipeline.manifest import read_manifest

        return read_manifest(manifest, costs)
    from autoplace.pipeline.log import best_plan

    return best_plan(log, costs, profile.hash, **pick)[0]


def cmd_pipeline(args) -> int:
    """Print the DP's plan beside the equal-FLOP baseline and the bound; search from it
    with ``--trials``, ``--log`` or ``--storage``."""
    _check_search_options(args.log, args.storage, args.worker)
    profile, space, secs = planned(args.model, args.hw, args.input_shapes, pes=args.pes,
                                   max_split=args.max_split, plan=args.plan)
    plan = _print_planned(space, profile, secs)
    if args.trials > 1 or args.log or args.storage:
        starts = space.starts[:args.trials]
        log = args.log or (f"pipeline-{space.graph.name}-{profile.name}.jsonl"
                           if args.storage else None)  # the log first, the study after
        plan = _search(_with_starts(space, starts), args, trials=args.trials - len(starts),
                       asked=args.trials, log=log)
    if args.manifest:
        from autoplace.pipeline.manifest import write_manifest

        write_manifest(args.manifest, plan, space.costs, profile_hash=profile.hash,
                       model=args.model, input_shapes=args.input_shapes)
        print(f"manifest: {args.manifest}")
    if args.plot:
        _plot(plan, space.costs, args.plot)
    return 0


def _with_starts(space, starts):
    from autoplace.pipeline.plan_space import PlanSpace

    return PlanSpace(space.costs, space.profile, space.pes, starts)


def _print_planned(space, profile, secs: float):
    """Print the DP's plan, the equal-FLOP baseline and the bound; the DP's plan."""
    from autoplace.pipeline import throughput_bound
    from autoplace.pipeline.equal_flops import equal_flops

    costs, pes, plan, machine = space.costs, space.pes, space.starts[0], space.costs.machine
    print(f"{space.graph.name} ({len(space.graph.ops)} ops) on {pes} PEs of {profile.name} "
          f"({machine.rows}x{machine.cols}), planned in {secs:.2f} s")
    print_plan(plan, costs, what="the DP's plan")
    naive, bound = equal_flops(costs, pes), throughput_bound(costs, pes)
    if naive is not None:
        _print_naive(naive, costs)
    print(f"the mesh's bound: {bound:,.1f} inferences/s (every PE busy with useful work)")
    return plan


def _check_search_options(log: str | None, storage: str | None, worker: bool) -> None:
    """Refuse, before anything is planned, a malformed log, a storage that does not open,
    and ``--worker`` without both."""
    if worker and not (storage and log):
        raise ValueError("--worker needs --storage (the study the workers share) and --log "
                         "(this worker's own)")
    if log and Path(log).exists():
        from autoplace.records.tuning_log import read

        read(log)
    if storage:
        from autoplace.search.study_storage import open_storage

        open_storage(storage)


def _search(space, args, *, trials: int, asked: int, log: str | None, limits=None):
    """Measure the start plans of ``space`` and ``trials`` more by their streams, in the
    tuning loop (:func:`autoplace.search.mesh.tune_mesh`), into ``log`` (or a file of its
    own that goes when done); the best plan (within ``limits``: None if none keeps them).
    ``asked``: the trials the user asked for."""
    import tempfile
    import warnings

    from autoplace.records.tuning_log import TuningLog
    from autoplace.search.job import check_objective
    from autoplace.search.mesh import mesh_config, tune_mesh

    _refuse_another_jobs_log(log, space)
    front = "," in args.objective  # (the front's moves rank by the stage model alone)
    if front and args.cost_model != "xgb":
        raise ValueError(f"--cost-model {args.cost_model}: the front of {args.objective} "
                         "ranks its moves by the stage model's figures; leave it out")
    config = mesh_config(trials=trials, seed=args.seed, objective=args.objective,
                         **({} if front else {"cost_model": args.cost_model}),
                         storage=args.storage, study_name=args.study, resume=True,
                         worker=args.worker, grace_s=args.grace,
                         **({"limits": limits} if limits else {}))
    check_objective(space, config)  # (before the log is opened)
    with (contextlib.nullcontext() if log else  # (a log of this run alone, then gone)
          tempfile.TemporaryDirectory(prefix="autoplace-pipeline-")) as scratch:
        path = log or str(Path(scratch) / "trials.jsonl")
        with TuningLog(path) as tuning_log, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "search stopped after")  # (said below)
            result = tune_mesh(space, tuning_log, config)
    if result.interrupted:
        print(f"interrupted: {result.measured} trials of this run in {log} (the same "
              "command goes on from them, measuring none again)" if log else
              f"interrupted after {result.measured} trials (--log keeps them)")
        raise KeyboardInterrupt
    return _report_search(space, result, worker=args.worker, asked=asked,
                          short=trials - (result.resumed + result.measured
                                          - len(result.baselines)), objective=config.goal)


def _refuse_another_jobs_log(log: str | None, space) -> None:
    """Refuse a log holding records of another job than this search (its graph, profile and
    measurer): a pipeline search always goes on from its log, so it takes only its own,
    where ``tune`` refuses any log with records without --resume or --append."""
    if not log or not Path(log).exists():
        return
    from autoplace.pipeline.stream_measurer import StreamMeasurer
    from autoplace.records.tuning_log import jobs_named, read

    job = (space.graph.fingerprint, space.profile.hash, StreamMeasurer.name)
    others = [r for r in read(log) if (r.graph_fp, r.profile_hash, r.measurer) != job]
    if others:
        raise ValueError(f"--log {log}: holds {len(others)} records of another job "
                         f"({jobs_named(others)}), not of this pipeline search of "
                         f"{space.graph.name} on {space.profile.name}; give another --log")


def _report_search(space, result, *, worker: bool, asked: int, short: int, objective):
    """Print what the search measured and found; the best plan (of a front, its knee)."""
    statuses = [r.pipeline["status"] for r in result.records]
    counts = {s: statuses.count(s) for s in ("ok", "bounded", "no-fit")}
    again = f"; {result.resumed} known from the log or study, not measured again" \
        if result.resumed else ""
    if worker:
        print(f"this worker measured {result.measured} of the study's trials")
    print(f"search: {result.resumed + result.measured} trials in {result.wall_s:.1f} s: "
          f"{counts['ok']} streamed (two inferences in flight per stage), "
          f"{counts['bounded']} bounded by their analytic throughput, {counts['no-fit']} "
          f"too big for their PEs{' (of this run)' if again else ''}{again}")
    if not worker and short > 0:
        print(f"  stopped short of the {asked} trials asked: every plan the moves reach from "
              "the measured plans is measured (the moves reach no other plan of this mesh)")
    if result.front:
        return _report_front(space, result, objective)
    if len(objective.criteria) > 1 and objective.limits:
        print(f"  no plan found within {objective.limits.text()} (the moves went from the "
              "plans least beyond them)")
        return None
    from autoplace.pipeline.plan_space import dp_reference, reference_text

    ref = dp_reference((r.strategy, r.trial, 1 / r.result.period_s if r.result.period_s
                        else None) for r in result.baselines.values())
    if result.best is None and objective.limits:
        print(f"  no plan found within {objective.limits.text()} (the moves went from the "
              "plans least beyond them)")
        return None
    if result.best is None or ref is None:
        return space.starts[0]
    best, plan = 1 / result.best.result.period_s, _plan(space, result.best)
    within = f" within {objective.limits.text()}" if objective.limits else ""
    print(f"  {reference_text(ref, len(result.baselines))}; the best{within}, trial "
          f"{result.best.trial} ({result.best.strategy}), {best:,.1f} ({best / ref[2]:.3f}x)")
    if plan != space.starts[0]:
        print_plan(plan, space.costs, what="the tuned plan")
    return plan


def _report_front(space, result, objective):
    """Print the front a search of throughput and energy found; its knee's plan."""
    from autoplace.cli.tune_summary import print_front
    from autoplace.records.front import figures, knee

    print_front(result.front, objective.criteria, result.resumed + result.measured,
                f" ({objective.limits.text()})" if objective.limits else "")
    plan = _plan(space, result.front[knee(figures(result.front, objective.criteria))])
    print_plan(plan, space.costs, what="the knee's plan")
    return plan


def _plan(space, record):
    return space.candidate_of(record.pipeline, record.placement)


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


def print_plan(plan, costs, what: str = "plan") -> None:
    """Print ``plan``: its throughput (streamed, as its record would hold it, beside the
    analytic bound), its latency, then its stages."""
    from autoplace.pipeline import evaluate
    from autoplace.pipeline.plan import rate_text
    from autoplace.pipeline.stream_measurer import measure

    f = evaluate(plan, costs)
    _, period, analytic, _ = measure(plan, costs)
    shape = (f"{plan.replicas} {'copies' if plan.replicas > 1 else 'copy'} of a pipeline of "
             f"{len(plan.stages)} stages on {plan.pes} PEs ({f.pes_used} PEs used)")
    print(f"{what}: {rate_text(period, plan.replicas) if period else 'does not fit'}; "
          f"{shape}")
    print(f"  {rate_text(analytic, plan.replicas, 'analytic bound')}; latency "
          f"{f.latency_s * 1e3:.4f} ms")
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
    print(f"equal-FLOP stages: {f.throughput:,.1f} inferences/s analytic ({plan.replicas} "
          f"copies of {len(plan.stages)} stages on {plan.pes} PEs)")


# -- compile and run -------------------------------------------------------------------
def is_pipeline_job(args) -> bool:
    """``tune`` and ``compile`` for ``--objective throughput`` (``tune``: or
    ``throughput,energy``) on a mesh profile search and build a pipeline."""
    from autoplace.hardware.load import load_profile
    from autoplace.measure.objective import THROUGHPUT

    return THROUGHPUT.name in args.objective.split(",") and \
        load_profile(args.hw).mesh is not None


#: ``tune``'s options (TuneConfig's fields) a pipeline search has no other value of: it
#: measures one plan per trial (no ``--batch-size``), ranks a few moves (not ``--candidates``),
#: has no descent, and always goes on from its log (``--resume``'s meaning, never ``--append``)
_PLACEMENT_ONLY = ("sampler", "warm_start", "save_model", "batch_size", "candidates",
                   "descent", "append", "study_params")


def _placement_options(args) -> list[str]:
    """The placement search's options ``args`` gives other values than their defaults."""
    from autoplace.search import TuneConfig
    from autoplace.search.config import RANKINGS

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
    pipeline`` from the DP's plans (the baselines) and ``--trials`` more, with tune's seed,
    log, storage, study, cost model and workers."""
    from autoplace.cli.options import limits_of
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    given = _placement_options(args)
    if given:
        raise ValueError(f"tune --objective throughput on a mesh searches pipelines "
                         f"(docs/pipeline.md): {', '.join(given)} only go with a placement "
                         "search")
    limits = limits_of(args)
    graph, profile = load_graph(args.model, args.input_shapes), load_profile(args.hw)
    log = args.log or f"tune-{graph.name}-{profile.name}.jsonl"
    print(f"tuning {graph.name} on {profile.name} for {args.objective}: a pipeline over "
          f"the mesh's PEs (stages, PEs per stage, splits), log {log}")
    _check_search_options(log, args.storage, args.worker)
    profile, space, secs = planned(args.model, args.hw, args.input_shapes)
    _print_planned(space, profile, secs)
    if _search(space, args, trials=args.trials, asked=args.trials, log=log,
               limits=limits) is None:
        return 0
    pick = " --pick knee" if "," in args.objective else ""  # (a front: its knee)
    pick += f" {limits.text()}" if limits else ""  # (compile picks within them too)
    print(f"next: autoplace compile {args.model} --hw {args.hw} --objective throughput "
          f"--log {log}{pick} -o piped/")
    return 0
