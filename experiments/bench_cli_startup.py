"""The command line's start-up: ``autoplace --version`` and ``autoplace tune --help`` of this
tree against another (a ``git worktree`` of an older commit), interleaved in one minute.

    python experiments/bench_cli_startup.py --ref /tmp/old_tree [--runs 15]

Each run is a fresh interpreter (``python -m autoplace ...`` with the tree first on the
path); the table gives the median CPU seconds (user + system, the child's own) and wall
seconds of each, and new / old.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--version"], ["tune", "--help"])


def run(tree: Path, args: list[str]) -> tuple[float, float]:
    """(CPU s, wall s) of one ``python -m autoplace ARGS`` run on ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "autoplace", *args], env=env, cwd=tree,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    assert status == 0, (tree, args)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="the other tree (an older commit)")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    trees = {"new": Path(__file__).resolve().parents[1], "old": Path(args.ref).resolve()}
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| command | CPU s old | CPU s new | new/old | wall s old | wall s new | new/old |")
    print("|---|---|---|---|---|---|---|")
    for cmd in COMMANDS:
        got = {k: [] for k in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():  # (interleaved: the machine's noise shared)
                got[name].append(run(tree, cmd))
        cpu = {k: statistics.median(c for c, _ in v) for k, v in got.items()}
        wall = {k: statistics.median(w for _, w in v) for k, v in got.items()}
        print(f"| autoplace {' '.join(cmd)} | {cpu['old']:.3f} | {cpu['new']:.3f} | "
              f"{cpu['new'] / cpu['old']:.2f} | {wall['old']:.3f} | {wall['new']:.3f} | "
              f"{wall['new'] / wall['old']:.2f} |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
