"""Pictures of schedules and searches, as matplotlib figures.

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, no global
state); ``fig.savefig(path)`` renders them with Agg. Each function takes the tables of
:mod:`autoplace.reports.analysis` or a simulated timeline and returns the figure.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from autoplace.graph import OP_KINDS, OpGraph
from autoplace.measure.base import Event
from autoplace.reports.analysis import critical_path, is_baseline, lanes

# tab10 without its red (the critical path) and grey (sync copies), plus a gold
KIND_COLOURS = dict(zip(OP_KINDS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                   "#e377c2", "#bcbd22", "#17becf", "#e6ab02")))
SYNC_COLOUR, ASYNC_COLOUR, ASYNC_EDGE = "#595959", "#c6dbef", "#2171b5"
ASYNC_HATCH = "////"
CRITICAL_COLOUR = "#d62728"
BAR = 0.72  # bar height in lane units
#: the critical path is outlined only when it holds at most this share of the events: on a
#: chain every event is on it, and outlining them all says nothing
OUTLINE_SHARE = 2 / 3


#: a title's characters per inch of figure at a font size of 12 points (a mean glyph is
#: about 0.6 em wide): past it a title is wrapped, not cut
CHARS_PER_INCH = 72 / (0.6 * 12)


def wrap_title(title: str, width_in: float) -> str:
    """``title`` wrapped into lines that fit ``width_in`` inches of figure."""
    return "\n".join(textwrap.wrap(title, max(20, int(width_in * CHARS_PER_INCH)),
                                    break_long_words=False)) or title


def _lane_rows(timeline: Sequence[Event], units: Sequence[str],
               max_lanes: int) -> tuple[list[str], dict[str, int]]:
    """Lane labels and resource -> lane; past ``max_lanes`` the least busy units and
    engines share one "+N units" / "+N DMA engines" lane each."""
    order = lanes(timeline, units)
    engines = {e.resource for e in timeline if e.kind == "copy" and e.mode == "async"}
    engines -= {e.resource for e in timeline if e.kind == "op" or e.mode == "sync"}
    if len(order) <= max_lanes:
        return order, {r: i for i, r in enumerate(order)}
    busy: dict[str, float] = {}
    for e in timeline:
        busy[e.resource] = busy.get(e.resource, 0.0) + e.end - e.start
    keep = set(sorted(order, key=lambda r: -busy[r])[:max_lanes - 2])
    labels: list[str] = []
    rows: dict[str, int] = {}
    for group, what in (([r for r in order if r not in engines], "units"),
                        ([r for r in order if r in engines], "DMA engines")):
        for r in (r for r in group if r in keep):
            rows[r] = len(labels)
            labels.append(r)
        rest = [r for r in group if r not in keep]
        if rest:
            rows.update({r: len(labels) for r in rest})
            labels.append(f"+{len(rest)} {what}")
    return labels, rows


def _bars(ax, events: list[Event], rows: Mapping[str, int], scale: float, **style) -> None:
    if events:
        ax.barh([rows[e.resource] for e in events], [(e.end - e.start) * scale for e in events],
                left=[e.start * scale for e in events], height=BAR, **style)


def gantt(graph: OpGraph, timeline: Sequence[Event], *, units: Sequence[str] = (),
          title: str = "", max_lanes: int = 24, critical: bool = True) -> Figure:
    """One lane per unit and per DMA engine; ops coloured by kind, sync copies solid (on the
    host), async copies hatched (on their engine), the critical path outlined in red (when
    it is not nearly every event: see :data:`OUTLINE_SHARE`)."""
    labels, rows = _lane_rows(timeline, units, max_lanes)
    kinds = {op.name: op.kind for op in graph.ops}
    scale = 1e3  # seconds -> ms
    fig = Figure(figsize=(11, 1.9 + 0.34 * len(labels)), layout="constrained")
    ax = fig.add_subplot()
    ops = [e for e in timeline if e.kind == "op"]
    for kind in OP_KINDS:  # edged in their own colour: a narrow bar keeps it (not the
        # pale async copies' colour a white edge would leave)
        _bars(ax, [e for e in ops if kinds[e.name] == kind], rows, scale,
              color=KIND_COLOURS[kind], edgecolor=KIND_COLOURS[kind], linewidth=0.4)
    _bars(ax, [e for e in timeline if e.kind == "copy" and e.mode == "sync"], rows, scale,
          color=SYNC_COLOUR, edgecolor=SYNC_COLOUR, linewidth=0.4)
    _bars(ax, [e for e in timeline if e.kind == "copy" and e.mode == "async"], rows, scale,
          facecolor=ASYNC_COLOUR, edgecolor=ASYNC_EDGE, hatch=ASYNC_HATCH, linewidth=0.4)
    path = critical_path(graph, timeline) if critical else []
    outlined = len(path) <= OUTLINE_SHARE * len(timeline)  # on a chain it is everything
    if outlined:
        _bars(ax, path, rows, scale, fill=False, edgecolor=CRITICAL_COLOUR, linewidth=1.4)
    if len(ops) <= 16:
        _label_ops(ax, ops, rows, scale)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, max((e.end for e in timeline), default=1.0) * scale * 1.01)
    ax.grid(axis="x", alpha=0.3)
    note = "" if outlined or not path else \
        f" (critical path: {len(path)} of {len(timeline)} events, not outlined)"
    ax.set_title(wrap_title((title or f"{graph.name}: simulated schedule") + note,
                            fig.get_figwidth()))
    fig.legend(handles=_gantt_legend({kinds[e.name] for e in ops}, timeline,
                                     bool(path) and outlined),
               loc="outside lower center", ncol=6, fontsize="small", frameon=False)
    return fig


def _label_ops(ax, ops: list[Event], rows: Mapping[str, int], scale: float) -> None:
    """Op names inside bars wide enough to hold them (small graphs only)."""
    span = max(e.end for e in ops) * scale
    for e in ops:
        if (e.end - e.start) * scale > 0.06 * span:
            ax.text((e.start + e.end) / 2 * scale, rows[e.resource], e.name[:18],
                    ha="center", va="center", fontsize="x-small", color="white", clip_on=True)


def _gantt_legend(kinds: set[str], timeline: Sequence[Event], critical: bool) -> list[Patch]:
    modes = {e.mode for e in timeline if e.kind == "copy"}
    handles = [Patch(color=KIND_COLOURS[k], label=k) for k in OP_KINDS if k in kinds]
    if "sync" in modes:
        handles.append(Patch(color=SYNC_COLOUR, label="sync copy (host)"))
    if "async" in modes:
        handles.append(Patch(facecolor=ASYNC_COLOUR, edgecolor=ASYNC_EDGE, hatch=ASYNC_HATCH,
                             label="async copy (DMA)"))
    if critical:
        handles.append(Patch(fill=False, edgecolor=CRITICAL_COLOUR, linewidth=1.4,
                             label="critical path"))
    return handles


def convergence(curves: pd.DataFrame, by: str = "log", *,
                labels: Mapping[str, str] | None = None,
                baselines: Mapping[str, float] | None = None, title: str = "",
                zoom: bool = True) -> Figure:
    """Best latency so far (ms) against candidates measured, one line per ``by`` group of
    :func:`autoplace.reports.analysis.convergence`; each candidate a faint dot; ``baselines``
    (name -> seconds) as dashed reference lines. ``zoom`` adds a second panel with the
    lines alone, from the best latency to the worst final one (where the runs differ)."""
    fig = Figure(figsize=(13 if zoom else 9, 5), layout="constrained")
    axes = fig.subplots(1, 2, width_ratios=(3, 2)) if zoom else [fig.add_subplot()]
    ax = axes[0]
    colours = colormaps["tab10"].colors
    for i, key in enumerate(pd.unique(curves[by])):  # in order of appearance
        g = curves[curves[by] == key]
        c = colours[i % len(colours)]
        ax.scatter(g["n"], g["latency_s"] * 1e3, s=7, color=c, alpha=0.3, linewidths=0)
        for a in axes:  # earlier lines wider: runs that coincide stay visible under later ones
            a.step(g["n"], g["best_s"] * 1e3, where="post", color=c, gid="best",
                   label=(labels or {}).get(key, str(key)) if a is ax else None,
                   linewidth=max(1.0, 2.8 - 0.35 * i))
    levels = _baseline_lines(ax, baselines or {})
    lat = pd.concat([curves["latency_s"], pd.Series(levels, dtype=float)]).dropna()
    if len(lat) and lat.max() > 8 * lat.min():
        ax.set_yscale("log")
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(FuncFormatter(lambda v, _: f"{v:g}"))
    for a in axes:
        a.set_xlabel("candidates measured")
        a.set_ylabel("latency (ms)")
        a.grid(alpha=0.3, which="both")
    ax.set_title(title or "best latency so far (line) and each candidate (dots)")
    if zoom:
        _zoom(axes[1], curves, by, baselines or {})
    fig.legend(loc="outside lower center", ncol=4, fontsize="small", frameon=False)
    return fig


def _zoom(ax, curves: pd.DataFrame, by: str, baselines: Mapping[str, float]) -> None:
    """Limit ``ax`` to the runs' final best latencies; draw the baselines in that range."""
    final = curves.groupby(by, observed=True)["best_s"].last().dropna() * 1e3
    if len(final):
        low, high = final.min(), final.max()
        pad = max(high - low, 0.02 * low) * 0.15
        ax.set_ylim(low - pad, high + 2 * pad)
        _baseline_lines(ax, {k: v for k, v in baselines.items()
                             if low - pad <= v * 1e3 <= high + 2 * pad})
    ax.set_title("the best so far, zoomed to the final values")


