"""What ``autoplace tune`` prints when it ends: the best, the baselines beside it, the
cost model's ranking quality, and what to do next."""

from __future__ import annotations


def figures(res) -> str:
    """A result's latency and, where it has one, its stream's period and throughput."""
    text = f"latency {res.latency_s * 1e3:.4f} ms"
    if res.period_s is not None:
        text += f", period {res.period_s * 1e3:.4f} ms ({1 / res.period_s:.1f} inferences/s)"
    return text


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
    best = objective.value(result.best.result)
    print(f"best ({objective.name}): {figures(result.best.result)} ({result.best.strategy}, "
          f"trial {result.best.trial})")
    for name, rec in sorted(result.baselines.items()):
        value = objective.value(rec.result)
        text = (f"{figures(rec.result)}  ({value / best:.2f}x the best {objective.name})"
                if value is not None else f"infeasible: {rec.result.detail}" if not
                rec.result.ok else f"{figures(rec.result)}  (its stream does not fit)")
        print(f"  baseline {name:<24} {text}")
    rhos = [s["spearman"] for s in result.stats[-10:] if s.get("spearman") is not None]
    if rhos:
        from autoplace.records.tuning_log import MODEL_STATS, side_file

        side = side_file(log_path, MODEL_STATS)
        print(f"cost model: Spearman {sum(rhos) / len(rhos):.2f} on the last "
              f"{len(rhos)} batches (per round in {side})")


def next_steps(args, log_path: str) -> None:
    """What to do with the log; ``compile`` only for a model TVM can build (a bundled name
    or an ONNX file, not an op graph JSON, which has no kernels)."""
    by = "" if args.objective == "latency" else f" --objective {args.objective}"
    steps = [f"autoplace best {log_path}{by}", f"autoplace report {log_path} --out report/"]
    shapes = getattr(args, "input_shapes", None)
    if shapes:
        spelled = " ".join(f"{k}:[{','.join(map(str, v))}]" for k, v in shapes.items())
        by += f' --input-shapes "{spelled}"'
    if not str(args.model).lower().endswith(".json"):
        steps += [f"autoplace compile {args.model} --hw {args.hw} --log {log_path}{by} "
                  "-o placed", "autoplace run placed"]
    print("next: " + "  |  ".join(steps))
