"""The report of experiments/bench_search.py: bench_search.csv (one row per run and budget)
and bench_search.md (the goals, then the tables).

Definitions: a run's *best* is the best latency its job measured (hill-wall: the best it
measured within the tuner's wall time of the same case, seed and budget); ratios are
geomeans over seeds of per-seed ratios, ``best / hill`` above 1 means hill climbing found
the faster placement. *Trials to 99%*: the first measurement at which the running best
is within 99% of the job's final best (latency <= final / 0.99). *Local optimum*: no
one-op move of the final best is predicted faster by the simulator (every move ranked).
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
import statistics
import subprocess

from bench_search import ANNEAL, HILL, INSTANCES, TUNER, WALL

EXACT = 1 + 1e-9  # "matches": within rounding
NA = "-"
LEGEND = ("Per measurement budget (each its own job): geomean over seeds of the tuner's best "
          "over each reference (-: no proven optimum, or a reference placement that does not "
          "fit); best / hill etc.: the tuner's best over the yardstick's at the same case, "
          "seed and budget (> 1: the yardstick found a faster placement; hill (wall): hill "
          "climbing in the tuner's wall time, '(short)' if its job ended before); local opt.: "
          "runs whose best has no one-op move predicted faster; trials to 99% and hill "
          "measurements: per seed.\n")


def geomean(xs) -> float | None:
    """Geometric mean of the finite positive values (None if none)."""
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, spec: str = ".4f") -> str:
    return NA if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:{spec}}"


def ratio(a, b) -> float | None:
    ok = a is not None and b is not None and math.isfinite(a) and math.isfinite(b) and b > 0
    return a / b if ok else None


def reach(curve: list[float], target: float) -> int | None:
    """The first measurement at which the running best is at most ``target``."""
    return next((n + 1 for n, v in enumerate(curve) if v <= target * EXACT), None)


class View:
    """The runs of one benchmark by (case, strategy, seed, budget), and the case facts."""

    def __init__(self, runs: list[dict], cases: dict, args):
        self.cases, self.args, self.budgets = cases, args, sorted(args.budgets)
        self.index = {(r["model"], r["profile"], r["strategy"], r["seed"], r["total"]): r
                      for r in runs}
        self.top = self.budgets[-1]
        below = [b for b in self.budgets if b < self.top]
        self.mid = 256 if 256 in below else (below[-1] if below else self.top)

    def run(self, case, strategy: str, seed: int, budget: int) -> dict | None:
        return self.index.get((*case, strategy, seed, budget))

    def seeds(self, case) -> list[int]:
        return sorted({k[3] for k in self.index if k[:3] == (*case, TUNER)})

    def tuner_runs(self, budget: int | None = None) -> list[dict]:
        return [r for k, r in self.index.items() if k[2] == TUNER and k[4] in self.budgets
                and (budget is None or k[4] == budget)]

    def best(self, case, strategy: str, seed: int, budget: int) -> float | None:
        """A run's best (hill-wall, anneal-wall: within the tuner's wall time at
        ``budget``)."""
        if strategy in (WALL, ANNEAL):
            r = self.run(case, strategy, seed, self.top)
            return r["at"][str(budget)]["best_s"] if r else None
        r = self.run(case, strategy, seed, budget)
        return r["curve"][-1] if r else None

    def vs(self, case, seed: int, budget: int, strategy: str) -> float | None:
        """The tuner's best / the strategy's, same case, seed and budget."""
        return ratio(self.best(case, TUNER, seed, budget), self.best(case, strategy, seed, budget))


# -- goals ------------------------------------------------------------------------------------
def _share(hits: list[bool]) -> str:
    return f"{sum(hits)} of {len(hits)} runs" + (f" ({sum(hits) / len(hits):.0%})" if hits else "")


def _pairs(v: View, strategy: str, margin: float = 1.0) -> list[bool]:
    """Per tuner run: whether ``strategy`` found a placement faster at its budget (by more
    than the share ``1 - margin``)."""
    out = []
    for r in v.tuner_runs():
        other = v.best((r["model"], r["profile"]), strategy, r["seed"], r["total"])
        if other is not None:
            out.append(other * EXACT < r["curve"][-1] * margin)
    return out


def _goal_rows(v: View) -> list[tuple[str, str, str]]:
    runs = v.tuner_runs()
    local = [r["faster_moves"] == 0 for r in runs]
    proven = [r for r in v.tuner_runs(v.mid) if v.cases[_case(r)]["optimum_s"]]
    near = [r["curve"][-1] <= v.cases[_case(r)]["optimum_s"] * 1.001 for r in proven]
    early = [_reached(v, r) for r in v.tuner_runs(v.top)]
    inst = [r for r in v.tuner_runs(v.top) if r["profile"] == INSTANCES]
    greedy = [r["curve"][-1] <= v.cases[_case(r)].get("their_greedy_s", 0) * EXACT
              for r in inst]
    wall = [v.run(_case(r), WALL, r["seed"], v.top) for r in v.tuner_runs(v.top)]
    short = sum(not w["long_enough"] for w in wall if w)
    return [
        ("the final best is a one-op local optimum", "every run", _share(local)),
        ("hill climbing beats the tuner at equal measurements", "0 runs",
         f"{sum(_pairs(v, HILL))} of {len(_pairs(v, HILL))} runs"),
        ("hill climbing beats the tuner at equal wall time (simulator)", "0 runs",
         f"{sum(_pairs(v, WALL))} of {len(_pairs(v, WALL))} runs"
         + (f" ({short} hill runs too short)" if short else "")),
        ("simulated annealing beats the tuner by > 0.5% at equal wall time (simulator)",
         "0 runs", f"{sum(_pairs(v, ANNEAL, 0.995))} of {len(_pairs(v, ANNEAL))} runs"
         + f" (by any margin: {sum(_pairs(v, ANNEAL))})"),
        ("(steepest descent from HEFT beats the tuner at equal measurements)", NA,
         f"{sum(_pairs(v, 'steepest'))} of {len(_pairs(v, 'steepest'))} runs"),
        (f"proven optima reached within 0.1% at {v.mid} measurements", ">= 95% of seeds",
         _share(near) + f", {len({_case(r) for r in proven})} cases"),
        (f"{v.mid} measurements reach >= 99% of the {v.top}-measurement best", "every case",
         _share([e for e in early if e is not None]) + " (case x seed)"),
        (f"instances: {v.top} measurements match or beat their greedy", "every instance",
         _share(greedy)),
    ]


def _case(r: dict) -> tuple[str, str]:
    return r["model"], r["profile"]


def _reached(v: View, r: dict) -> bool | None:
    """Whether the tuner's job at the middle budget is within 99% of its largest one."""
    mid = v.best(_case(r), TUNER, r["seed"], v.mid)
    return None if mid is None else mid <= r["curve"][-1] / 0.99 * EXACT


