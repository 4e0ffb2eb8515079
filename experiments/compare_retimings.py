"""A kernel database's finalists as timed before and after a re-timing (``--retime``).

    python experiments/compare_retimings.py BEFORE_DB AFTER_DB

``BEFORE_DB`` and ``AFTER_DB``: two copies of one database (``autoplace tune-kernels``), the
second timed again. Per target directory, each kernel's last line of ``finalists.json`` in
each; printed: how many finalists both timed, the ratio of their times (before / after:
median, 10th and 90th percentiles, extremes), the kernels whose fastest finalist changed,
and the load averages the re-timing ran at.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def last_lines(db: Path) -> dict[tuple[str, str], dict]:
    """(target directory, workload) -> its last re-timing line."""
    out = {}
    for where in sorted(p for p in db.iterdir() if (p / "finalists.json").is_file()):
        for text in (where / "finalists.json").read_text().splitlines():
            line = json.loads(text)
            out[(where.name, line["workload"])] = line
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    before, after = last_lines(args.before), last_lines(args.after)
    ratios, changed, loads = [], 0, []
    for key, new in after.items():
        if key not in before:
            continue
        old = {f["trace"]: f["seconds"] for f in before[key]["finalists"]}
        now = {f["trace"]: f["seconds"] for f in new["finalists"]}
        ratios += [old[t] / now[t] for t in now if t in old]
        changed += min(old, key=old.get) != min(now, key=now.get)
        loads += [new["load"]] if "load" in new else []
    ratios.sort()
    n = len(ratios)
    print("| kernels | finalists | before / after: median | p10 | p90 | min | max "
          "| fastest changed | load after |\n|---|---|---|---|---|---|---|---|---|")
    load = f"{min(loads):.2f}-{max(loads):.2f}" if loads else "–"
    print(f"| {len(after)} | {n} | {statistics.median(ratios):.2f} | {ratios[n // 10]:.2f} | "
          f"{ratios[9 * n // 10]:.2f} | {ratios[0]:.2f} | {ratios[-1]:.2f} | {changed} "
          f"| {load} |")


if __name__ == "__main__":
    main()
