"""The default kernel schedule against the unscheduled kernels and today's ``parallel_outer``
(issue 32, section 1).

Tables (markdown, the load average printed beside every row; same machine, same minute):

1. ``kernels``: per model, per kernel kind (the graph's op kinds), the kernels of that kind
   with the most FLOPs (``--per-kind``; conv2d: ``--convs``), each timed unscheduled
   ("naive", one thread), with the outer loops parallel (``parallel_outer``: what builds
   did before) and with :func:`autoplace.deploy.schedule.default_schedule`, all for the
   host profile's ``cpu`` unit (both cores, AVX-512) in a pool of its two threads, and
   unscheduled for its target without ``mcpu`` ("naive x86-64": LLVM's baseline CPU, as
   the profile was); the ratios.
2. ``models``: per model, the whole model with every op on ``cpu``, run by the project's
   runtime, its kernels built as before ("before": ``parallel_outer`` for the profile's
   targets without their ``mcpu``, LLVM's baseline x86-64, as the profile was), with
   ``parallel_outer`` and with the default schedule, against ONNX Runtime on the same ONNX
   file with 2 threads; the ratios. (Without ``mcpu``, LLVM's own vectorisation of the
   unscheduled loops avoids AVX-512's gathers: "before" is the faster baseline.)

Every measurement is interleaved (A, B, C, A, B, C, ...) and the fastest round is kept: the
machine is shared and noisy. Run from the repository root:
``python experiments/bench_schedules.py [--models squeezenet resnet50] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROUNDS = 3


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows])


def schedules(target) -> dict:
    """name -> PrimFunc -> the PrimFunc built: the three builds compared."""
    from autoplace.deploy.nest_rules import parallel_outer
    from autoplace.deploy.schedule import default_schedule

    return {"naive": lambda pf: pf, "parallel_outer": parallel_outer,
            "default": lambda pf: default_schedule(pf, target)}


# -- 1. kernels -----------------------------------------------------------------------------
def representatives(graph, per_kind: int, convs: int) -> list[tuple[str, str]]:
    """(kind, kernel) of the kernels with the most FLOPs of each kind."""
    best: dict[str, dict[str, float]] = defaultdict(dict)
    for op in graph.ops:
        best[op.kind][op.func or op.name] = op.flops
    out = []
    for kind, funcs in sorted(best.items()):
        top = sorted(funcs, key=lambda f: -funcs[f])[:convs if kind == "conv2d" else per_kind]
        out += [(kind, f) for f in top]
    return out


def kernel_rows(name: str, target, per_kind: int, convs: int) -> list[dict]:
    import tvm

    from autoplace.models import load_module

    mod, graph = load_module(name)
    chosen = representatives(graph, per_kind, convs)
    baseline = tvm.target.Target({k: v for k, v in target.export().items()
                                  if k in ("kind", "num-cores")})  # no mcpu: x86-64
    builds = {"naive x86-64": (baseline, lambda pf: pf)}
    builds.update({label: (target, build) for label, build in schedules(target).items()})
    libs = {label: tvm.compile(tvm.IRModule({f: build(mod[f]).with_attr("global_symbol", f)
                                             for _, f in chosen}), target=tgt).jit()
            for label, (tgt, build) in builds.items()}
    rows, rng, dev = [], np.random.default_rng(0), tvm.cpu()
    for kind, f in chosen:
        args = [tvm.runtime.tensor(rng.random([int(d) for d in p.ty.shape])
                                   .astype(str(p.ty.dtype)), device=dev) for p in mod[f].params]
        best = {label: float("inf") for label in libs}
        for _ in range(ROUNDS):
            for label, lib in libs.items():
                timer = lib.time_evaluator(f, dev, number=1, repeat=5, min_repeat_ms=20)
                best[label] = min(best[label], min(timer(*args).results))
        rows.append(kernel_row(name, kind, f, best))
    return rows


def kernel_row(model: str, kind: str, func: str, best: dict[str, float]) -> dict:
    ms = {k: v * 1e3 for k, v in best.items()}
    return {"model": model, "kind": kind, "kernel": func,
            "naive x86-64 ms": f"{ms['naive x86-64']:.3f}", "naive ms": f"{ms['naive']:.3f}",
            "parallel_outer ms": f"{ms['parallel_outer']:.3f}",
            "default ms": f"{ms['default']:.3f}",
            "naive x86-64 / default": f"{ms['naive x86-64'] / ms['default']:.1f}",
            "naive / default": f"{ms['naive'] / ms['default']:.1f}",
            "parallel_outer / default": f"{ms['parallel_outer'] / ms['default']:.1f}",
            "load": load()}


# -- 2. whole models ------------------------------------------------------------------------
def model_row(name: str, profile, cache: Path) -> dict:
    """The model on ``cpu`` by the runtime, built three ways, against ONNX Runtime."""
    from autoplace.models import load_module
    from autoplace.space import SearchSpace

    mod, graph = load_module(name)
    placement = SearchSpace(graph, profile).uniform("cpu")
    builds = {"before": (without_mcpu(profile), "parallel_outer"),
              "parallel_outer": (profile, "parallel_outer"), "default": (profile, "default")}
    built = {label: runtime_of(mod, graph, placement, prof, how, cache / f"{name}-{label}")
             for label, (prof, how) in builds.items()}
    specs = built["default"][0].program.inputs
    x = [np.random.default_rng(0).random(s.shape).astype(s.dtype) for s in specs]
    outs = [rt.run(a, x)[0] for rt, a in built.values()]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=1e-3, atol=1e-5)
    return model_times(name, built, onnx_session(name), x)


def without_mcpu(profile):
    """``profile`` with no ``mcpu`` in its units' targets (as it was before the default
    schedule: LLVM's baseline x86-64 CPU)."""
    import dataclasses

    units = tuple(dataclasses.replace(u, target={k: v for k, v in u.target.items()
                                                 if k != "mcpu"}) for u in profile.units)
    return dataclasses.replace(profile, units=units)