def _baseline_lines(ax, baselines: Mapping[str, float]) -> list[float]:
    """Dashed lines at the baselines' latencies (names sharing one merged); the levels."""
    same: dict[float, list[str]] = {}
    for name, secs in baselines.items():
        if secs == secs:  # an infeasible baseline (NaN) has no line
            same.setdefault(round(secs, 12), []).append(name)
    for j, (secs, names) in enumerate(sorted(same.items())):
        ax.axhline(secs * 1e3, color="0.45", linestyle=(0, (4, 3)), linewidth=1)
        more = f" +{len(names) - 2} more" if len(names) > 2 else ""
        # labels side by side in turn, so two close levels do not print over each other
        ax.annotate(f"{', '.join(sorted(names)[:2])}{more}: {secs * 1e3:.4g} ms",
                    (0.34 * (j % 3), secs * 1e3), xycoords=("axes fraction", "data"),
                    xytext=(4, 3),
                    textcoords="offset points", fontsize="small", color="0.25",
                    bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
    return list(same)


def utilisation(util: pd.DataFrame, *, title: str = "") -> Figure:
    """Busy fraction of each resource over time (rows of
    :func:`autoplace.reports.analysis.utilisation`) as a heat map."""
    end = util.attrs.get("end_s", 0.0) * 1e3
    fig = Figure(figsize=(11, 1.6 + 0.3 * len(util)), layout="constrained")
    ax = fig.add_subplot()
    im = ax.imshow(util.to_numpy(), aspect="auto", cmap="Blues", vmin=0.0, vmax=1.0,
                   extent=(0.0, end, len(util) - 0.5, -0.5), interpolation="nearest")
    ax.set_yticks(range(len(util)), util.index)
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "utilisation over time")
    fig.colorbar(im, ax=ax, label="busy fraction", pad=0.01, fraction=0.03)
    return fig


