"""What folding the graph would give resnet50's build (issue 32, not in the frontend yet).

    python experiments/bench_graph_folding.py [--model resnet50] [--threads 1 2]

The bundled resnet50 imports as 145 ops: 53 convs, each followed by its own batch norm, and
each residual sum imported as ``sum(stack(broadcast_to(a), broadcast_to(b)))`` then a relu.
ONNX Runtime folds the norms into the convs' weights and the sums and relus into the convs.
Here the imported module is folded the same way before autoplace fuses it
(:func:`autoplace.frontend.relax.from_relax`): TVM's ``FoldBatchnormToConv2D`` (after
``fold_weights`` and ``ConvertToDataflow``, which it needs to see constant weights through
bindings), and each such sum of two tensors of the output's shape rewritten as an ``add``
(so that FuseOps fuses it, and the relu, into the conv before it). Printed: the op counts by
kind, then autoplace's build with default schedules (every op on the ``host`` profile's
unit of that many threads) of the module as autoplace imports it today and folded, and ONNX
Runtime, interleaved (3 rounds of 5 runs, the fastest kept), with the load.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def folded(model: str):
    """The model's imported module with its norms folded into convs and its two-tensor
    sums as adds."""
    from tvm import relax
    from tvm.relax.dpl import is_op, is_tuple, rewrite_call, wildcard

    from autoplace.frontend.relax import fold_weights
    from autoplace.models import import_model

    mod = relax.transform.ConvertToDataflow()(fold_weights(import_model(model)))
    mod = relax.transform.FoldBatchnormToConv2D()(mod)
    a, b = wildcard(), wildcard()
    pattern = is_op("relax.sum")(is_op("relax.stack")(is_tuple([
        is_op("relax.broadcast_to")(a, wildcard()), is_op("relax.broadcast_to")(b, wildcard())])))

    def as_add(expr, matches):
        same = all(list(matches[v].ty.shape) == list(expr.ty.shape) for v in (a, b))
        return relax.op.add(matches[a], matches[b]) if same else expr

    mod["main"] = rewrite_call(pattern, as_add, mod["main"])
    return mod


def timers(model: str, threads: int, cache: Path) -> dict:
    """ms of ONNX Runtime and of the two builds, interleaved."""
    from bench_deployed import onnx_session, runtime_timer
    from bench_schedules import ort_time

    from autoplace.frontend.relax import from_relax
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module

    builds = {"today": load_module(model), "folded": from_relax(folded(model), f"{model}-folded")}
    for label, (_, graph) in builds.items():
        kinds = collections.Counter(op.kind for op in graph.ops).most_common()
        print(f"{label}: {len(graph.ops)} ops ({', '.join(f'{k} {n}' for k, n in kinds)})")
    session = onnx_session(model, threads)
    feed = session.get_inputs()[0]
    x = np.random.default_rng(0).random(
        [d if isinstance(d, int) else 1 for d in feed.shape]).astype(np.float32)
    expected = session.run(None, {feed.name: x})[0]
    run = {"onnxruntime": lambda: ort_time(session, {feed.name: x}, 5)}
    runtimes = []
    for label, (mod, graph) in builds.items():
        run[label], rt = runtime_timer(mod, graph, load_profile("host"), threads, x, expected,
                                       cache / label, None)
        runtimes.append(rt)
    best = {k: min(t() for _ in range(3)) * 1e3 for k, t in run.items()}
    for rt in runtimes:
        rt.close()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # (before TVM makes its pool)
    with tempfile.TemporaryDirectory() as tmp:
        best = timers(args.model, args.threads, Path(tmp))
    print(f"\n| model | threads | ONNX Runtime ms | today ms | folded ms | folded/today | "
          f"folded/ONNX Runtime | load |\n|---|---|---|---|---|---|---|---|\n"
          f"| {args.model} | {args.threads} | {best['onnxruntime']:.2f} | {best['today']:.2f} | "
          f"{best['folded']:.2f} | {best['folded'] / best['today']:.2f} | "
          f"{best['folded'] / best['onnxruntime']:.2f} | {os.getloadavg()[0]:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
