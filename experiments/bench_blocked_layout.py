"""Blocked (NCHWc) activations between a model's kernels against plain (NCHW) ones, op by op
(issue 32: the layout between convs, where the gap to ONNX Runtime was).

    python experiments/bench_blocked_layout.py [--model squeezenet] [--threads 1] [--runs 30]

The model's :class:`~autoplace.runtime.program.Program` as the runtime runs it (its
activations blocked: :func:`autoplace.runtime.layout.runtime_program`) and as it was before
(plain: ``read_program``), both built with the default schedules
(:mod:`autoplace.deploy.cpu_rules`) for the ``host`` profile's unit of ``--threads``, every op
on it; the outputs compared, and each op's median time inside ``--runs`` whole runs of each
(interleaved; the runtime's trace) printed side by side with the
ratio, then the totals and the load.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def op_times(programs, graph, unit: str, x, runs: int) -> tuple[list, list]:
    """Per program, its output and per op the median us inside ``runs`` whole runs (the
    programs' runs interleaved, each in a runtime of its own)."""
    from autoplace.deploy.run import TimeSettings
    from autoplace.hardware.load import load_profile
    from autoplace.runtime import Runtime

    with contextlib.ExitStack() as stack:
        rts = [stack.enter_context(Runtime(p, graph, load_profile("host"), cache_dir=Path(
            stack.enter_context(tempfile.TemporaryDirectory())))) for p in programs]
        placed = [rt.assemble(rt.space.uniform(unit)) for rt in rts]
        outs = [rt.run(pl, [x])[0] for rt, pl in zip(rts, placed)]
        per = [collections.defaultdict(list) for _ in rts]
        for _ in range(runs):
            for rt, pl, times in zip(rts, placed, per):
                rt.time(pl, TimeSettings(number=1, repeat=1, warmup=0))
                trace = rt.last_trace
                for i, w in enumerate(pl.schedule.work):
                    if w.kind == "op":
                        times[w.op].append((trace.end[i] - trace.start[i]) / 1e3)
    return outs, [[float(np.median(t[k])) for k in range(len(graph.ops))] for t in per]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--threads", type=int, default=1, choices=(1, 2))
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # (before TVM makes its pool)
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.program import read_program

    mod, graph = load_module(args.model)
    plain, blocked = read_program(mod), runtime_program(mod, graph, load_profile("host"))
    n = sum(a != b for k, kb in zip(plain.kernels, blocked.kernels)
            for a, b in zip(k.outputs, kb.outputs))
    x = np.random.default_rng(0).random(plain.inputs[0].shape).astype(np.float32)
    unit = {1: "core0", 2: "cpu"}[args.threads]
    (want, got), (before, after) = op_times([plain, blocked], graph, unit, x, args.runs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    tensors = sum(len(k.outputs) for k in plain.kernels)
    print(f"`python experiments/bench_blocked_layout.py --model {args.model} --threads "
          f"{args.threads}`: {n} of {tensors} activations blocked, "
          "outputs equal; us per op inside whole runs\n")
    print("| op | kind | plain us | blocked us | blocked / plain |\n|---|---|---|---|---|")
    for op, p, q in zip(graph.ops, before, after):
        print(f"| {op.name} | {op.kind} | {p:.1f} | {q:.1f} | {q / p:.2f} |")
    print(f"| all | | {sum(before):.1f} | {sum(after):.1f} | {sum(after) / sum(before):.2f} |")
    print(f"\nload {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