def goals_table(v: View) -> str:
    lines = [f"## Goals ({TUNER}, the default tuner)\n", "| goal | target | measured |",
             "|---|---|---|"]
    lines += [f"| {g} | {t} | {m} |" for g, t, m in _goal_rows(v)]
    return "\n".join(lines) + "\n"


# -- per case ---------------------------------------------------------------------------------
def _case_cells(v: View, case, budget: int, instances: bool) -> list[str]:
    c, seeds = v.cases[case], v.seeds(case)
    runs = [r for s in seeds if (r := v.run(case, TUNER, s, budget))]
    bests = [r["curve"][-1] for r in runs]
    refs = [c["optimum_s"], c["lower_bound_s"], c["heft_s"]] + \
        ([c.get("their_greedy_s")] if instances else [])
    cells = [str(len(runs)), fmt(geomean(b * 1e3 for b in bests), ".5g")]
    cells += [fmt(geomean(ratio(b, ref) for b in bests)) for ref in refs]
    cells += [fmt(geomean(v.vs(case, s, budget, y) for s in seeds))
              for y in (HILL, WALL, "steepest", ANNEAL)]
    wall = [w for s in seeds if (w := v.run(case, WALL, s, v.top))]
    cells[-3] += "" if all(w["long_enough"] for w in wall) else " (short)"
    local = [r["faster_moves"] == 0 for r in runs]
    n99 = [reach(r["curve"], r["curve"][-1] / 0.99) for r in runs]
    cells += [f"{sum(local)}/{len(local)}", ", ".join(map(str, n99)) or NA,
              fmt(statistics.fmean(r["wall_s"] for r in runs) if runs else None, ".1f"),
              ", ".join(str(w["at"][str(budget)]["measured"]) for w in wall) or NA]
    return cells


