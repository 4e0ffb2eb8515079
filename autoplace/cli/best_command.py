"""``autoplace best``: the best record of a log, a record picked from its front, or the
front itself (docs/pareto.md)."""

from __future__ import annotations

from autoplace.cli import tune_summary as summary
from autoplace.cli.options import choice_args, input_shapes_arg, limits_of
from autoplace.graph import GraphError, OpGraph
from autoplace.measure.objective import LATENCY, OBJECTIVES, THROUGHPUT
from autoplace.space import Placement


def register(sub) -> None:
    """Add ``best`` to the ``autoplace`` parser."""
    b = sub.add_parser("best", help="the best placement in a log, as a table; or the "
                                    "front of a log over latency, energy and memory")
    b.set_defaults(run=cmd_best)
    b.add_argument("log", nargs="+", help="tuning log(s): several for a study's workers")
    b.add_argument("--model", default=None, help="the model (default: the log's graph name)")
    input_shapes_arg(b)
    b.add_argument("--objective", choices=tuple(OBJECTIVES), default=None,
                   help="the best by latency, or by the period of a stream (throughput); "
                        "default: throughput for a job of pipeline plans only, else latency")
    b.add_argument("--pareto", action="store_true",
                   help="print the front: the records no other beats on every one of "
                        "--criteria (within the --max-* limits)")
    choice_args(b)


def cmd_best(args) -> int:
    from autoplace.measure.objective import CRITERIA
    from autoplace.records.front import criteria_named, criteria_of, pick
    from autoplace.records.tuning_log import JOB, read, without_side_files

    limits = limits_of(args)
    if args.criteria:  # (a bad one fails before the logs are read)
        criteria_named(args.criteria.split(","))
    records = [r for path in without_side_files(args.log) for r in read(path)]
    criteria = criteria_of(records, args.criteria)
    jobs: dict[tuple, list] = {}  # latencies of one graph, profile and measurer compare
    for r in records:
        jobs.setdefault(tuple(getattr(r, k) for k in JOB), []).append(r)
    measured = {s for r in records for s in r.result.peak_bytes}
    if measured and (unknown := limits.unknown_scopes(measured)):
        raise ValueError(f"--max-memory: no record of {', '.join(args.log)} holds scope "
                         f"{', '.join(map(repr, unknown))} (they hold "
                         f"{', '.join(sorted(measured))})")
    if len(jobs) > 1:
        what = "front" if args.pareto else "best"
        print(f"note: {', '.join(args.log)} holds {len(jobs)} jobs (graph, profile version, "
              f"measurer); the {what} of each:")
    found = False
    for job in jobs.values():
        if args.pareto:
            found |= _print_front(job, criteria, limits)
            continue
        how, why = _how(job, args)
        rec = pick(job, how, criteria, limits)
        if rec is None:
            continue
        found = True
        _print_record(rec, job, args, why or (
            "" if how in (LATENCY.name, THROUGHPUT.name, "energy")
            else f" (picked by {how}: {_figure(rec, CRITERIA.get(how, criteria))})"))
    if not found:
        bounded = " within the limits given" if limits else ""
        raise ValueError(f"{', '.join(args.log)}: no valid record{bounded}")
    return 0


def _how(job: list, args) -> tuple[str, str]:
    """What picks a job's best: ``--pick``, ``--objective``, or by default throughput for a
    job whose every record is a pipeline plan (what its user means), else latency; and
    the note that says so where it is that default."""
    if args.pick or args.objective:
        return args.pick or args.objective, ""
    if all(r.pipeline is not None for r in job):
        return THROUGHPUT.name, (" (picked by throughput: every record is a pipeline plan; "
                                 "--objective latency for the fastest inference)")
    return LATENCY.name, ""


