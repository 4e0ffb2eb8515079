"""Offload: autoplace's searched placement against TVM's greedy offload and MATCH's per-node
greedy on the ``npu`` profile (issue 29, part 4).

    python experiments/bench_offload.py [--models ...] [--trials 512] [--seed 0] [--out FILE]

Per model, in a fresh process, three placements, each measured by the simulator:

- ``(a) TVM greedy``: what BYOC's FuseOpsByPattern + MergeCompositeFunctions do without a
  check, within the space: every graph match of the npu's pattern table on the npu, the
  rest on the cpu, all in DRAM (the default scope: no copies). A graph match covers whole
  fused kernels; TVM unchecked also matches inside one (a matmul + bias whose kernel adds
  a residual): the table counts the composites it would make beside the graph's;
- ``(b) MATCH greedy`` (eml-eda/match's per-node choice): ops in order; at an op not yet
  placed, the longest match (most ops) of the npu's table over it goes to the unit whose
  per-op times (``SearchSpace.seconds_of`` in DRAM, summed over the match's ops) are the
  smaller; ops no match covers go to the cpu; all in DRAM;
- ``(c) autoplace``: ``autoplace tune MODEL --hw npu --trials T --seed S`` (the default
  strategy, the simulator as measurer; its baselines come on top of the T trials): its best.

Each is then partitioned as the build does (``deploy.offload.partition``, the npu given the
``autoplace_ref`` code generator): the npu's regions (``Offload.regions``: the region
calls in ``main``, the placed groups and how many the merge split (``Offload.split``). The issue's
goal: (c) <= (a) and (c) <= (b) on every model, strictly below both on at least half.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
MODELS = ("resnet50", "inception_v1", "bert_base", "vit_tiny", "squeezenet", "bert_tiny",
          "gpt2_block")
HW, NPU, CPU, DRAM, CODEGEN = "npu", "npu", "cpu", "dram", "autoplace_ref"
LABELS = ("a", "b", "c")
TIE = 1e-9  # relative: latencies closer than this are equal (rounding)


def load() -> float:
    return os.getloadavg()[0]


# -- the two greedy placements ------------------------------------------------------------
def npu_matches(space) -> list:
    """The graph's matches whose pattern is in the npu's table, in graph order."""
    table = space.profile.unit(NPU).patterns
    return [m for m in space.graph.matches if m.pattern in table]


def in_dram(space, unit_of: dict[int, str]):
    """The placement of each op ``i`` on ``unit_of[i]`` (default: the cpu), all in DRAM."""
    from autoplace.space import Placement

    ops = {op.name: (unit_of.get(i, CPU), DRAM) for i, op in enumerate(space.graph.ops)}
    return Placement(ops=ops, copies={})


def tvm_greedy(space):
    """(a): every match of the npu's table on the npu."""
    return in_dram(space, {i: NPU for m in npu_matches(space) for i in m.ops})


def seconds(space, ops, unit: str) -> float:
    """The simulator's time of ``ops`` on ``unit`` in DRAM, weights streamed."""
    return sum(space.seconds_of(i, unit, DRAM, "streamed") for i in ops)


def match_greedy(space):
    """(b): per op in order, the longest free match over it on its faster unit."""
    matches, unit_of = npu_matches(space), {}
    for i in range(len(space.graph.ops)):
        if i in unit_of:
            continue
        free = [m for m in matches if i in m.ops and not unit_of.keys() & set(m.ops)]
        if not free:
            unit_of[i] = CPU
            continue
        m = max(free, key=lambda m: len(m.ops))  # (the first of the longest)
        faster = NPU if seconds(space, m.ops, NPU) < seconds(space, m.ops, CPU) else CPU
        unit_of.update({j: faster for j in m.ops})
    return in_dram(space, unit_of)


# -- the search ---------------------------------------------------------------------------
def searched(space, trials: int, seed: int) -> dict:
    """(c): the default tuner's best (as ``autoplace tune``), its wall time and the best of
    its named baselines."""
    from autoplace.measure.simulator import Simulator
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune

    config = TuneConfig(trials=trials, seed=seed, progress=False)
    with tempfile.TemporaryDirectory() as d, TuningLog(Path(d) / "log.jsonl") as log:
        result = tune(space, Simulator(space), log, config)
    base = [r.result.latency_s for r in result.baselines.values() if r.result.ok]
    return {"placement": result.best.placement, "latency_s": result.best.result.latency_s,
            "tune_s": result.wall_s, "measured": result.measured,
            "found_by": result.best.strategy,
            "baseline_s": min(base, default=None)}


