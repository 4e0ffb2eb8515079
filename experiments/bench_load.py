"""Loading big tuning logs into pandas: how long ``autoplace.records.tuning_log.load`` takes.

    python experiments/bench_load.py [--records 100000] [--models squeezenet resnet50]
                                     [--hw soc] [--no-slow] [--logs DIR]

For each model, writes a log of random placements measured by the simulator (in a temporary
directory, or in ``--logs``, where a log of the right size is reused), then times ``load``
(msgspec reader), ``load(fast=False)`` (standard library ``json``), ``read`` (one Record and
Placement object per line, the way ``load`` used to work) and the ``placements`` view of
1,000 rows. Prints a markdown table. Goal: 100,000 records load in seconds, not minutes.
``--no-slow`` skips the two slower readers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from analysis import markdown

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import Record, TuningLog, read
from autoplace.reports import analysis
from autoplace.space import SearchSpace


def write_log(path: Path, model: str, hw: str, n: int, seed: int = 0) -> None:
    """``n`` random placements of ``model`` on ``hw``, simulated in batches of 1000."""
    graph, profile = load_graph(model), load_profile(hw)
    space = SearchSpace(graph, profile)
    sim = Simulator(space)
    rng = np.random.default_rng(seed)
    with TuningLog(path) as log:
        for start in range(0, n, 1000):
            choice, mode = space.random_genomes(min(1000, n - start), rng)
            batch = [space.decode(c, m) for c, m in zip(choice, mode)]
            for i, (p, r) in enumerate(zip(batch, sim.measure(batch))):
                log.append(Record(graph=graph.name, graph_fp=graph.fingerprint,
                                  profile=profile.name, profile_hash=profile.hash,
                                  strategy="random", trial=start + i, seed=seed,
                                  measurer=sim.name, placement=p, result=r))


def timed(fn, *args, **kwargs) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def bench(model: str, hw: str, n: int, slow: bool, logs: Path) -> dict:
    path = logs / f"{model}_{hw}_{n}.jsonl"
    write_s = float("nan")  # reused log
    if not path.exists():
        _, write_s = timed(write_log, path, model, hw, n)
    df, fast_s = timed(analysis.load, path)
    row = {"model": model, "records": len(df), "file MB": path.stat().st_size / 1e6,
           "write s": write_s, "load s": fast_s,
           "frame MB": df.memory_usage(deep=True).sum() / 1e6}
    if slow:
        _, row["load(fast=False) s"] = timed(analysis.load, path, fast=False)
        _, row["read() objects s"] = timed(read, path)
    view, row["placements(1000 rows) s"] = timed(analysis.placements, df.head(1000))
    row["view rows"] = len(view)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    ap.add_argument("--hw", default="soc")
    ap.add_argument("--no-slow", action="store_true")
    ap.add_argument("--logs", default=None, help="write (or reuse) the logs here")
    args = ap.parse_args()
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(args.logs or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        rows = [bench(m, args.hw, args.records, not args.no_slow, logs) for m in args.models]
    print(markdown(pd.DataFrame(rows), digits=3))


if __name__ == "__main__":
    main()