def occupancy(occ: pd.DataFrame, *, capacities: Mapping[str, int] | None = None,
              max_scopes: int = 8, title: str = "") -> Figure:
    """Live bytes per memory scope over time (steps of
    :func:`autoplace.reports.analysis.occupancy`); beyond ``max_scopes`` the scopes with the lower
    peaks are summed into one line; a scope's capacity is drawn when it is in range."""
    wide = occ.pivot_table(index="t", columns="scope", values="live_bytes", aggfunc="last",
                           observed=True).sort_index().ffill().fillna(0)
    order = wide.max().sort_values(ascending=False).index.tolist()
    if len(order) > max_scopes:
        rest = order[max_scopes - 1:]
        wide = wide[order[:max_scopes - 1]].assign(**{f"+{len(rest)} scopes": wide[rest].sum(1)})
    top = float(wide.to_numpy().max()) if wide.size else 0.0
    unit, div = ("MiB", 2**20) if top >= 2**20 else ("KiB", 2**10)
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax = fig.add_subplot()
    colours = colormaps["tab10"].colors
    for i, scope in enumerate(wide.columns):
        c = colours[i % len(colours)]
        ax.step(wide.index * 1e3, wide[scope] / div, where="post", color=c, label=str(scope))
    caps: dict[int, list[str]] = {}
    for scope in wide.columns:
        cap = (capacities or {}).get(scope)
        if cap and cap <= 1.5 * top:
            caps.setdefault(cap, []).append(str(scope))
    colour_of = {str(s): colours[i % len(colours)] for i, s in enumerate(wide.columns)}
    for cap, names in sorted(caps.items()):
        more = f" +{len(names) - 2}" if len(names) > 2 else ""
        text = f"capacity of {', '.join(names[:2])}{more}"
        # in its scope's colour, named on the line itself (shared by several: grey)
        colour = colour_of[names[0]] if len(names) == 1 else "0.3"
        ax.axhline(cap / div, color=colour, linestyle=(0, (4, 3)), linewidth=1.2, label=text)
        ax.annotate(f"{text}: {cap / div:.4g} {unit}", (0.99, cap / div),
                    xycoords=("axes fraction", "data"), xytext=(0, 3),
                    textcoords="offset points", ha="right", fontsize="small", color=colour)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel(f"live bytes ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(title or "memory occupancy per scope")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def pipeline_grid(stage: np.ndarray, busy: np.ndarray, *, title: str = "") -> Figure:
    """A pipelined plan on the mesh (:func:`autoplace.pipeline.layout.grid_maps`): each PE's
    stage (-1: unused, blank) and the share of each period its busiest unit computes, each
    with its colour bar; titles wrapped to the figure's width."""
    rows, cols = stage.shape
    width = min(16.0, max(10.0, 2.5 + 0.24 * cols))
    fig = Figure(figsize=(width, max(4.5, 2.2 + width * rows / (2.6 * cols))),
                 layout="constrained")
    left, right = fig.subplots(1, 2)
    n = int(stage.max()) + 1
    cmap = colormaps["tab20"].resampled(max(n, 1))
    im = left.imshow(np.ma.masked_less(stage, 0), cmap=cmap, vmin=-0.5, vmax=n - 0.5,
                     interpolation="nearest")
    panel = width / 2 - 1.2  # a panel's share of the width, its colour bar's off
    left.set_title(wrap_title("stage of each PE (blank: unused)", panel), fontsize="medium")
    fig.colorbar(im, ax=left, label="stage", ticks=range(0, n, max(1, n // 12)),
                 fraction=0.05)
    im = right.imshow(np.ma.masked_less(busy, 0), cmap="Blues", vmin=0.0, vmax=1.0,
                      interpolation="nearest")
    right.set_title(wrap_title("busy share of a period", panel), fontsize="medium")
    fig.colorbar(im, ax=right, label="its busiest unit's share", fraction=0.05)
    for ax in (left, right):
        ax.set_xlabel("column")
        ax.set_ylabel("row")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(wrap_title(title or "the plan on the grid", width))
    return fig


def pipeline_period(work: Sequence[tuple], start: float, period: float,
                    lanes_: Sequence[str], *, periods: int = 1, copies: int = 1,
                    title: str = "") -> Figure:
    """``periods`` periods of one copy's stream in steady state (``work`` and ``period``
    of :func:`autoplace.pipeline.stream.steady_window`, the period its record holds): per
    stage (``lanes_``: :func:`autoplace.pipeline.stream.lanes`), its PEs' units and its DMA
    engines, each piece of work coloured by the inference it belongs to (a legend names
    each colour; DMA work hatched), the periods' bounds dashed."""
    from autoplace.pipeline.plan import rate_text

    row = {name: i for i, name in enumerate(lanes_)}
    fig = Figure(figsize=(11, 2.2 + 0.32 * len(lanes_)), layout="constrained")
    ax = fig.add_subplot()
    colour = _inference_colours(sorted({w[3] for w in work}))
    for res, a, b, inference, _ in work:
        ax.barh(row[res], (b - a) * 1e3, left=(a - start) * 1e3, height=BAR,
                color=colour[inference], edgecolor="white", linewidth=0.5,
                hatch=ASYNC_HATCH if res.endswith(".dma") else None)
        if (b - a) > 0.08 * period:
            ax.text((a + b - 2 * start) / 2 * 1e3, row[res], str(inference), ha="center",
                    va="center", fontsize="x-small", color="white")
    for k in range(1, periods):
        ax.axvline(k * period * 1e3, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(lanes_)), lanes_)
    ax.invert_yaxis()
    ax.set_xlim(0, periods * period * 1e3)
    ax.set_xlabel("time in steady state (ms); bars: which inference (number); hatched: DMA")
    shown = f"{periods} periods" if periods > 1 else "one period"
    ax.set_title(title or wrap_title(f"{shown} of one copy's stream in steady state; "
                                     f"{rate_text(period, copies)}", fig.get_figwidth()))
    handles = [Patch(color=c, label=f"inference {i}") for i, c in colour.items()]
    handles.append(Patch(facecolor="0.6", edgecolor="white", hatch=ASYNC_HATCH,
                         label="DMA (hatched)"))
    fig.legend(handles=handles, loc="outside lower center", fontsize="small", frameon=False,
               ncol=min(8, len(handles)))
    return fig


def _inference_colours(inferences: Sequence[int]) -> dict[int, tuple]:
    """A distinct colour per inference shown: tab20's, or a colour map's past 20."""
    if len(inferences) <= 20:
        colours = colormaps["tab20"].colors
    else:
        colours = colormaps["turbo"].resampled(len(inferences))(range(len(inferences)))
    return {i: tuple(colours[k]) for k, i in enumerate(inferences)}


def pipeline_search(trials: pd.DataFrame, *, bound: float | None = None,
                    reference: tuple[str, float] | None = None, title: str = "") -> Figure:
    """A pipeline search: each trial's streamed throughput (dots; ``trial``, ``throughput``,
    NaN for plans that do not fit), the best so far (line), ``reference`` (``(label,
    inferences/s)``: :func:`autoplace.pipeline.plan_space.dp_reference`; default: trial
    0's) and ``bound`` as dashed lines."""
    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(trials["trial"], trials["throughput"], s=7, alpha=0.35, linewidths=0)
    ax.step(trials["trial"], trials["throughput"].cummax().ffill(), where="post", linewidth=2,
            label="best so far")
    label, level = reference or ("the DP's plan (trial 0)", trials["throughput"].iloc[0])
    ax.axhline(level, linestyle="--", color="grey", label=label)
    if bound:
        ax.axhline(bound, linestyle=":", color="black", label="bound")
    ax.set_xlabel("trial")
    ax.set_ylabel("inferences/s (streamed, over every copy)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(title or "pipeline search")
    return fig


def front(points: pd.DataFrame, on_front: pd.DataFrame, history: pd.DataFrame, *,
          criteria: Sequence[str] = ("latency", "energy"), title: str = "") -> Figure:
    """Left: every valid candidate (``points``, rows of
    :func:`autoplace.reports.analysis.front_figures`) by two criteria, the front
    (``on_front``, :func:`autoplace.reports.analysis.front`) as a staircase, its knee ringed,
    the baselines labelled; right: the front's hypervolume after each candidate
    (``history``, :func:`autoplace.reports.analysis.hypervolume_history`)."""
    from autoplace.measure.objective import CRITERIA

    (cx, cy), (ux, uy) = criteria, (CRITERIA[c] for c in criteria)
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    ax, hv = fig.subplots(1, 2, width_ratios=(3, 2))
    base = is_baseline(points["strategy"])
    ax.scatter(points[cx] * ux.scale, points[cy] * uy.scale, s=9, color="0.7",
               label="candidates", zorder=1)
    stairs = on_front.sort_values(cx)
    ax.step(stairs[cx] * ux.scale, stairs[cy] * uy.scale, where="post", color=ASYNC_EDGE,
            marker="o", markersize=4, label="front", zorder=3)
    knee = stairs[stairs["knee"]]
    ax.scatter(knee[cx] * ux.scale, knee[cy] * uy.scale, s=140, facecolors="none",
               edgecolors=CRITICAL_COLOUR, linewidths=1.5, label="knee", zorder=4)
    at = points[base].drop_duplicates("strategy").groupby([cx, cy], sort=False)["strategy"]
    for (x, y), names in at:  # baselines at one point: one label
        ax.scatter(x * ux.scale, y * uy.scale, marker="s", s=30, color="0.25", zorder=2)
        ax.annotate(", ".join(sorted(map(str, names))), (x * ux.scale, y * uy.scale),
                    xytext=(4, 4), textcoords="offset points", fontsize="small", color="0.25")
    ax.set_xlabel(f"{cx} ({ux.unit})")
    ax.set_ylabel(f"{cy} ({uy.unit})")
    ax.set_title(title or f"{cx} against {cy}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    hv.plot(history["n"], history["hypervolume"] * ux.scale * uy.scale, color=ASYNC_EDGE)
    hv.set_xlabel("candidates measured")
    hv.set_ylabel(f"hypervolume ({ux.unit} x {uy.unit}, to the worst candidate)")
    hv.set_title("the front's hypervolume so far")
    hv.grid(alpha=0.3)
    return fig


def save(fig: Figure, path, *, dpi: int = 110) -> None:
    """Write ``fig`` as a PNG (Agg)."""
    fig.savefig(path, dpi=dpi)


__all__ = ["gantt", "convergence", "utilisation", "occupancy", "pipeline_grid",
           "pipeline_period", "pipeline_search", "save", "KIND_COLOURS"]
