"""Weights packed once at load against packed per call (issue 32): per conv, and per model.

    python experiments/bench_weight_packing.py --kernels [--model resnet50] [--mcpu x86-64-v4]
    python experiments/bench_weight_packing.py --ms 64 --model squeezenet [--names ...]

``--kernels``: each conv kernel of the model with this tree's default schedule on two
threads (the ``host`` profile's ``cpu``), its weight packed inside the kernel on every call
("per call": a kernel whose weight is not marked layout free) and packed once, the compute
timed alone ("once": :mod:`autoplace.deploy.prepack`), interleaved for ``--rounds``, the
fastest of each kept; a total row (each kernel times its count in the model).

``--ms TRIALS [--model squeezenet --names ...]``: per kernel, the default schedule (weights
packed once) against MetaSchedule's best of TRIALS on the kernel as it is and on the kernel
with its weights marked layout free (MetaSchedule's ``RewriteLayout``), each timed without
its packing.

(Two trees' builds of whole models, each beside ONNX Runtime, were this script's ``--old``;
they are :mod:`bench_deployed_ab` now, which gives the ratio of every round.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np


def compare_kernels(model: str, mcpu: str, rounds: int) -> None:
    """A row per conv kernel: us per call packed per call and packed once."""
    import tvm
    from bench_conv_schedules import timer

    from autoplace.deploy.prepack import mark_weights, split_packs
    from autoplace.deploy.schedule import default_schedule
    from autoplace.models import load_module
    from autoplace.runtime.program import read_program

    mod, graph = load_module(model)
    program = read_program(mod)
    count = {}
    for op in graph.ops:
        count[op.func] = count.get(op.func, 0) + 1
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": mcpu})
    total = {"per call": 0.0, "once": 0.0}
    print(f"`python experiments/bench_weight_packing.py --kernels --model {model} --mcpu "
          f"{mcpu}`, two threads\n\n| kernel | count | per call us | once us | once/per call "
          "| load |\n|---|---|---|---|---|---|")
    for name in sorted(f for f in count if "conv" in f):
        func = mod[name]
        once, packs = split_packs(default_schedule(
            mark_weights(func, program.weight_params(name)), target), 1)
        timers = {"per call": timer(default_schedule(func, target), target, _args(func)),
                  "once": timer(once, target, _args(once))}
        best = {k: min(t() for _ in range(rounds)) * 1e6 for k, t in timers.items()}
        for k in total:
            total[k] += best[k] * count[name]
        print(f"| {name}{'' if packs else ' (no pack)'} | {count[name]} | "
              f"{best['per call']:.0f} | {best['once']:.0f} | "
              f"{best['once'] / best['per call']:.2f} | {os.getloadavg()[0]:.2f} |", flush=True)
    print(f"| **all (each times its count)** | | {total['per call']:.0f} | {total['once']:.0f} "
          f"| {total['once'] / total['per call']:.2f} | {os.getloadavg()[0]:.2f} |")


def compare_ms(model: str, names: list[str], trials: int, mcpu: str) -> None:
    """A row per kernel: the default schedule (weights packed once), MetaSchedule's best of
    ``trials`` on the kernel as it is, and on the kernel with its weights marked layout
    free (MetaSchedule's RewriteLayout then packs them; timed without the pack)."""
    import time

    import tvm
    from bench_conv_schedules import timer
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import LocalBuilder
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, LocalRunner
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    from autoplace.deploy.prepack import mark_weights, split_packs
    from autoplace.deploy.schedule import default_schedule
    from autoplace.models import load_module
    from autoplace.runtime.program import read_program

    mod, _ = load_module(model)
    program = read_program(mod)
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": mcpu})
    print(f"| kernel | default us | MS-{trials} us | MS-{trials} layout free us | tuning s "
          "(as is / layout free) | load |\n|---|---|---|---|---|---|")
    for name in names:
        func = mod[name].with_attr("global_symbol", "main")
        free = mark_weights(func, program.weight_params(name))
        best = {"default": split_packs(default_schedule(free, target), 1)[0]}
        secs = {}
        for label, kernel in (("as is", func), ("free", free)):
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as work:
                db = ms.tune_tir(tvm.IRModule({"main": kernel}), target, work, trials,
                                 num_trials_per_iter=32, seed=0, num_tuning_cores=1,
                                 builder=LocalBuilder(max_workers=1, timeout_sec=120),
                                 runner=LocalRunner(timeout_sec=60, evaluator_config=
                                                    EvaluatorConfig(number=3, repeat=1,
                                                                    min_repeat_ms=20)))
                sch = ms.tir_integration.compile_tir(db, tvm.IRModule({"main": kernel}), target)
            secs[label] = time.perf_counter() - t0
            best[label] = RemoveWeightLayoutRewriteBlock(True)(sch.mod)["main"]
        us = {k: min(timer(f, target, _args(f))() for _ in range(3)) * 1e6
              for k, f in best.items()}
        print(f"| {name} | {us['default']:.0f} | {us['as is']:.0f} | {us['free']:.0f} | "
              f"{secs['as is']:.0f} / {secs['free']:.0f} | {os.getloadavg()[0]:.2f} |",
              flush=True)


def _args(func) -> list:
    import tvm

    rng = np.random.default_rng(0)
    return [tvm.runtime.tensor(rng.random([int(d) for d in p.ty.shape], dtype=np.float32))
            for p in func.params]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--mcpu", default="x86-64-v4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ms", type=int, metavar="TRIALS")
    ap.add_argument("--names", nargs="+", default=["fused_conv2d15_add8_relu8",
                                                   "fused_conv2d4_add1_relu1"])
    args = ap.parse_args()
    if args.ms:
        os.environ.setdefault("TVM_NUM_THREADS", "2")
        compare_ms(args.model, args.names, args.ms, args.mcpu)
    elif args.kernels:
        os.environ.setdefault("TVM_NUM_THREADS", "2")
        compare_kernels(args.model, args.mcpu, max(args.rounds, 3))
    else:
        ap.error("give --kernels or --ms TRIALS (two trees' builds: bench_deployed_ab.py)")


if __name__ == "__main__":
    sys.exit(main())
