"""A/B: two source trees of autoplace, interleaved on one core, on the figures that moved.

    python experiments/bench_ab.py OLD_TREE [NEW_TREE] [--rounds 5]

``OLD_TREE``/``NEW_TREE`` are checkouts (``git worktree add /tmp/old REV``; NEW defaults to
this one). Each round runs, for each tree in turn, a fresh subprocess pinned to core 0 with
that tree imported ahead of the editable install, measuring:

- batched simulator placements/s on resnet50/soc (batches of 256 random placements, the
  median of 20 calls after one warm-up call);
- tuner overhead per measured trial on densenet121/soc ((wall - measure) / measured, 1,000
  trials of the default search after a 30-trial warm-up run), and its CPU seconds;
- the same overhead on resnet50/soc;
- the wall time of ``autoplace pipeline`` (plan and 300 trials, logged) of resnet50 on the
  bundled mesh made 16x16 and densenet121 on 32x32, after a 5-trial warm-up.

Interleaving puts both trees through the same moments of a shared, noisy machine; the table
gives each figure's median over the rounds, the ratio new/old, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = r"""
import json, os, sys, tempfile, time
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv[1])
import numpy as np
from autoplace.measure.batch import simulate_batch
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.hardware.load import load_profile
from autoplace.records.tuning_log import TuningLog
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace

space = SearchSpace(load_graph("resnet50"), load_profile("soc"))
choice, mode = space.random_genomes(256, np.random.default_rng(0))
simulate_batch(space, choice, mode)
times = []
for _ in range(20):
    t = time.perf_counter(); simulate_batch(space, choice, mode)
    times.append(time.perf_counter() - t)
sim = 256 / float(np.median(times))
out, figures = tempfile.mkdtemp(), {"sim_per_s": sim}
for model, key in (("densenet121", "overhead_ms"), ("resnet50", "overhead_resnet50_ms")):
    space = SearchSpace(load_graph(model), load_profile("soc"))
    measurer = Simulator(space)
    with TuningLog(os.path.join(out, model + "warm.jsonl")) as log:
        tune(space, measurer, log, TuneConfig(trials=30, seed=1))
    with TuningLog(os.path.join(out, model + ".jsonl")) as log:
        t, c = time.perf_counter(), time.process_time()
        r = tune(space, measurer, log, TuneConfig(trials=1000, seed=0))
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    figures[key] = (wall - r.measure_s) / r.measured * 1e3
    figures.setdefault("cpu_s", cpu)
import contextlib, io, re
from autoplace.cli.main import main
text = open(os.path.join(sys.argv[1], "hwprofiles", "mesh.toml")).read()
for side, key in ((16, "pipeline_resnet50_s"), (32, "pipeline_densenet121_s")):
    mesh = os.path.join(out, f"mesh{side}.toml")
    with open(mesh, "w") as f:
        f.write(re.sub(r"(?m)^cols = \d+", f"cols = {side}",
                       re.sub(r"(?m)^rows = \d+", f"rows = {side}", text)))
    model = key.split("_")[1]
    with contextlib.redirect_stdout(io.StringIO()):
        main(["pipeline", model, "--hw", mesh, "--trials", "5"])  # warm-up
        t = time.perf_counter()
        code = main(["pipeline", model, "--hw", mesh, "--trials", "300", "--log",
                     os.path.join(out, key + ".jsonl")])
    assert code == 0
    figures[key] = time.perf_counter() - t
print(json.dumps(figures | {"load": os.getloadavg()[0]}))
"""

FIGURES = (("sim_per_s", "batched sim placements/s (resnet50/soc)", "{:,.0f}"),
           ("overhead_ms", "tuner overhead ms/trial (densenet121/soc)", "{:.2f}"),
           ("cpu_s", "CPU s of 1,000 trials (densenet121/soc)", "{:.2f}"),
           ("overhead_resnet50_ms", "tuner overhead ms/trial (resnet50/soc)", "{:.2f}"),
           ("pipeline_resnet50_s", "pipeline search s, 300 trials (resnet50, 16x16 mesh)",
            "{:.2f}"),
           ("pipeline_densenet121_s", "pipeline search s, 300 trials (densenet121, 32x32)",
            "{:.2f}"))


def run(tree: Path) -> dict:
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", CASE, str(tree)],
                         capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?", default=ROOT)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"old": [], "new": []}
    for k in range(args.rounds):
        for name in ("old", "new"):
            rows[name].append(run(getattr(args, name)))
            print(f"round {k + 1} {name}: {rows[name][-1]}", file=sys.stderr, flush=True)
    print(f"old: {args.old}  new: {args.new}  rounds: {args.rounds} (interleaved, core 0)\n")
    print("| figure | old | new | new/old | load old/new |\n|---|---|---|---|---|")
    for key, title, fmt in FIGURES:
        old = statistics.median(r[key] for r in rows["old"])
        new = statistics.median(r[key] for r in rows["new"])
        load = "/".join(f"{statistics.median(r['load'] for r in rows[n]):.1f}"
                        for n in ("old", "new"))
        print(f"| {title} | {fmt.format(old)} | {fmt.format(new)} | {new / old:.2f} | {load} |")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
