"""This tree's deployed build against another tree's, each beside ONNX Runtime in its own
process, interleaved (issue 32; for a change to the default schedules).

    git worktree add /tmp/old <commit>
    python experiments/bench_deployed_ab.py /tmp/old [--models resnet50 squeezenet]
        [--threads 2 1] [--rounds 3] [--out FILE]

Per model, thread count and round: a fresh process of this tree, then one of the other
tree (this script run with the other tree's package first on ``PYTHONPATH``); each, kept
on the CPUs of the ``host`` profile's unit of that many threads (``pin_to_unit``), times
ONNX Runtime and the build with the default schedules (every op on that unit) interleaved
in 5 rounds of 5 runs and keeps the fastest of each, after checking the build's outputs
against ONNX Runtime's. Each tree keeps its libraries in a cache of its own for the whole
run (compiled in its first round). This machine's speed moves from minute to minute: the
figure to read is each build's time over ONNX Runtime's in the same process; the table
gives every round's.

``--busy-cpu N`` keeps a busy loop pinned to CPU ``N`` for the whole comparison, at the
build's priority: the pool thread pinned there is taken off its CPU for whole time slices,
as on a core shared with another job (squeezenet on two threads then took 130-190 ms
instead of 4-7: ``experiments/results/bench_dynamic_chunks.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS, REPEAT = 5, 5


def case(model: str, threads: int, cache: Path) -> dict:
    """ONNX Runtime's and the default build's fastest times (ms) of ``model``, here."""
    os.environ["TVM_NUM_THREADS"] = str(threads)  # the VM's pool (before TVM makes it)
    from bench_deployed import pin_to_unit, reference, runtime_timer
    from bench_schedules import ort_time

    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module

    mod, graph = load_module(model)
    profile = load_profile("host")
    pin_to_unit(profile, threads)
    session, feeds, expected = reference(model, threads)
    x = next(iter(feeds.values()))
    timer, rt = runtime_timer(mod, graph, profile, threads, x, expected, cache, None)
    ort = build = float("inf")
    for _ in range(ROUNDS):
        ort = min(ort, ort_time(session, feeds, REPEAT))
        build = min(build, timer())
    rt.close()
    return {"onnxruntime": ort * 1e3, "build": build * 1e3, "load": os.getloadavg()[0]}


def run_case(tree: Path, model: str, threads: int, cache: Path) -> dict:
    """:func:`case` in a fresh process importing autoplace from ``tree``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "experiments")])}
    out = subprocess.run([sys.executable, __file__, "--case", model, str(threads), str(cache)],
                         capture_output=True, text=True, cwd=tree, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {model} on {threads} threads failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def busy(cpu: int | None):
    """A busy loop pinned to ``cpu`` while the block runs (nothing when None)."""
    if cpu is None:
        yield
        return
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(spin.pid, {cpu})
        yield
    finally:
        spin.kill()
        spin.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("other", type=Path, nargs="?", help="the tree to compare with")
    ap.add_argument("--case", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=["resnet50", "squeezenet"])
    ap.add_argument("--threads", nargs="+", type=int, default=[2, 1], choices=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy-cpu", type=int, default=None,
                    help="keep a busy loop pinned to this CPU throughout")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.case:
        model, threads, cache = args.case
        print(json.dumps(case(model, int(threads), Path(cache))))
        return
    if args.other is None:
        ap.error("the other tree is required")
    rows = ["| model | threads | round | this / onnxruntime | other / onnxruntime | this ms "
            "| other ms | load |", "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp, busy(args.busy_cpu):
        for model in args.models:
            for threads in args.threads:
                for r in range(1, args.rounds + 1):
                    new = run_case(ROOT, model, threads, Path(tmp) / "this")
                    old = run_case(args.other.resolve(), model, threads, Path(tmp) / "other")
                    rows.append(
                        f"| {model} | {threads} | {r} "
                        f"| {new['build'] / new['onnxruntime']:.2f} "
                        f"| {old['build'] / old['onnxruntime']:.2f} | {new['build']:.2f} "
                        f"| {old['build']:.2f} | {new['load']:.2f}/{old['load']:.2f} |")
                    print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
