"""Where autoplace's build loses to ONNX Runtime, op by op (issue 32).

    python experiments/bench_ops_vs_ort.py [--model squeezenet] [--threads 1] [--runs 40]

ONNX Runtime runs the bundled ONNX file with its profiler on (``intra_op_num_threads`` =
threads, 300 runs, the median of each node's kernel time over the last 250); autoplace's
build with default schedules (every op on the ``host`` profile's unit of that many threads)
runs ``--runs`` times in the runtime, the median of each op's time from the runtime's trace
(:attr:`autoplace.runtime.Runtime.last_trace`: an op's time inside whole runs, as it
really runs, caches as the ops before it left them). Printed: the totals per kind of op, then
a row per conv, matched to ONNX Runtime's node of the same weight shape (in program order;
output channels in blocks of 16, as its NCHWc convs pad them),
the largest loss first. The load is printed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

CONVS = ("Conv", "FusedConv")


def ort_nodes(model: str, threads: int, out_dir: str) -> list[dict]:
    """ONNX Runtime's nodes in run order: op type, weight shape, median us."""
    import onnxruntime as ort

    from autoplace.models import bundled_onnx_path

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.enable_profiling, so.profile_file_prefix = True, str(Path(out_dir) / "ort")
    session = ort.InferenceSession(str(bundled_onnx_path(model)), so,
                                   providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0]
    x = np.random.default_rng(0).random(
        [d if isinstance(d, int) else 1 for d in feed.shape]).astype(np.float32)
    for _ in range(300):
        session.run(None, {feed.name: x})
    events = [e for e in json.loads(Path(session.end_profiling()).read_text())
              if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    times, first = collections.defaultdict(list), {}
    for e in events:
        times[e["name"]].append(e["dur"])
        first.setdefault(e["name"], e["args"])
    return [{"op": a["op_name"], "us": float(np.median(times[n][50:])),
             "weight": _weight_shape(a)} for n, a in first.items()]


def _weight_shape(args: dict):
    shapes = args.get("input_type_shape") or []
    return tuple(next(iter(shapes[1].values()))) if len(shapes) > 1 else None


def our_ops(model: str, threads: int, runs: int, cache: str) -> list[dict]:
    """autoplace's ops in program order: kind, weight shape, median us inside whole runs."""
    from autoplace.deploy.run import TimeSettings
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime import Runtime

    mod, graph = load_module(model)
    with Runtime(mod, graph, load_profile("host"), cache_dir=cache) as rt:
        placed = rt.assemble(rt.space.uniform({1: "core0", 2: "cpu"}[threads]))
        x = np.random.default_rng(0).random(rt.program.inputs[0].shape).astype(np.float32)
        rt.run(placed, [x])
        per = collections.defaultdict(list)
        for _ in range(runs):
            rt.time(placed, TimeSettings(number=1, repeat=1, warmup=0))
            trace = rt.last_trace
            for i, w in enumerate(placed.schedule.work):
                if w.kind == "op":
                    per[w.op].append((trace.end[i] - trace.start[i]) / 1e3)
        program = rt.program
    out = []
    for k, op in enumerate(graph.ops):
        weights = [program.weights[a[1]].shape for a in program.kernels[k].args
                   if a[0] == "weight"]
        out.append({"name": op.name, "kind": op.kind, "us": float(np.median(per[k])),
                    "weight": tuple(weights[0]) if weights else None})
    return out


def report(model: str, threads: int, ours: list[dict], theirs: list[dict]) -> None:
    load = os.getloadavg()[0]
    print(f"`python experiments/bench_ops_vs_ort.py --model {model} --threads {threads}`, "
          f"load {load:.2f}\n")
    kinds, types = collections.Counter(), collections.Counter()
    for o in ours:
        kinds[o["kind"]] += o["us"]
    for t in theirs:
        types[t["op"]] += t["us"]
    print(f"autoplace {sum(kinds.values()):.0f} us in all: " + ", ".join(
        f"{k} {v:.0f}" for k, v in kinds.most_common()))
    print(f"ONNX Runtime {sum(types.values()):.0f} us in all: " + ", ".join(
        f"{k} {v:.0f}" for k, v in types.most_common()) + "\n")
    pool = collections.defaultdict(list)
    for t in theirs:
        if t["op"] in CONVS:
            pool[_blocked(t["weight"])].append(t["us"])
    rows = [(o["name"], o["weight"], o["us"], pool[_blocked(o["weight"])].pop(0))
            for o in ours if o["kind"] == "conv2d" and pool.get(_blocked(o["weight"]))]
    print("| conv | weight | autoplace us | ONNX Runtime us | ratio |\n|---|---|---|---|---|")
    for name, w, a, b in sorted(rows, key=lambda r: r[3] - r[2]):
        print(f"| {name} | {'x'.join(map(str, w))} | {a:.0f} | {b:.0f} | {a / b:.2f} |")
    unmatched = sum(o["kind"] == "conv2d" for o in ours) - len(rows)
    if unmatched:
        print(f"\n({unmatched} convs without a node of their weight's shape: ONNX Runtime "
              "fused or reshaped them)")


def _blocked(weight: tuple) -> tuple:
    """A conv weight's shape, its output channels rounded up to a block of 16 (ONNX
    Runtime's NCHWc convs pad 1000 channels to 1008)."""
    return (-(-weight[0] // 16) * 16, *weight[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # (before TVM makes its pool)
    with tempfile.TemporaryDirectory() as tmp:
        theirs = ort_nodes(args.model, args.threads, tmp)
        ours = our_ops(args.model, args.threads, args.runs, tmp)
    report(args.model, args.threads, ours, theirs)


if __name__ == "__main__":
    sys.exit(main())