def composition(space, placement) -> dict:
    """How many ops are on the npu, outside DRAM, and how many copies are async."""
    where = list(placement.ops.values())
    return {"npu_ops": sum(u == NPU for u, _ in where),
            "off_dram_ops": sum(s != DRAM for _, s in where),
            "async": sum(m == "async" for m in placement.copies.values())}


# -- the build's partition ----------------------------------------------------------------
def with_codegen(profile):
    """``profile`` with the npu built by the reference accelerator's code generator."""
    units = tuple(dataclasses.replace(u, codegen=CODEGEN) if u.name == NPU else u
                  for u in profile.units)
    return dataclasses.replace(profile, units=units)


def partitioned(mod, graph, placement, profile) -> dict:
    """The npu's regions, placed groups and split groups of ``placement``'s partition (an
    error's text instead if it fails)."""
    from autoplace.deploy.offload import partition

    t0 = time.perf_counter()
    try:
        _, off = partition(mod, graph, placement, profile)
    except Exception as exc:  # reported in the table: the benchmark goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"regions": off.regions[NPU], "groups": off.groups[NPU], "split": off.split,
            "matches": len(off.matches[NPU]), "partition_s": time.perf_counter() - t0}


def unchecked(mod, unit) -> int:
    """How many composites of ``unit``'s table TVM's FuseOpsByPattern makes in ``mod`` with
    no check (BYOC's greedy offload proper: it also matches part of a fused kernel, where
    a graph match covers whole kernels only)."""
    from tvm import relax
    from tvm.relax.backend.pattern_registry import FusionPattern

    from autoplace.frontend.fold import fold
    from autoplace.frontend.patterns import table
    from autoplace.patterns import PATTERNS

    patterns = [FusionPattern(f"{CODEGEN}.{n}", table()[n], {}) for n in reversed(PATTERNS)
                if n in unit.patterns]
    fused = relax.transform.FuseOpsByPattern(patterns, bind_constants=True)(fold(mod))
    composite = {gv for gv, f in fused.functions_items() if isinstance(f, relax.Function)
                 and f.attrs is not None and "Composite" in f.attrs}
    calls = []
    relax.analysis.post_order_visit(fused["main"], lambda e: calls.append(
        isinstance(e, relax.Call) and e.op in composite))
    return sum(calls)


# -- one model (a fresh process) ----------------------------------------------------------
def case(model: str, trials: int, seed: int) -> dict:
    """Latency, composition and partition of (a), (b) and (c) on ``model``."""
    from autoplace.frontend.onnx import import_onnx
    from autoplace.hardware.load import load_profile
    from autoplace.measure.simulator import Simulator
    from autoplace.models import bundled_onnx_path, load_graph
    from autoplace.space import SearchSpace

    space = SearchSpace(load_graph(model), load_profile(HW))
    greedy = {"a": tvm_greedy(space), "b": match_greedy(space)}
    problems = [f"({k}) {p.detail}" for k, pl in greedy.items() if (p := space.check(pl))]
    if problems:
        raise RuntimeError(f"{model}: invalid greedy placement: {'; '.join(problems)}")
    res = Simulator(space).measure(list(greedy.values()))
    c = searched(space, trials, seed)
    placements = {**greedy, "c": c.pop("placement")}
    latency = {k: r.latency_s for k, r in zip(greedy, res)} | {"c": c.pop("latency_s")}
    t0 = time.perf_counter()
    mod = import_onnx(bundled_onnx_path(model))  # as imported: the partition fuses it
    import_s, profile = time.perf_counter() - t0, with_codegen(space.profile)
    composites = len({m.ops for m in npu_matches(space)})  # (two patterns may match one op)
    return {"model": model, "ops": len(space.graph.ops), "matches": composites,
            "unchecked": unchecked(mod, profile.unit(NPU)),
            "latency_s": latency, "import_s": import_s, **c,
            "placed": {k: composition(space, p) for k, p in placements.items()},
            "partition": {k: partitioned(mod, space.graph, p, profile)
                          for k, p in placements.items()}, "load": load()}


