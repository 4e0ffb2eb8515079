"""A self-contained HTML report of a tuning log: tables and pictures of its best placement.

``write_report(log, out)`` writes ``out/report.html`` (PNGs embedded, so the file can be
mailed alone) and the same pictures as ``out/*.png``. The schedule pictures come from the
simulator, replaying the best placement on the log's graph and profile.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from autoplace.graph import GraphError, OpGraph
from autoplace.hardware.profile import Profile
from autoplace.measure.base import MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import JOB
from autoplace.reports import analysis, plots
from autoplace.space import Placement, SearchSpace

#: the pictures of every report, and ``front`` where the profile prices energy
PICTURES = ("gantt", "convergence", "utilisation", "occupancy")


class ReportError(ValueError):
    """The log cannot be reported (empty, or its graph or profile cannot be found)."""


@dataclass(frozen=True, kw_only=True)
class Subject:
    """What the pictures show: the best row of the log, replayed on its graph and profile."""

    graph: OpGraph
    profile: Profile
    row: pd.Series
    placement: Placement
    result: MeasureResult
    held: dict[str, int]  # weights, graph inputs and outputs per scope, for the whole run


def logged_inputs(row, log: Path, model: str | None, hw: str | None,
                  shapes=None) -> tuple[OpGraph, Profile]:
    """The graph and profile a log's ``row`` (``graph``, ``profile``, ``graph_fp``,
    ``profile_hash``) was measured on, or ``model`` and ``hw`` in their place: ReportError
    naming the option to fix if they are not the ones the log names."""
    from autoplace.hardware.load import bundled_profiles, load_profile
    from autoplace.hardware.profile import ProfileError
    from autoplace.models import load_graph, own_inputs_hint

    try:
        graph = load_graph(model or row["graph"], shapes)
    except GraphError:
        if model:
            raise
        named = hw or row["profile"]
        unbundled = None if named in bundled_profiles() else named
        raise ReportError(f"{log}: {own_inputs_hint(row['graph'], unbundled)}") from None
    try:
        profile = load_profile(hw or row["profile"])
    except ProfileError:
        if hw:
            raise
        raise ReportError(f"{log}: its profile {row['profile']!r} is not a bundled one: pass "
                          "--hw PATH (the .toml it was tuned on)") from None
    if graph.fingerprint != row["graph_fp"]:
        raise ReportError(f"{log}: graph {graph.name!r} (fingerprint {graph.fingerprint}) is "
                          f"not the log's {row['graph_fp']}; pass --model with the right one")
    if profile.hash != row["profile_hash"]:
        raise ReportError(f"{log}: profile {profile.name!r} (hash {profile.hash}) is not the "
                          f"log's {row['profile_hash']}; pass --hw with the right one")
    return graph, profile


def _subject(df: pd.DataFrame, log: Path, model: str | None, hw: str | None,
             shapes=None) -> Subject:
    ok = df[df["ok"]]
    if ok.empty:
        raise ReportError(f"{log}: no feasible record to report")
    row = ok.loc[ok["latency_s"].idxmin()]
    graph, profile = logged_inputs(row, log, model, hw, shapes)
    placement = Placement.from_json(row["placement"])
    space = SearchSpace(graph, profile)
    problem = space.check(placement)
    if problem:  # a record this profile cannot have made (units it lacks, say)
        raise ReportError(f"{log}:{int(row['seq']) + 1}: its best record ({row['strategy']}, "
                          f"trial {row['trial']}) is no placement on profile "
                          f"{profile.name}: {problem.detail}")
    sim = Simulator(space, timeline=True)
    return Subject(graph=graph, profile=profile, row=row, placement=placement,
                   result=sim.simulate(placement), held=sim.held(placement))


def placement_table(s: Subject) -> pd.DataFrame:
    """The best placement, one row per op in graph order, with its simulated time."""
    view = analysis.placements(s.row.to_frame().T, s.graph)
    ops = {e.name: e for e in s.result.timeline if e.kind == "op"}
    critical = {e.name for e in analysis.critical_path(s.graph, s.result.timeline)
                if e.kind == "op"}
    copies: dict[str, list[str]] = {}
    for edge, mode in s.placement.copies.items():
        src, dst = edge.split("->", 1)
        copies.setdefault(dst, []).append(f"{src} ({mode})")
    return pd.DataFrame({
        "op": view["op"].astype(str), "kind": view["kind"].astype(str),
        "unit": view["unit"].astype(str), "scope": view["scope"].astype(str),
        "copies in": [", ".join(copies.get(n, [])) for n in view["op"]],
        "start (ms)": [ops[n].start * 1e3 for n in view["op"]],
        "time (ms)": [(ops[n].end - ops[n].start) * 1e3 for n in view["op"]],
        "critical": ["yes" if n in critical else "" for n in view["op"]],
    })


def pictures(s: Subject, df: pd.DataFrame) -> dict[str, object]:
    """The report's figures by name (see :data:`PICTURES`)."""
    units = [u.name for u in s.profile.units]
    tl = s.result.timeline
    mine = df[(df["graph_fp"] == s.row["graph_fp"]) & (df["profile_hash"] == s.row["profile_hash"])]
    base = mine[analysis.is_baseline(mine["strategy"])]
    baselines = dict(zip(base["strategy"].astype(str), base["latency_s"].where(base["ok"])))
    title = f"{s.graph.name} on {s.profile.name}"
    curves = analysis.convergence(mine.assign(curve=_curve_names(mine)), "curve",
                                  search_only=len(base) < len(mine))
    return {
        "gantt": plots.gantt(s.graph, tl, units=units, title=(
            f"{title}: best placement ({s.row['strategy']}, trial {s.row['trial']}), "
            f"{s.result.latency_s * 1e3:.3f} ms simulated")),
        "convergence": plots.convergence(curves, "curve", baselines=baselines,
                                         title=f"{title}: best latency so far"),
        "utilisation": plots.utilisation(analysis.utilisation(tl, 80, units),
                                         title=f"{title}: utilisation of the best placement"),
        "occupancy": plots.occupancy(
            analysis.occupancy(s.graph, tl, s.held),
            capacities={sc.name: sc.capacity_bytes for sc in s.profile.scopes},
            title=f"{title}: memory occupancy of the best placement"),
    } | _front_picture(mine, title)


