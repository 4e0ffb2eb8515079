"""The HTML report of a pipeline search log (``autoplace report pipeline.jsonl``).

It shows the log's best plan for its graph and mesh: a table of its stages, the plan on the
grid (stage per PE, busy share per PE), one period of its stream in steady state (a Gantt
chart of every stage's PEs and DMA engines) and the search's progress against the DP's plan
and the bound. ``out/report.html`` embeds the pictures, which are also written beside it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from autoplace.pipeline import MeshMachine, StageCosts, evaluate, throughput_bound
from autoplace.pipeline.layout import grid_maps
from autoplace.pipeline.log import best_plan, is_pipeline_line, read_lines
from autoplace.pipeline.machine import MAX_SPLIT
from autoplace.pipeline.plan import rate_text
from autoplace.pipeline.plan_space import START, dp_reference, reference_text
from autoplace.pipeline.stream import lanes, steady_window
from autoplace.reports import plots
from autoplace.reports.analysis import pipeline_frame
from autoplace.reports.placement_report import (
    STYLE,
    ReportError,
    html_img,
    html_table,
    logged_inputs,
)

#: periods of the stream the period picture shows (one can miss a bursty stage's work)
PERIODS_SHOWN = 3


def is_pipeline_log(path: str | Path) -> bool:
    """Whether the first line of ``path`` is a pipeline search trial."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        return is_pipeline_line(json.loads(first))
    except (OSError, ValueError, AttributeError):
        return False


def _costs(lines: list[dict], log: Path, model: str | None, hw: str | None) -> StageCosts:
    graph, profile = logged_inputs(lines[-1], log, model, hw)
    widest = max(s[2] for line in lines for s in line["stages"])
    return StageCosts(graph, MeshMachine.of(profile, max_split=max(MAX_SPLIT, widest)))


def stage_table(plan, costs: StageCosts) -> pd.DataFrame:
    """One row per stage of ``plan``: its ops, PEs, splits, units and figures."""
    names = [op.name for op in costs.graph.ops]
    rows = []
    for n, (s, f) in enumerate(zip(plan.stages, costs.plan_stages(plan))):
        ways = s.ways()
        rows.append({"stage": n, "ops": f"{s.start}-{s.end - 1}",
                     "first .. last": f"{names[s.start]} .. {names[s.end - 1]}",
                     "PEs": s.pes, "ways per op": f"{min(ways)}-{max(ways)}",
                     "ops per unit": ", ".join(f"{u} {n}" for u, n in
                                               costs.ops_per_unit(s).items()),
                     "compute (ms)": f["compute"] * 1e3, "comm (ms)": f["comm"] * 1e3,
                     "period (ms)": f["period"] * 1e3, "MiB per PE": f["memory"] / 2**20})
    return pd.DataFrame(rows)


def write_pipeline_report(log: str | Path, out: str | Path, *, model: str | None = None,
                          hw: str | None = None) -> Path:
    """Write ``out/report.html`` and its pictures for the best plan of a pipeline log."""
    log, out = Path(log), Path(out)
    lines = read_lines(log)
    if not lines:
        raise ReportError(f"{log}: no trial to report")
    costs = _costs(lines, log, model, hw)
    plan, best = best_plan(log, costs, lines[-1]["profile_hash"])
    throughput = 1 / best.result.period_s  # over every copy: the throughput objective's
    trials = pipeline_frame([(log, lines)])
    mine = trials[(trials["graph_fp"] == best.graph_fp)
                  & (trials["profile_hash"] == best.profile_hash)
                  & (trials["seed"] == best.seed)]
    pes = costs.machine.size
    ref = dp_reference(zip(mine["move"].astype(str), mine["trial"], mine["throughput"]))
    starts = int(mine["move"].astype(str).map(lambda m: m == START
                                              or m.startswith(START + "-")).sum())
    pictures = _pictures(plan, costs, mine, throughput_bound(costs, pes), out,
                         reference=(reference_text(ref, starts), ref[2]) if ref else None)
    f = evaluate(plan, costs)
    against = f", {throughput / ref[2]:.3f}x {reference_text(ref, starts)}" if ref else ""
    title = f"{costs.graph.name} on {costs.machine.name} ({costs.machine.rows}x" \
            f"{costs.machine.cols})"
    body = [
        f"<h1>Pipeline report: {html.escape(title)}</h1>",
        f"<p>{html.escape(str(log))}: {len(mine)} trials (seed {best.seed}); best trial "
        f"{best.trial} ({html.escape(best.strategy)}): "
        f"{rate_text(best.pipeline['period_s'], plan.replicas)}{html.escape(against)}; "
        f"{len(plan.stages)} stages on {plan.pes} PEs per copy "
        f"({f.pes_used} of {pes} used); {rate_text(f.period_s, plan.replicas, 'analytic bound')}"
        ".</p>",
        "<h2>Stages of the best plan</h2>", html_table(stage_table(plan, costs)),
        "<h2>On the grid</h2>", html_img(pictures["grid"]),
        "<h2>One period in steady state (streamed)</h2>", html_img(pictures["period"]),
        "<h2>The search</h2>", html_img(pictures["search"]),
    ]
    page = out / "report.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>autoplace "
                    f"pipeline report</title><style>{STYLE}</style></head><body>"
                    + "\n".join(body) + "</body></html>\n", encoding="utf-8")
    return page


def plan_pictures(plan, costs: StageCosts, out: Path) -> dict[str, Path]:
    """``grid.png`` (the plan on the grid) and ``period.png`` (one period of its stream in
    steady state) in ``out``; their paths by name."""
    out.mkdir(parents=True, exist_ok=True)
    name = f"{costs.graph.name} on {costs.machine.name}"
    start, period, work = steady_window(plan, costs, evaluate(plan, costs).period_s,
                                        periods=PERIODS_SHOWN)
    return _save(out, {
        "grid": plots.pipeline_grid(*grid_maps(plan, costs), title=name),
        "period": plots.pipeline_period(work, start, period, lanes(plan, costs),
                                        periods=PERIODS_SHOWN, copies=plan.replicas)})


def _pictures(plan, costs: StageCosts, trials: pd.DataFrame, bound: float,
              out: Path, reference: tuple[str, float] | None) -> dict[str, Path]:
    name = f"{costs.graph.name} on {costs.machine.name}"
    search = plots.pipeline_search(trials, bound=bound, reference=reference,
                                   title=f"{name}: the search")
    return {**plan_pictures(plan, costs, out), **_save(out, {"search": search})}


def _save(out: Path, figures: dict) -> dict[str, Path]:
    paths = {}
    for key, fig in figures.items():
        paths[key] = out / f"{key}.png"
        plots.save(fig, paths[key])
    return paths