def run_case(model: str, trials: int, seed: int) -> dict:
    cmd = ["nice", sys.executable, __file__, "--case", model, str(trials), str(seed)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return {"model": model, "error": out.stderr.strip().splitlines()[-1:],
                "wall_s": time.perf_counter() - t0}
    return json.loads(out.stdout.strip().splitlines()[-1]) | {
        "wall_s": time.perf_counter() - t0}


# -- the report ---------------------------------------------------------------------------
def verdict(row: dict) -> tuple[bool, bool]:
    """Whether (c) is at most (a) and (b), and strictly below both (beyond rounding)."""
    lat = row["latency_s"]
    low = min(lat["a"], lat["b"])
    return lat["c"] <= low * (1 + TIE), lat["c"] < low * (1 - TIE)


def _per(row: dict, field: str) -> str:
    """``a / b / c`` of a partition figure (``!`` where the partition failed)."""
    parts = row["partition"]
    return " / ".join(str(parts[k].get(field, "!")) for k in LABELS)


def table_row(r: dict) -> list[str]:
    if "latency_s" not in r:
        return [r["model"], f"failed: {' '.join(r['error'])}"] + ["–"] * (len(HEAD) - 2)
    lat, placed = r["latency_s"], r["placed"]
    at_most, below = verdict(r)
    return [r["model"], str(r["ops"]), f"{r['matches']} / {r['unchecked']}",
            *(f"{lat[k] * 1e3:.3f}" for k in LABELS),
            f"{lat['c'] / lat['a']:.3f}", f"{lat['c'] / lat['b']:.3f}",
            f"{r['baseline_s'] * 1e3:.3f}" if r["baseline_s"] else "–", r["found_by"],
            " / ".join(str(placed[k]["npu_ops"]) for k in LABELS),
            *(_per(r, f) for f in ("regions", "groups", "split")),
            f"{placed['c']['off_dram_ops']}, {placed['c']['async']}",
            "yes, below" if below else ("yes" if at_most else "**no**"),
            f"{r['tune_s']:.1f} / {r['wall_s']:.0f}", f"{r['load']:.2f}"]


HEAD = ["model", "ops", "npu matches: graph / TVM unchecked", "(a) TVM greedy ms",
        "(b) MATCH greedy ms", "(c) autoplace ms", "(c)/(a)", "(c)/(b)",
        "tuner's best baseline ms", "(c) found by",
        "npu ops a / b / c", "npu regions a / b / c",
        "placed groups a / b / c", "split a / b / c",
        "(c) ops off DRAM, async copies", "(c) <= (a), (b)", "tune s / case s", "load"]


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    return "\n".join(lines + ["| " + " | ".join(table_row(r)) + " |" for r in rows])


def goal(rows: list[dict]) -> str:
    """The issue's goal, met or not, and the models where it is not."""
    done = [r for r in rows if "latency_s" in r]
    marks = [verdict(r) for r in done]
    fails = [r["model"] for r, (ok, _) in zip(done, marks) if not ok]
    below = sum(b for _, b in marks)
    met = not fails and len(done) == len(rows) and 2 * below >= len(rows)
    return (f"Goal ((c) <= (a) and (b) on every model, strictly below both on at least half): "
            f"**{'met' if met else 'not met'}**: (c) strictly below both on {below} of "
            f"{len(rows)}; above one of them on {fails or 'none'}"
            + ("" if len(done) == len(rows) else f"; {len(rows) - len(done)} case(s) failed"))


def errors(rows: list[dict]) -> list[str]:
    """Each partition that failed, as a line."""
    return [f"- {r['model']} ({k}): {p['error']}" for r in rows if "partition" in r
            for k, p in r["partition"].items() if "error" in p]


def _rev() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def report(rows: list[dict], args, loads: tuple[float, float], wall_s: float) -> str:
    head = (f"`python experiments/bench_offload.py {' '.join(sys.argv[1:])}` at {_rev()} "
            f"(working tree), {time.strftime('%Y-%m-%d %H:%M')}: profile `npu`, (c) = "
            f"`autoplace tune --trials {args.trials} --seed {args.seed}` (default strategy, "
            f"simulator), the npu built by `{CODEGEN}` for the partitions; load (1 min) "
            f"{loads[0]:.2f} at the start, {loads[1]:.2f} at the end; {wall_s / 60:.1f} min "
            "wall.\n\nLatencies are the simulator's. `npu matches`: the graph's composites of "
            "the npu's table (whole fused kernels: what the space and (a) offload), and the "
            "composites TVM's FuseOpsByPattern makes with no check (it also matches inside a "
            "fused kernel). Per partition: `npu regions` is "
            "`Offload.regions` (the region calls in `main`), `placed groups` the npu's ops "
            "joined by edges, `split` is `Offload.split` (regions beyond groups); `!`: the "
            "partition failed.")
    notes = errors(rows)
    return "\n\n".join([head, table(rows), goal(rows)] + (["\n".join(notes)] if notes else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--trials", type=int, default=512, help="the tuner's budget")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_offload.md")
    ap.add_argument("--case", nargs=3, help=argparse.SUPPRESS)  # model trials seed
    args = ap.parse_args()
    if args.case:
        print(json.dumps(case(args.case[0], int(args.case[1]), int(args.case[2]))))
        return
    start, t0, rows = load(), time.perf_counter(), []
    print(f"load at start {start:.2f}", flush=True)
    for model in args.models:
        rows.append(run_case(model, args.trials, args.seed))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = report(rows, args, (start, load()), time.perf_counter() - t0)
    print(text)
    args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