def _front_picture(df: pd.DataFrame, title: str) -> dict[str, object]:
    """``{"front": figure}`` of latency against energy, if any record costs energy."""
    valid = df[df["ok"]]
    if not (valid["energy_j"] > 0).any():
        return {}
    return {"front": plots.front(analysis.front_figures(valid, ("latency", "energy")),
                                 analysis.front(df), analysis.hypervolume_history(df),
                                 title=f"{title}: latency against energy")}


def _curve_names(df: pd.DataFrame) -> pd.Series:
    """One convergence line per run (``search (run <id>)``), or one for the log."""
    if df["run"].nunique() > 1:
        return "search (run " + df["run"].astype(str) + ")"
    return pd.Series("search", index=df.index)


def html_table(df: pd.DataFrame) -> str:
    """``df`` as an HTML table of the report's style."""
    return df.to_html(index=False, border=0, classes="t", na_rep="",
                      float_format=lambda x: f"{x:.4g}")


def html_img(path: Path) -> str:
    """The PNG at ``path`` embedded in an ``img`` tag."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{path.stem}" src="data:image/png;base64,{data}">'


STYLE = ("body{font-family:sans-serif;max-width:1250px;margin:2em auto;color:#222}"
          "table.t{border-collapse:collapse;font-size:13px;margin-bottom:1.5em}"
          ".t td,.t th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}"
          "img{max-width:100%}")


def chosen_job(table: pd.DataFrame, df: pd.DataFrame, job: int | None) -> int:
    """The job a report shows: ``job`` if given, else the one of the log's last record."""
    if job is not None:
        if not 1 <= job <= len(table):
            raise ReportError(f"--job {job}: the log holds {len(table)} job(s), numbered from 1")
        return job
    last = df.iloc[-1] if len(df) else None
    for _, row in table.iterrows():
        if last is not None and all(str(last[k]) == row[k] for k in JOB):
            return int(row["job"])
    return 1


