"""A model's kernels as this tree schedules them against another tree's (issue 32).

    python experiments/bench_kernels_ab.py OLD_TREE [--models bert_base] [--threads 1 2]
        [--rounds 3] [--out FILE]

Per model and thread count, every kernel of the runtime's program (``host``'s ``cpu`` for two
threads, ``core0`` for one, the process then on CPU 0) whose default schedule differs
between the two trees is built by each tree as its runtime's libraries hold it (through
``split_kernel``: scheduled as a build schedules it, its packs split off) and timed alone
(TVM's ``time_evaluator``, 10 calls of at least 20 ms), each tree in a process of its own,
the two alternating for ``--rounds`` rounds, the fastest kept. A row per kernel (its calls
in the model beside it) and a total row weighted by the calls, the load printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()


def worker(model: str, threads: int, names: list[str]) -> dict:
    """Schedule hashes (no ``names``) or times in us of ``names`` in this process's tree."""
    os.environ["TVM_NUM_THREADS"] = str(threads)
    import tvm

    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import split_kernel

    if threads == 1:
        os.sched_setaffinity(0, {0})
    profile = load_profile("host")
    program = runtime_program(*load_module(model), profile)
    target = tvm.target.Target(profile.unit("core0" if threads == 1 else "cpu").target)
    if not names:
        calls = {}
        for k in program.kernels:
            calls[k.func] = calls.get(k.func, 0) + 1
        return {n: [_hash(split_kernel(program, n, target)[0]), calls.get(n, 0)]
                for n in sorted(program.funcs)}
    return {n: _time(split_kernel(program, n, target)[0], target) for n in names}


def _hash(func) -> str:
    return hashlib.sha256(func.script().encode()).hexdigest()[:16]


def _time(func, target) -> float:
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.so"
        lib.export_library(str(path))
        loaded = tvm.runtime.load_module(str(path))
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape])
                               .astype(str(p.ty.dtype))) for p in func.params]
    timer = loaded.time_evaluator("main", tvm.cpu(), number=10, repeat=1, min_repeat_ms=20)
    return min(min(timer(*args).results) for _ in range(3)) * 1e6


def run(tree: Path, model: str, threads: int, names: list[str]) -> dict:
    """:func:`worker` in a fresh process importing ``tree``'s package."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(HERE), "--worker", model, str(threads), *names],
                         capture_output=True, text=True, cwd=tempfile.gettempdir(), env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{tree} {model} x{threads}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(old: Path, model: str, threads: int, rounds: int) -> list[str]:
    this = HERE.parents[1]
    before, after = run(old, model, threads, []), run(this, model, threads, [])
    changed = [n for n in after if n in before and before[n][0] != after[n][0]]
    best = {t: {n: float("inf") for n in changed} for t in ("old", "this")}
    for _ in range(rounds if changed else 0):
        for label, tree in (("old", old), ("this", this)):
            for n, us in run(tree, model, threads, changed).items():
                best[label][n] = min(best[label][n], us)
    calls = {n: after[n][1] for n in changed}
    rows = [f"| {model} | {threads} | {n} | {calls[n]} | {best['old'][n]:.1f} | "
            f"{best['this'][n]:.1f} | {best['this'][n] / best['old'][n]:.2f} |"
            for n in changed]
    old_sum = sum(best["old"][n] * calls[n] for n in changed)
    new_sum = sum(best["this"][n] * calls[n] for n in changed)
    if changed:
        rows.append(f"| {model} | {threads} | **all {len(changed)}, x calls** | "
                    f"{sum(calls.values())} | {old_sum:.0f} | {new_sum:.0f} | "
                    f"**{new_sum / old_sum:.2f}** |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path, nargs="?")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=["bert_base"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2], choices=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.worker:
        model, threads, *names = args.worker
        print(json.dumps(worker(model, int(threads), names)))
        return
    lines = ["| model | threads | kernel | calls | old us | this us | this / old |",
             "|---|---|---|---|---|---|---|"]
    for model in args.models:
        for threads in args.threads:
            lines += compare(args.old, model, threads, args.rounds)
    text = (f"`python experiments/bench_kernels_ab.py {' '.join(sys.argv[1:])}`, load "
            f"{os.getloadavg()[0]:.2f}\n\n" + "\n".join(lines))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
