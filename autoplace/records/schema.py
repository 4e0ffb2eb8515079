"""What a tuning log's line must hold, as every reader relies on (:func:`check_line`):
the schema version, text fields, integer trials, finite figures, and a pipeline trial's
plan. :mod:`autoplace.records.tuning_log` reads and writes the lines."""

from __future__ import annotations

import math

#: schema versions a reader reads (:data:`autoplace.records.tuning_log.SCHEMA_VERSION` the newest)
READABLE_SCHEMAS = (1, 2)

_TEXT_FIELDS = ("graph", "graph_fp", "profile", "profile_hash", "strategy", "measurer", "time")


def kind_of(value: object) -> str:
    """A JSON value's type as an error names it."""
    return "null" if value is None else type(value).__name__


def _finite(value: object, name: str) -> None:
    """``value`` is None or a finite number >= 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name!r} must be a number, got {kind_of(value)}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name!r} must be a finite number >= 0, got {value!r}")


def check_line(d: object) -> None:
    """What every reader of a log line relies on (the placement is checked by the reader):
    a JSON object of this schema, text fields, an integer trial, finite figures."""
    if not isinstance(d, dict):
        raise ValueError(f"a record is a JSON object, got {kind_of(d)}")
    if d.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"schema version {d.get('schema')!r} is not one of "
                         f"{', '.join(map(str, READABLE_SCHEMAS))}")
    for name in _TEXT_FIELDS + (("run",) if d["schema"] >= 2 else ()):
        if not isinstance(d.get(name), str):
            raise ValueError(f"{name!r} must be a string, got {kind_of(d.get(name))}")
    for name, none_ok in (("trial", False), ("seed", True)):
        value = d.get(name)
        if not (none_ok and value is None) and (isinstance(value, bool)
                                                 or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name!r} must be an integer >= 0, got {value!r}")
    if d.get("pipeline") is not None:
        _check_plan(d["pipeline"])
    result = d.get("result")
    if not isinstance(result, dict):
        raise ValueError(f"'result' must be an object, got {kind_of(result)}")
    _finite(result.get("latency_s"), "latency_s")
    _finite(result.get("energy_j"), "energy_j")
    _finite(result.get("period_s"), "period_s")
    for name in ("unit_busy_s", "copy_bytes", "peak_bytes"):
        figures = result.get(name, {})
        if not isinstance(figures, dict):
            raise ValueError(f"{name!r} must be an object, got {kind_of(figures)}")
        for key, value in figures.items():
            _finite(value, f"{name}.{key}")


def _count(value: object, name: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")


def _check_plan(p: object) -> None:
    """A pipeline trial's plan (autoplace.pipeline.log) as its readers rely on: stages as
    ``[start, end, pes, splits or null, units or null, streamed or null]`` (units and
    streamed may be left out) of integers and unit names, replicas, the cuts spilled to the
    shared memory (a list, if any), finite periods."""
    if not isinstance(p, dict):
        raise ValueError(f"'pipeline' must be an object, got {kind_of(p)}")
    stages = p.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ValueError(f"pipeline 'stages' must be a non-empty list, got {stages!r}")
    for st in stages:
        if not isinstance(st, list) or len(st) not in (4, 5, 6):
            raise ValueError("a pipeline stage is [start, end, pes, splits, units, streamed], "
                             f"got {st!r}")
        for value, name, least in zip(st[:3], ("start", "end", "pes"), (0, 1, 1)):
            _count(value, f"a pipeline stage's {name}", least)
        for name, value in zip(("splits", "streamed"), (st[3], st[5] if len(st) == 6 else None)):
            if value is not None and not isinstance(value, list):
                raise ValueError(f"a pipeline stage's {name} must be a list or null, "
                                 f"got {value!r}")
            for w in value or ():
                _count(w, f"a pipeline stage's {name}", 1 if name == "splits" else 0)
        units = st[4] if len(st) >= 5 else None
        if units is not None and not (isinstance(units, list)
                                      and all(isinstance(u, str) and u for u in units)):
            raise ValueError(f"a pipeline stage's units must be unit names or null, got {units!r}")
    _count(p.get("replicas"), "pipeline 'replicas'", 1)
    spilled = p.get("spilled")
    if spilled is not None and not isinstance(spilled, list):
        raise ValueError(f"pipeline 'spilled' must be a list of cuts, got {spilled!r}")
    for cut in spilled or ():
        _count(cut, "a pipeline spilled cut", 1)
    _finite(p.get("period_s"), "pipeline period_s")
    _finite(p.get("analytic_period_s"), "pipeline analytic_period_s")