def runtime_of(mod, graph, placement, profile, how: str, cache: Path):
    """(runtime, assembled placement), its kernels built with schedule ``how``."""
    import autoplace.runtime.libraries as libraries
    from autoplace.deploy.targets import unit_target
    from autoplace.runtime import Runtime

    build = schedules(unit_target(profile.unit("cpu"), profile))[how]
    scheduled = libraries.default_schedule
    # the runtime builds with ``default_schedule``: this comparison swaps it, each build in
    # its own cache (the cache key does not name the schedule)
    libraries.default_schedule = lambda pf, _target: build(pf)
    try:
        rt = Runtime(mod, graph, profile, cache_dir=cache)
        return rt, rt.assemble(placement)
    finally:
        libraries.default_schedule = scheduled


def onnx_session(name: str):
    import onnxruntime as ort

    from autoplace.models import bundled_onnx_path

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    return ort.InferenceSession(str(bundled_onnx_path(name)), so,
                                providers=["CPUExecutionProvider"])


def model_times(name: str, built: dict, session, x: list) -> dict:
    from autoplace.deploy.run import TimeSettings

    feed = {session.get_inputs()[0].name: x[0]}
    settings = TimeSettings(number=1, repeat=5, warmup=1)
    best = {label: float("inf") for label in [*built, "onnxruntime"]}
    session.run(None, feed)
    for _ in range(ROUNDS):
        for label, (rt, a) in built.items():
            best[label] = min(best[label], *rt.time(a, settings))
        best["onnxruntime"] = min(best["onnxruntime"], ort_time(session, feed))
    ms = {k: v * 1e3 for k, v in best.items()}
    for rt, _ in built.values():
        rt.close()
    return {"model": name, "before ms": f"{ms['before']:.2f}",
            "parallel_outer ms": f"{ms['parallel_outer']:.2f}",
            "default ms": f"{ms['default']:.2f}", "onnxruntime ms": f"{ms['onnxruntime']:.2f}",
            "before / default": f"{ms['before'] / ms['default']:.1f}",
            "parallel_outer / default": f"{ms['parallel_outer'] / ms['default']:.1f}",
            "default / onnxruntime": f"{ms['default'] / ms['onnxruntime']:.2f}",
            "load": load()}


def ort_time(session, feed, repeat: int = 5) -> float:
    """Seconds of ONNX Runtime's fastest of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    ap.add_argument("--per-kind", type=int, default=1)
    ap.add_argument("--convs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("experiments/results/bench_schedules.md"))
    args = ap.parse_args()
    from autoplace.deploy.schedule import use_threads
    from autoplace.deploy.targets import unit_target
    from autoplace.hardware.load import load_profile

    profile = load_profile("host")
    use_threads(len(profile.unit("cpu").cpus))  # the cpu unit's pool: both cores
    target = unit_target(profile.unit("cpu"), profile)
    kernels = [r for m in args.models for r in kernel_rows(m, target, args.per_kind, args.convs)]
    print(markdown(kernels), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        models = [model_row(m, profile, Path(tmp)) for m in args.models]
    print(markdown(models), flush=True)
    text = (f"# bench_schedules\n\ntarget: `{target}`; `load`: the 1-minute load average "
            f"as each row was measured (2 CPUs; above 2 the rows' times are inflated, the "
            f"2-thread ones most)\n\n## kernels\n\n{markdown(kernels)}\n\n## models (every "
            f"op on `cpu`, by the runtime)\n\n{markdown(models)}\n")
    args.out.write_text(text)


if __name__ == "__main__":
    main()