def _jobs_note(log: Path, table: pd.DataFrame, job: int) -> str:
    """One sentence saying that the log mixes jobs and which one is reported."""
    if len(table) <= 1:
        return ""
    r = table.iloc[job - 1]
    return (f"{log} holds {len(table)} jobs (graph, profile version, measurer); this report is "
            f"job {job}: {r['graph']} on {r['profile']} ({r['measurer']}); --job N picks another")


def write_report(log: str | Path, out: str | Path, *, model: str | None = None,
                 hw: str | None = None, job: int | None = None,
                 shapes=None) -> tuple[Path, str]:
    """Write ``out/report.html`` and ``out/<picture>.png`` for one job of ``log`` (see
    :func:`chosen_job`); returns the HTML and, if the log holds several jobs, a note
    saying which one is reported (also on the page, with the table of jobs)."""
    log, out = Path(log), Path(out)
    everything = analysis.load(log)
    table = analysis.jobs(everything)
    number = chosen_job(table, everything, job)
    note = _jobs_note(log, table, number)
    df = analysis.job(everything, number, table) if len(table) else everything
    s = _subject(df, log, model, hw, shapes)
    out.mkdir(parents=True, exist_ok=True)
    pngs = {}
    for name, fig in pictures(s, df).items():
        pngs[name] = out / f"{name}.png"
        plots.save(fig, pngs[name])
    errors = df["error"].value_counts()
    body = [
        f"<h1>Tuning report: {html.escape(s.graph.name)} on {html.escape(s.profile.name)}</h1>",
        f"<p>{html.escape(str(log))}: {len(df)} candidates measured, {int(df['ok'].sum())} "
        f"feasible; best {s.row['latency_s'] * 1e3:.4f} ms ({html.escape(str(s.row['strategy']))}"
        f", trial {s.row['trial']}, measured by {html.escape(str(s.row['measurer']))}"
        f"{_runs(df)}).</p>",
        *([f"<p><b>{html.escape(note)}.</b></p>", "<h2>Jobs in this log</h2>",
           html_table(table)] if note else []),
        "<h2>Best against the baselines</h2>", html_table(analysis.summary(df)),
        "<h2>Strategies</h2>", html_table(analysis.strategy_table(df).reset_index()),
        "<h2>Infeasible candidates</h2>",
        html_table(errors[errors > 0].rename_axis("error").reset_index()) if errors.any()
        else "<p>none</p>",
        "<h2>Convergence</h2>", html_img(pngs["convergence"]),
        *(["<h2>Latency and energy: the front (docs/pareto.md)</h2>",
            html_img(pngs["front"]), html_table(_front_table(df))] if "front" in pngs else []),
        "<h2>Schedule of the best placement (simulated)</h2>", html_img(pngs["gantt"]),
        html_img(pngs["utilisation"]), html_img(pngs["occupancy"]),
        "<h2>The best placement</h2>", html_table(placement_table(s)),
    ]
    page = out / "report.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>autoplace "
                    f"report</title><style>{STYLE}</style></head><body>"
                    + "\n".join(body) + "</body></html>\n", encoding="utf-8")
    return page, note


def _front_table(df: pd.DataFrame) -> pd.DataFrame:
    """The front's records: trial, strategy, latency and energy, and the knee."""
    f = analysis.front(df)
    return pd.DataFrame({"trial": f["trial"], "strategy": f["strategy"].astype(str),
                         "latency (ms)": f["latency"] * 1e3, "energy (mJ)": f["energy"] * 1e3,
                         "knee": f["knee"].map({True: "knee", False: ""})})


def _runs(df: pd.DataFrame) -> str:
    runs = df["run"].nunique()
    return f"; {runs} runs" if runs > 1 else ""
