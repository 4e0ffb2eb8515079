"""What ``autoplace tune`` prints when it ends: the best, the baselines beside it, the
cost model's ranking quality, and what to do next."""

from __future__ import annotations

from autoplace.cli.options import limits_of


def figures(res, copies: int | None = None) -> str:
    """A result's latency and, where it has them, its stream's period and throughput (of
    a pipeline plan of ``copies`` copies: over every copy, and per copy), and its energy
    (where the profile prices any)."""
    from autoplace.pipeline.plan import rate_text

    text = f"latency {res.latency_s * 1e3:.4f} ms"
    if res.period_s is not None and copies is not None:
        text += f", {rate_text(res.period_s * copies, copies)}"
    elif res.period_s is not None:
        text += f", period {res.period_s * 1e3:.4f} ms ({1 / res.period_s:.1f} inferences/s)"
    if res.energy_j:
        text += f", energy {res.energy_j * 1e3:.4f} mJ"
    return text


def record_figures(rec) -> str:
    """:func:`figures` of a record (of a pipeline plan: with its copies)."""
    return figures(rec.result, rec.pipeline["replicas"] if rec.pipeline else None)


def report(result, log_path: str, objective, worker: bool = False) -> None:
    """The summary of a finished (or interrupted) tuning job, by ``objective``."""
    if result.warm_start:
        print(result.warm_start)
    if result.resumed:
        print(f"{'joined the study' if worker else 'resumed'}: {result.resumed} candidates "
              "measured before, none measured again")
    if worker:
        print(f"this worker measured {result.measured}; the study's best over every "
              "worker's log: autoplace best LOG [LOG ...]")
    if result.interrupted:
        done = "; the best was made a one-op local optimum first" if result.polished else ""
        print(f"interrupted: {result.measured} candidates of this run are in {log_path}"
              f"{done}; run the same command with --resume to continue")
    if result.best is None:
        print("no feasible placement found")
        return
    from autoplace.measure.estimates import estimate_note

    note = estimate_note(result.best.measurer) if result.best.result.energy_j else None
    if note:
        print(f"note: {note}")
    if result.front:  # a job of several objectives: its front, as `best --pareto` prints it
        print_front(result.front, objective.criteria, result.resumed + result.measured,
                    f" ({objective.limits.text()})" if objective.limits else "")
        return
    best = objective.value(result.best.result)
    print(f"best ({objective.name}): {record_figures(result.best)} ({result.best.strategy}, "
          f"trial {result.best.trial})")
    for name, rec in sorted(result.baselines.items()):
        print(f"  baseline {name:<24} {_against(rec, objective, best)}")
    rhos = [s["spearman"] for s in result.stats[-10:] if s.get("spearman") is not None]
    if rhos:
        from autoplace.records.tuning_log import MODEL_STATS, side_file

        side = side_file(log_path, MODEL_STATS)
        print(f"cost model: Spearman {sum(rhos) / len(rhos):.2f} on the last "
              f"{len(rhos)} batches" + (f" (per round in {side})" if side else ""))


def print_front(points, criteria, of: int, note: str = "") -> None:
    """A front's records (best by the first criterion first) as a table, its knee and each
    criterion's best marked: what ``best --pareto`` and a job of several objectives print.
    ``of``: the records it was made of; ``note`` ends the heading line."""
    import numpy as np

    from autoplace.records.front import figures, knee

    F = figures(points, criteria)
    marks = [[] for _ in points]
    marks[knee(F)].append("knee")
    for j, c in enumerate(criteria):
        marks[int(np.argmin(F[:, j]))].append(c.best_text)
    print(f"{points[0].graph} on {points[0].profile} ({points[0].measurer}): the front of "
          f"{len(points)} of {of} records over {', '.join(c.name for c in criteria)}{note}")
    rows = [("trial", "strategy", *(c.heading for c in criteria), "")]
    rows += [(str(r.trial), r.strategy, *(f"{v * c.scale:.4f}" for v, c in zip(f, criteria)),
              ", ".join(m)) for r, f, m in zip(points, F, marks)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    energy = [c.name == "energy" for c in criteria]
    if any(energy) and not F[:, energy].any():
        print(f"note: every energy figure is 0: profile {points[0].profile} prices no energy "
              "(docs/profile.md, energy keys)")


def _against(rec, objective, best: float) -> str:
    """A baseline's figures, and how far from the best it is by ``objective``, or why it
    has no value for it."""
    res = rec.result
    value, limits = objective.value(res), getattr(objective, "limits", None)
    if value is not None:
        return f"{record_figures(rec)}  ({value / best:.2f}x the best {objective.target})"
    if not res.ok:
        return f"infeasible: {res.detail}"
    if limits is not None and not limits.admits(res):
        return f"{record_figures(rec)}  (beyond {limits.text()})"
    return f"{record_figures(rec)}  (its stream does not fit)"


def _own_inputs(args) -> str:
    """``--model M`` and ``--hw P`` where the tuned model or profile is a file of the
    user's (a report or ``best`` finds bundled ones by the names the log holds)."""
    from autoplace.hardware.load import bundled_profiles
    from autoplace.models import BUNDLED

    own = f" --model {args.model}" if str(args.model) not in BUNDLED else ""
    return own + (f" --hw {args.hw}" if str(args.hw) not in bundled_profiles() else "")


def next_steps(args, log_path: str) -> None:
    """What to do with the log; ``compile`` only for a model TVM can build (a bundled name
    or an ONNX file, not an op graph JSON, which has no kernels)."""
    multi = "," in args.objective  # several objectives (the records say): the front, its knee
    by = "" if args.objective == "latency" else " --pareto" if multi else \
        f" --objective {args.objective}"
    if limits := limits_of(args):
        by += f" {limits.text()}"
    shapes = getattr(args, "input_shapes", None)
    spelled = " ".join(f"{k}:[{','.join(map(str, v))}]" for k, v in (shapes or {}).items())
    given = f' --input-shapes "{spelled}"' if shapes else ""
    own = _own_inputs(args)  # a log names its model and profile, not where they are
    model = f" --model {args.model}{given}" if "--model" in own else ""
    steps = [f"autoplace best {log_path}{by}{model}",
             f"autoplace report {log_path} --out report/{own}{given if model else ''}"]
    by = by.replace(" --pareto", " --pick knee") + given  # (compile builds one: the knee)
    if not str(args.model).lower().endswith(".json"):
        steps += [f"autoplace compile {args.model} --hw {args.hw} --log {log_path}{by} "
                  "-o placed", "autoplace run placed"]
    print("next: " + "  |  ".join(steps))