def case_table(v: View, instances: bool) -> str:
    cases = [k for k in v.cases if (k[1] == INSTANCES) == instances and v.seeds(k)]
    if not cases:
        return ""
    title = "imported Tarnawski instances (ms: their unit)" if instances else \
        "bundled models x profiles"
    refs = ["optimum", "bound", "HEFT"] + (["their greedy"] if instances else [])
    head = ["case", "meas.", "seeds", "best ms"] + [f"best / {x}" for x in refs] + \
        ["best / hill", "best / hill (wall)", "best / steepest", "best / anneal (wall)",
         "local opt.",
         "trials to 99%", "tuner wall s", "hill meas. in that time"]
    lines = [f"## Per case, {TUNER}: {title}\n", LEGEND, "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for case in cases:
        lines += [f"| {_name(case)} | {b} | " + " | ".join(_case_cells(v, case, b, instances))
                  + " |" for b in v.budgets]
    return "\n".join(lines) + "\n"


def _ms(c: dict, ref: str) -> str:
    """A reference's latency (ms), or why it has none: its error (its placement does not
    fit), '?' for an optimum not proven."""
    x = c.get(f"{ref}_s")
    if x is not None and math.isfinite(x):
        return f"{x * 1e3:.5g}"
    return (c.get(f"{ref}_error") or ("?" if ref == "optimum" else NA)).replace(
        "out_of_memory", "OOM")


def facts_table(v: View) -> str:
    head = ["case", "ops", "space", "HEFT ms", "greedy ms", "their greedy ms", "bound ms",
            "optimum ms", "B&B nodes", "B&B s"]
    lines = ["## Cases: the references\n",
             "Optimum: proven by branch and bound seeded with the best found (?: not proven "
             "within the row limit); HEFT, greedy: their placements (OOM: it does not fit, "
             "not_contiguous: a block unit's ops are not contiguous); their greedy: "
             "instances only.\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, c in v.cases.items():
        refs = ("heft", "greedy", "their_greedy", "lower_bound", "optimum")
        lines.append(f"| {_name(case)} | {c['ops']} | 10^{c['log10_space']:.0f} | "
                     + " | ".join(_ms(c, r) for r in refs)
                     + f" | {c['optimum_nodes']:,} | {c['optimum_wall_s']:.1f} |")
    return "\n".join(lines) + "\n"


def _name(case) -> str:
    return case[0] if case[1] == INSTANCES else "/".join(case)


# -- strategies -------------------------------------------------------------------------------
def strategy_table(v: View, instances: bool) -> str:
    cases = [k for k in v.cases if (k[1] == INSTANCES) == instances and v.seeds(k)]
    if not cases:
        return ""
    lines = [f"## Geomean best / lower bound, every strategy, "
             f"{'instances' if instances else 'models x profiles'} x seeds\n",
             "| strategy | " + " | ".join(map(str, v.budgets)) + " |",
             "|---|" + "---|" * len(v.budgets)]
    for s in v.args.strategies:
        cells = [geomean(ratio(v.best(k, s, seed, b), v.cases[k]["lower_bound_s"])
                         for k in cases for seed in v.seeds(k)) for b in v.budgets]
        lines.append(f"| {s} | " + " | ".join(fmt(x) for x in cells) + " |")
    return "\n".join(lines) + "\n"


def overhead_table(v: View) -> str:
    """Mean wall time and search overhead per strategy and budget."""
    lines = ["## Wall time (mean s per job) and search overhead (ms per measured candidate, "
             "not measuring)\n", "| strategy | " + " | ".join(map(str, v.budgets)) + " |",
             "|---|" + "---|" * len(v.budgets)]
    for s in v.args.strategies:
        if s in (WALL, ANNEAL):
            rs = [r for k, r in v.index.items() if k[2] == s]
            what, key = ("measurements", "measured") if s == WALL else \
                ("simulations", "simulated")
            asked = statistics.fmean(r[key] for r in rs) if rs else None
            lines.append(f"| {s} | one job per case and seed: mean {fmt(asked, '.0f')} "
                         f"{what} in {fmt(_mean(rs, 'wall_s'), '.1f')} s |"
                         + " |" * (len(v.budgets) - 1))
            continue
        cells = []
        for b in v.budgets:
            rs = [r for k, r in v.index.items() if k[2] == s and k[4] == b]
            cells.append(f"{fmt(_mean(rs, 'wall_s'), '.1f')} s, "
                         f"{fmt(_mean(rs, 'overhead_ms'), '.1f')} ms")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean(rows: list[dict], key: str) -> float | None:
    return statistics.fmean(r[key] for r in rows) if rows else None


def long_table(v: View, runs: list[dict]) -> str:
    long = [r for r in runs if r["strategy"] == "tpe" and r["total"] == v.args.long]
    if not long:
        return ""
    lines = [f"## Plain TPE at {v.args.long} measurements vs {TUNER}@{v.top} (seed 0)\n",
             f"| case | TPE best / bound | {TUNER} best / bound | "
             f"{TUNER} measurements to match TPE |", "|---|---|---|---|"]
    for r in long:
        c, ev = v.cases[_case(r)], v.run(_case(r), TUNER, 0, v.top)
        n = reach(ev["curve"], r["curve"][-1]) if ev else None
        lines.append(f"| {'/'.join(_case(r))} | {fmt(ratio(r['curve'][-1], c['lower_bound_s']))}"
                     f" | {fmt(ratio(ev['curve'][-1], c['lower_bound_s']) if ev else None)} | "
                     f"{n or '> ' + str(v.top)} |")
    return "\n".join(lines) + "\n"


# -- files ------------------------------------------------------------------------------------
def csv_rows(v: View) -> list[dict]:
    """One row per run and budget: best, its ratios to the references, the local-optimum
    check, measurements to 99% of the best, wall time (hill-wall: the tuner's)."""
    rows = []
    for (m, hw, s, seed, total), r in v.index.items():
        c = v.cases.get((m, hw))
        timed = s in (WALL, ANNEAL)
        for b in (v.budgets if timed else [total]):
            best = v.best((m, hw), s, seed, b)
            at = r["at"][str(b)] if timed else None
            rows.append({"model": m, "profile": hw, "strategy": s, "seed": seed, "budget": b,
                         "best_ms": best * 1e3, "vs_optimum": ratio(best, c["optimum_s"]),
                         "vs_bound": ratio(best, c["lower_bound_s"]),
                         "vs_heft": ratio(best, c["heft_s"]),
                         "vs_their_greedy": ratio(best, c.get("their_greedy_s")),
                         "faster_moves": r.get("faster_moves"),
                         "to_99": None if at else reach(r["curve"], best / 0.99),
                         "measured": (at.get("measured") or at["simulated"]) if at
                         else len(r["curve"]),
                         "wall_s": at["tuner_wall_s"] if at else r["wall_s"], "load": r["load"]})
    return rows


def _header(v: View, runs: list[dict], greedy_source: str) -> str:
    load = os.getloadavg()
    during = [r["load"] for r in runs]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    a = v.args
    return (f"# Search quality ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {commit})\n\n"
            f"Machine load (1/5/15 min) at the report: {load[0]:.2f} / {load[1]:.2f} / "
            f"{load[2]:.2f}; at the end of each job: {min(during, default=0):.2f} .. "
            f"{max(during, default=0):.2f} (mean {statistics.fmean(during or [0]):.2f}). "
            f"Simulator measurer, {a.jobs} job(s) at a time; budgets {a.budgets}; seeds "
            f"{a.seeds} per case, {a.proven_seeds} where an optimum is proven; strategies "
            f"{', '.join(a.strategies)}. Their greedy: {greedy_source or NA}.\n")


def write_report(runs: list[dict], cases: dict, args, greedy_source: str) -> None:
    """bench_search.csv and bench_search.md in ``args.out``; prints the markdown."""
    v = View(runs, cases, args)
    rows = csv_rows(v)
    with open(args.out / "bench_search.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    parts = [_header(v, runs, greedy_source), goals_table(v), case_table(v, False),
             case_table(v, True), facts_table(v), strategy_table(v, False),
             strategy_table(v, True), overhead_table(v), long_table(v, runs)]
    (args.out / "bench_search.md").write_text("\n".join(p for p in parts if p))
    print((args.out / "bench_search.md").read_text())