def _print_record(rec, job, args, why: str) -> None:
    """The chosen record: its figures, then its placement or plan."""
    if rec.pipeline is None:
        _check_units(rec, args.log)
    else:
        _check_stages(rec, args)
    runs = len({r.run for r in job})
    print(f"{rec.graph} on {rec.profile} ({rec.measurer}): "
          f"{summary.record_figures(rec)} ({rec.strategy}, trial {rec.trial}, "
          f"{len(job)} records{f' of {runs} runs' if runs > 1 else ''}){why}")
    if rec.pipeline is not None:
        print(_format_plan(rec.pipeline))
        return
    graph = _graph_or_none(args.model or rec.graph, args.input_shapes)
    print(format_placement(rec.placement, graph))
    if graph is None and args.model is None:
        from autoplace.models import own_inputs_hint

        print(f"note: {own_inputs_hint(rec.graph)}; without it op kinds are ? and ops in "
              "name order")


def _figure(rec, criteria) -> str:
    """A record's figures of one criterion or several, in their units."""
    criteria = criteria if isinstance(criteria, tuple) else (criteria,)
    return ", ".join(f"{c.figure or c.name} {c.value(rec.result) * c.scale:.4f} {c.unit}"
                     for c in criteria)


def _print_front(job: list, criteria, limits) -> bool:
    """A job's front over ``criteria`` (:func:`~autoplace.cli.tune_summary.print_front`);
    whether it has one."""
    from autoplace.records.front import front

    points = front(job, criteria, limits)
    if points:
        kept = sum(1 for r in job if limits.admits(r.result))
        summary.print_front(points, criteria, len(job),
                            f"; {len(job) - kept} beyond the limits" if limits else "")
    return bool(points)


def _format_plan(pipeline) -> str:
    """A pipeline record's plan: its stages' ops and PEs, and its copies."""
    stages = ", ".join(f"ops {a}-{b - 1} on {k} PE{'s' if k > 1 else ''}"
                       for a, b, k, *_ in pipeline["stages"])
    copies = pipeline["replicas"]
    return f"  stages: {stages}; {copies} cop{'ies' if copies > 1 else 'y'} of the pipeline"


def _check_units(rec, logs) -> None:
    """Refuse a best record whose placement names a unit or scope its profile lacks,
    where the profile is a bundled one of the record's version (else nothing to check)."""
    from autoplace.hardware.load import bundled_profiles, load_profile

    if rec.profile not in bundled_profiles():
        return
    profile = load_profile(rec.profile)
    if profile.hash != rec.profile_hash:
        return
    for op, (unit, scope) in sorted(rec.placement.ops.items()):
        if unit not in profile.unit_index or scope not in profile.scope_index:
            what = "unit" if unit not in profile.unit_index else "scope"
            raise ValueError(f"{', '.join(logs)}: the best record (trial {rec.trial}) places op "
                           f"{op!r} on unit {unit!r}, scope {scope!r}: profile "
                           f"{profile.name} has no such {what}")


def _check_stages(rec, args) -> None:
    """Refuse a best pipeline record whose stages do not end at its graph's last op, where
    the graph is at hand and is the record's (else nothing to check)."""
    from autoplace.pipeline.plan import check_covers
    from autoplace.pipeline.plan_space import plan_of

    graph = _graph_or_none(args.model or rec.graph, args.input_shapes)
    if graph is None or graph.fingerprint != rec.graph_fp:
        return
    try:
        check_covers(plan_of(rec.pipeline), len(graph.ops))
    except ValueError as exc:
        raise ValueError(f"{', '.join(args.log)}: the best record (trial {rec.trial}): {exc} "
                       f"({graph.name})") from None


def _graph_or_none(spec: str, shapes=None) -> OpGraph | None:
    from autoplace.models import load_graph

    try:
        return load_graph(spec, shapes)
    except GraphError:
        return None


def format_placement(placement: Placement, graph: OpGraph | None) -> str:
    """The placement as a text table: op, kind, unit, scope, copy modes in."""
    kinds = {op.name: op.kind for op in graph.ops} if graph else {}
    copies_in: dict[str, list[str]] = {}
    for edge, mode in placement.copies.items():
        src, dst = edge.split("->", 1)
        copies_in.setdefault(dst, []).append(f"{src}:{mode}")
    rows = [("op", "kind", "unit", "scope", "copies in")]
    order = [op.name for op in graph.ops] if graph else list(placement.ops)
    rows += [(name, kinds.get(name, "?"), *placement.ops[name], ", ".join(copies_in.get(name, [])))
             for name in order if name in placement.ops]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4]
                     for r in rows).rstrip()


