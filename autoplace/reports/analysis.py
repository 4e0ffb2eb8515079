"""Tuning logs and simulated timelines as pandas tables.

:func:`load` (from :mod:`autoplace.records.tuning_log`) gives one row per measured candidate; the
functions here derive the views the report and the experiments need: placements per op,
convergence curves, best-versus-baselines summaries, the Optuna study joined on trial
number, and from a simulated timeline its critical path, unit utilisation and the live
bytes of each memory scope over time (the buffer rules of docs/simulator.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from autoplace.graph import OpGraph
from autoplace.measure.base import Event
from autoplace.pipeline.log import read_lines
from autoplace.pipeline.plan_space import plan_of
from autoplace.records.front import Limits
from autoplace.records.tuning_log import JOB, load

__all__ = [
    "load", "load_pipeline", "pipeline_frame", "jobs", "job", "placements", "is_baseline",
    "convergence", "summary", "front", "hypervolume_history", "front_figures",
    "strategy_table", "study_trials", "join_study", "critical_path", "buffers", "occupancy",
    "utilisation", "lanes",
]

COPY_IN = ("none", "sync", "async", "mixed")


# -- logs -----------------------------------------------------------------------------------
def load_pipeline(*paths) -> pd.DataFrame:
    """The trials of one or more pipeline search logs (``autoplace pipeline --log``) as a
    frame (:func:`pipeline_frame`)."""
    if not paths:
        raise ValueError("load_pipeline() needs at least one log path")
    return pipeline_frame([(path, read_lines(path)) for path in paths])


def pipeline_frame(logs: Sequence[tuple[object, list[dict]]]) -> pd.DataFrame:
    """The lines of pipeline logs, ``(path, lines)`` each, one row per trial: ``log``,
    ``seq``, graph, profile, run, seed, trial, move, status, ``stages``, ``pes`` (of one copy),
    ``replicas``, ``pes_used``, ``period_s`` (one copy's stream), ``analytic_period_s`` and
    ``throughput`` (inferences/s over every copy; NaN unless the status is ``ok``)."""
    rows = []
    for path, lines in logs:
        for seq, line in enumerate(lines):
            plan = plan_of(line)
            rows.append({"log": str(path), "seq": seq, **{k: line[k] for k in (
                "graph", "graph_fp", "profile", "profile_hash", "run", "seed", "trial", "move",
                "status")}, "stages": len(plan.stages), "pes": plan.pes,
                "replicas": plan.replicas, "pes_used": plan.pes * plan.replicas,
                **{k: line[k] for k in ("period_s", "analytic_period_s", "throughput")}})
    if not rows:
        raise ValueError(f"{', '.join(str(path) for path, _ in logs)}: no pipeline trial")
    df = pd.DataFrame(rows)
    for col in ("log", "graph", "profile", "run", "move", "status"):
        df[col] = df[col].astype("category")
    return df.astype({k: "float64" for k in ("period_s", "analytic_period_s", "throughput")})


def jobs(df: pd.DataFrame) -> pd.DataFrame:
    """The jobs of a log frame (records of one graph, profile version and measurer:
    :data:`~autoplace.records.tuning_log.JOB`), numbered from 1 in order of first appearance.

    Columns: ``job``, graph, profile, measurer, graph_fp, profile_hash, ``records``,
    ``runs`` (distinct run ids) and ``best_ms`` (NaN if none is feasible).
    """
    cols = ["job", "graph", "profile", "measurer", *JOB[:2], "records", "runs", "best_ms"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    d = df.assign(lat_ms=df["latency_s"].where(df["ok"]) * 1e3)
    g = d.groupby(list(JOB), observed=True, sort=False)
    out = g.agg(graph=("graph", "first"), profile=("profile", "first"),
                records=("trial", "size"), runs=("run", "nunique"),
                best_ms=("lat_ms", "min")).reset_index()  # in order of first row
    out.insert(0, "job", range(1, len(out) + 1))
    for col in ("graph", "profile", "measurer", *JOB[:2]):
        out[col] = out[col].astype(str)
    return out[cols]


def job(df: pd.DataFrame, number: int, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of job ``number`` of :func:`jobs` (from 1); ``table``: ``jobs(df)`` if the
    caller has it already."""
    table = jobs(df) if table is None else table
    if not 1 <= number <= len(table):
        raise ValueError(f"job {number}: the log holds {len(table)} job(s)")
    key = table.iloc[number - 1]
    mask = np.logical_and.reduce([df[k].astype(str) == key[k] for k in JOB])
    return df[mask]


def placements(df: pd.DataFrame, graph: OpGraph | None = None) -> pd.DataFrame:
    """One row per (candidate, op): ``candidate`` (the row label in ``df``), log, trial,
    strategy, op, unit, scope, ``copy_in`` (mode of the copies into the op: none, sync,
    async or mixed) and ``n_copies_in``. With ``graph``, also ``kind`` and ``op_index``
    (ops in graph order; otherwise by name). ``df`` needs a unique index. Meant for a
    selection of rows: it parses each row's placement (about 0.5 s per 1,000 rows of
    resnet50).
    """
    order = {op.name: i for i, op in enumerate(graph.ops)} if graph else None
    kinds = {op.name: op.kind for op in graph.ops} if graph else None
    rows = [row for label, text in df["placement"].items()
            for row in _op_rows(label, json.loads(text), order)]
    out = pd.DataFrame(rows, columns=["candidate", "op", "unit", "scope", "copy_in",
                                      "n_copies_in"])
    keep = [c for c in ("log", "trial", "strategy") if c in df]
    out = out.join(df[keep], on="candidate")[["candidate", *keep, *out.columns[1:]]]
    if graph:
        out.insert(out.columns.get_loc("op") + 1, "kind", out["op"].map(kinds))
        out.insert(out.columns.get_loc("op"), "op_index", out["op"].map(order))
    for col in ("op", "unit", "scope", *(("kind",) if graph else ())):
        out[col] = out[col].astype("category")
    out["copy_in"] = out["copy_in"].astype(pd.CategoricalDtype(COPY_IN))
    return out


def _op_rows(label, p: dict, order: dict[str, int] | None) -> list[tuple]:
    """(candidate, op, unit, scope, copy_in, n_copies_in) of one placement's ops."""
    modes: dict[str, list[str]] = {}
    for edge, mode in p.get("copies", {}).items():
        modes.setdefault(edge.split("->", 1)[1], []).append(mode)
    names = sorted(p["ops"], key=order.__getitem__) if order else sorted(p["ops"])
    rows = []
    for name in names:
        m = set(modes.get(name, ()))
        copy_in = "none" if not m else m.pop() if len(m) == 1 else "mixed"
        rows.append((label, name, p["ops"][name]["unit"], p["ops"][name]["scope"], copy_in,
                     len(modes.get(name, ()))))
    return rows


#: strategies of reference placements: measured before the search (``single:<unit>``,
#: greedy) or as its first candidate (heft); the report compares the best against them
BASELINES = ("greedy", "heft")


def is_baseline(strategy: pd.Series) -> pd.Series:
    """Rows of reference placements (``single:<unit>``, greedy, heft), not search proposals."""
    s = strategy.astype(str)
    return s.str.startswith("single:") | s.isin(BASELINES)


def convergence(df: pd.DataFrame, by: str | Sequence[str] = "log", *,
                search_only: bool = False) -> pd.DataFrame:
    """Best latency so far against measured candidates, per group of ``by``.

    Columns: the ``by`` columns, ``n`` (candidates measured in the group, from 1),
    ``latency_s`` (NaN if infeasible) and ``best_s`` (lowest so far; NaN before the first
    feasible one). Rows keep log order. ``search_only`` drops the baselines first.
    """
    by = [by] if isinstance(by, str) else list(by)
    d = df[~is_baseline(df["strategy"])] if search_only else df
    d = d.sort_values(["log", "seq"], kind="stable") if "seq" in d else d
    out = d[by + ["latency_s"]].copy()
    out["latency_s"] = out["latency_s"].where(d["ok"])
    grouped = out.assign(inf=out["latency_s"].fillna(np.inf)).groupby(
        by, observed=True, sort=False)
    out.insert(len(by), "n", grouped.cumcount() + 1)
    out["best_s"] = grouped["inf"].cummin().replace(np.inf, np.nan)
    return out.reset_index(drop=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Best candidate against each baseline, per job (graph, profile version, measurer).

    One row for the best feasible candidate (``role`` = best) and one per baseline: strategy,
    trial, latency and energy, ``vs_best`` (latency / best latency), ``period_ms`` (a
    stream's time per inference, where the measurer models one and it fits), error if
    infeasible.
    """
    rows = []
    for _, g in df.groupby(list(JOB), observed=True, sort=False):
        graph, profile = g["graph"].iloc[0], g["profile"].iloc[0]
        ok = g[g["ok"]]
        top = ok.loc[ok["latency_s"].idxmin()] if len(ok) else None
        best_s = top["latency_s"] if top is not None else np.nan
        picks = ([("best", top)] if top is not None else []) + [
            ("baseline", r) for _, r in g[is_baseline(g["strategy"])]
            .drop_duplicates("strategy").iterrows()]
        for role, r in picks:
            rows.append({"graph": graph, "profile": profile, "role": role,
                         "strategy": r["strategy"], "trial": r["trial"],
                         "latency_ms": r["latency_s"] * 1e3, "vs_best": r["latency_s"] / best_s,
                         "period_ms": r["period_s"] * 1e3, "energy_mj": r["energy_j"] * 1e3,
                         "error": "" if r["ok"] else str(r["error"])})
    return pd.DataFrame(rows, columns=["graph", "profile", "role", "strategy", "trial",
                                       "latency_ms", "vs_best", "period_ms", "energy_mj",
                                       "error"])


def front(df: pd.DataFrame, criteria: Sequence[str] = ("latency", "energy"),
          limits: Limits | None = None) -> pd.DataFrame:
    """The rows of :func:`load`'s frame that no other row beats on every one of
    ``criteria`` (as :func:`autoplace.records.front.front` chooses records: valid rows
    ``limits`` admits, of equal figures the lowest trial), per job, best by the first
    criterion first; a column per criterion (``peak_memory``: the peak bytes summed over
    scopes) and ``knee`` (the job's :func:`~autoplace.records.front.knee`)."""
    from autoplace.records import front as fr

    crit, limits = fr.criteria_named(criteria), limits or fr.Limits()
    d = front_figures(df[df["ok"]], [c.name for c in crit])
    keep = limits.keeps(d["latency_s"], d["energy_j"],
                        lambda scope: d.get(f"peak_bytes.{scope}", np.nan))
    names = [c.name for c in crit]
    d = d[keep & d[names].notna().all(axis=1)].sort_values("trial", kind="stable")
    parts = [_front_of(g, names) for _, g in d.groupby(list(JOB), observed=True, sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else d.assign(knee=False)[:0]


def hypervolume_history(df: pd.DataFrame, criteria: Sequence[str] = ("latency", "energy"),
                        reference: Sequence[float] | None = None) -> pd.DataFrame:
    """The hypervolume of one job's front (:func:`front`'s rows of what was measured so
    far) after each measured candidate, in log order: columns ``n`` (candidates measured,
    from 1) and ``hypervolume`` (0 before the first valid one). ``reference``: the point it
    is measured up to, per criterion (default: each criterion's worst valid figure, so the
    job's worst points add nothing)."""
    from autoplace.records.front import hypervolume, nondominated

    d = front_figures(df.sort_values(["log", "seq"], kind="stable") if "seq" in df else df,
                      criteria)
    ok = d["ok"].to_numpy() & d[list(criteria)].notna().all(axis=1).to_numpy()
    F = d[list(criteria)].to_numpy(dtype=np.float64)
    ref = np.asarray(reference if reference is not None else
                     (F[ok].max(axis=0) if ok.any() else np.ones(len(criteria))))
    volumes, kept = [], np.zeros((0, len(criteria)))
    for f, good in zip(F, ok):
        if good:
            kept = np.vstack([kept, f])
            kept = kept[nondominated(kept)]
        volumes.append(hypervolume(kept, ref) if len(kept) else 0.0)
    return pd.DataFrame({"n": np.arange(1, len(d) + 1), "hypervolume": volumes})


def front_figures(df: pd.DataFrame, criteria: Sequence[str]) -> pd.DataFrame:
    """``df`` with a column per criterion named after it, in the result's own unit
    (``peak_memory``: the ``peak_bytes.*`` columns summed)."""
    d = df.copy()
    peaks = d.columns[d.columns.str.startswith("peak_bytes.")]
    d["peak_memory"] = d[peaks].astype("float64").sum(axis=1, min_count=1)
    fields = {"latency": "latency_s", "throughput": "period_s", "energy": "energy_j",
              "peak_memory": "peak_memory"}
    for c in criteria:
        d[c] = d[fields[c]].astype("float64")
    return d


def _front_of(g: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """One job's front rows (see :func:`front`)."""
    from autoplace.records.front import knee, nondominated

    F = g[names].to_numpy()
    out = g[nondominated(F)].sort_values(names, kind="stable")
    return out.assign(knee=np.arange(len(out)) == knee(out[names].to_numpy()))


def strategy_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: candidates measured, feasible ones, best and median latency (ms)."""
    g = df.assign(lat_ms=df["latency_s"].where(df["ok"]) * 1e3).groupby(
        "strategy", observed=True)
    out = pd.DataFrame({"measured": g.size(), "feasible": g["ok"].sum(),
                        "best_ms": g["lat_ms"].min(), "median_ms": g["lat_ms"].median()})
    return out.sort_values("best_ms")


def study_trials(storage: str, study_name: str | None = None) -> pd.DataFrame:
    """``study.trials_dataframe()`` of an Optuna study (the only one in ``storage`` if no
    name is given); ``storage`` as ``--storage`` takes it (``journal:PATH``, a journal
    file's bare path, ``sqlite:///PATH``, ``postgresql://...``)."""
    import optuna

    from autoplace.search.study_storage import open_storage

    store = open_storage(storage)
    if study_name is None:
        names = optuna.get_all_study_names(store)
        if len(names) != 1:
            raise ValueError(f"{storage}: name the study, it holds {len(names)}: {names}")
        study_name = names[0]
    return optuna.load_study(study_name=study_name, storage=store).trials_dataframe()


def join_study(df: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The log rows joined with a study's trials on trial number (``trials_dataframe()``
    columns get a ``study.`` prefix; log rows without a trial keep NaN there)."""
    t = trials.add_prefix("study.").rename(columns={"study.number": "trial"})
    return df.merge(t, on="trial", how="left", validate="many_to_one")


# -- timelines ------------------------------------------------------------------------------
def lanes(timeline: Sequence[Event], units: Sequence[str] = ()) -> list[str]:
    """Resources of a timeline, units first (in ``units`` order, then by first use), then
    DMA engines (resources that only ever run async copies)."""
    first: dict[str, float] = {}
    unit_like = set(units)
    for e in sorted(timeline, key=lambda e: e.start):
        first.setdefault(e.resource, e.start)
        if e.kind == "op" or e.mode == "sync":
            unit_like.add(e.resource)
    rank = {u: i for i, u in enumerate(units)}
    used = [r for r in first if r in unit_like]
    used.sort(key=lambda r: (rank.get(r, len(rank)), first[r]))
    return used + [r for r in first if r not in unit_like]


def _edge_index(graph: OpGraph) -> dict[str, int]:
    return {graph.edge_name(k): k for k in range(len(graph.edges))}


def _hops(graph: OpGraph, timeline: Sequence[Event]) -> dict[str, list[Event]]:
    """The hops of each edge's copy, in time order (a block unit's reads and writes of the
    block model are copies of no edge: left out)."""
    edges = _edge_index(graph)
    hops: dict[str, list[Event]] = {}
    for e in sorted(timeline, key=lambda e: (e.start, e.end)):
        if e.kind == "copy" and e.name in edges:
            hops.setdefault(e.name, []).append(e)
    return hops


def critical_path(graph: OpGraph, timeline: Sequence[Event]) -> list[Event]:
    """The chain of events that sets the latency, in time order.

    From the op that ends last, step back to whatever made each event start when it did:
    an input (the producer op, or the last hop of the copy bringing it) that arrived at
    that moment, else the previous work on the same resource. In the block model, a block
    unit's copies ("fpga0 inputs", "fpga0 outputs": no edge of the graph) read the inputs of
    its block, each present at its producer's end (a block's end if made by one), and write
    its outputs after its ops.
    """
    if not timeline:
        return []
    causes = _Causes(graph, timeline)
    tol = 1e-12 * max(e.end for e in timeline)
    path = [max(causes.ops.values(), key=lambda e: e.end)]
    on_path = {id(path[0])}
    while path[-1].start > tol:
        e = path[-1]
        nxt = next((p for p in causes.inputs(e) + causes.previous(e, tol)
                    if abs(p.end - e.start) <= tol and id(p) not in on_path), None)
        if nxt is None:
            break
        path.append(nxt)
        on_path.add(id(nxt))
    return path[::-1]


class _Causes:
    """The events a timeline's event may have waited for (see :func:`critical_path`)."""

    def __init__(self, graph: OpGraph, timeline: Sequence[Event]):
        self.graph, self.edges, self.ins = graph, _edge_index(graph), graph.in_edges()
        self.ops = {e.name: e for e in timeline if e.kind == "op"}
        self.hops = _hops(graph, timeline)
        self.per_res: dict[str, list[Event]] = {}
        for e in sorted(timeline, key=lambda e: (e.start, e.end)):
            self.per_res.setdefault(e.resource, []).append(e)
        self.rank = {id(e): j for events in self.per_res.values() for j, e in enumerate(events)}
        self.block_end = {e.resource: self.per_res[e.resource][-1] for e in timeline
                          if e.kind == "copy" and e.name not in self.edges}

    def previous(self, e: Event, tol: float) -> list[Event]:
        """The work before ``e`` on its resource, if it ended by ``e``'s start (ops that
        take no time run in the timeline's order)."""
        before = self.per_res[e.resource][:self.rank[id(e)]]
        return [p for p in before if p.end <= e.start + tol][-1:]

    def producer(self, k: int) -> Event:
        return self.ops[self.graph.ops[self.graph.edges[k].src].name]

    def arrival(self, k: int, where: str) -> Event:
        """The event that makes edge ``k``'s tensor present on resource ``where``."""
        name, src = self.graph.edge_name(k), self.producer(k)
        if name in self.hops:
            return self.hops[name][-1]
        return src if src.resource == where else self.block_end.get(src.resource, src)

    def inputs(self, e: Event) -> list[Event]:
        """What ``e`` read: its inputs' arrivals, a hop's previous hop or producer."""
        if e.kind == "op":
            return [self.arrival(k, e.resource) for k in self.ins[self.graph.index(e.name)]]
        if e.name in self.hops:
            chain = self.hops[e.name]
            j = chain.index(e)
            return [chain[j - 1]] if j else [self.producer(self.edges[e.name])]
        if e.name != f"{e.resource} inputs":  # a block's outputs: after its ops
            return []
        return [self.arrival(k, e.resource) for i, op in enumerate(self.graph.ops)
                if self.ops[op.name].resource == e.resource for k in self.ins[i]
                if self.producer(k).resource != e.resource]


def buffers(graph: OpGraph, timeline: Sequence[Event]) -> pd.DataFrame:
    """Every buffer of a simulated run: scope, nbytes, alloc and free time (the rules of
    docs/simulator.md; graph inputs and weights are not counted)."""
    ops = {e.name: e for e in timeline if e.kind == "op"}
    hops, outs = _hops(graph, timeline), graph.out_edges()
    makespan = max((e.end for e in ops.values()), default=0.0)
    rows = []
    for i, op in enumerate(graph.ops):
        ev = ops[op.name]
        free = ev.end if outs[i] else makespan
        for k in outs[i]:
            name, dst = graph.edge_name(k), ops[graph.ops[graph.edges[k].dst].name]
            free = max(free, hops[name][0].end if name in hops else dst.end)
        rows.append((ev.dst, op.output_bytes, ev.start, free))
    index = _edge_index(graph)
    for name, chain in hops.items():
        edge = graph.edges[index[name]]
        nbytes, consumer = edge.nbytes, ops[graph.ops[edge.dst].name]
        for j, hop in enumerate(chain):
            free = chain[j + 1].end if j + 1 < len(chain) else consumer.end
            rows.append((hop.dst, nbytes, hop.start, free))
    return pd.DataFrame(rows, columns=["scope", "nbytes", "alloc", "free"])


def occupancy(graph: OpGraph, timeline: Sequence[Event],
              held: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Live bytes per scope over time: rows (scope, t, live_bytes), a step function that
    holds ``live_bytes`` from ``t`` to the scope's next ``t``. ``held`` (e.g.
    ``Simulator.held``: weights and graph inputs) is added from t = 0 to the end. With it,
    the maximum per scope is the simulator's ``peak_bytes`` (frees before allocations at
    equal times)."""
    b = buffers(graph, timeline)
    end = max((e.end for e in timeline), default=0.0)
    base = [(s, t, sign * n) for s, n in (held or {}).items() for t, sign in ((0.0, 1), (end, -1))]
    held_ev = pd.DataFrame({"scope": [x[0] for x in base], "t": [x[1] for x in base],
                            "delta": [x[2] for x in base]}).astype({"t": float, "delta": "int64"})
    ev = pd.concat([
        held_ev,
        pd.DataFrame({"scope": b["scope"], "t": b["alloc"], "delta": b["nbytes"]}),
        pd.DataFrame({"scope": b["scope"], "t": b["free"], "delta": -b["nbytes"]}),
    ]).sort_values(["scope", "t", "delta"], kind="stable")
    ev["live_bytes"] = ev.groupby("scope")["delta"].cumsum()
    steps = ev.groupby(["scope", "t"], sort=True).last().reset_index()
    return steps[["scope", "t", "live_bytes"]]


def utilisation(timeline: Sequence[Event], bins: int = 60,
                units: Sequence[str] = ()) -> pd.DataFrame:
    """Busy fraction of each resource (rows, in :func:`lanes` order) in ``bins`` equal time
    bins over the run (columns: bin start in seconds; ``attrs["end_s"]``: the run's end)."""
    end = max((e.end for e in timeline), default=0.0)
    edges = np.linspace(0.0, end, bins + 1)
    rows = {}
    for res in lanes(timeline, units):
        ev = [e for e in timeline if e.resource == res]
        start = np.array([e.start for e in ev])
        dur = np.array([e.end - e.start for e in ev])
        done = np.clip(edges[:, None] - start[None, :], 0.0, dur[None, :]).sum(axis=1)
        rows[res] = np.diff(done) / np.diff(edges) if end > 0 else np.zeros(bins)
    out = pd.DataFrame.from_dict(rows, orient="index", columns=edges[:-1])
    out.attrs["end_s"] = end
    return out
