"""What a tuning log's line must hold, as every reader relies on: the schema version, text
fields, integer trials, finite figures, and a pipeline trial's plan.

The line is declared as msgspec structs (:class:`Line`, :class:`Result`, :class:`Plan`);
:func:`check_line` converts a decoded line to them, so a wrong type, a negative or non-finite
figure or a missing field is msgspec's one-line error naming the key's path (``$.trial``).
What msgspec's types cannot say (a stage's positions, ``run`` from schema 2 on) is checked
after. :mod:`autoplace.records.tuning_log` reads and writes the lines.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

#: schema versions a reader reads (:data:`autoplace.records.tuning_log.SCHEMA_VERSION` the newest)
READABLE_SCHEMAS = (1, 2)

#: a finite figure >= 0 (the bound excludes infinity; NaN fails every bound)
Figure = Annotated[float, msgspec.Meta(ge=0, le=1.7976931348623157e308)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]


class Result(msgspec.Struct, kw_only=True):
    """A result's figures (its other fields are read by ``MeasureResult.from_dict``)."""

    latency_s: Figure | None = None
    energy_j: Figure | None = None
    period_s: Figure | None = None
    unit_busy_s: dict[str, Figure] = {}
    copy_bytes: dict[str, Figure] = {}
    peak_bytes: dict[str, Figure] = {}


class Plan(msgspec.Struct, kw_only=True):
    """A pipeline trial's plan (autoplace.pipeline.log): stages as ``[start, end, pes,
    splits or null, units or null, streamed or null]`` (units and streamed may be left
    out), replicas, the cuts spilled to the shared memory, its periods."""

    stages: list[list[int | list[int | str] | None]]
    replicas: Positive
    spilled: list[Positive] | None = None
    period_s: Figure | None = None
    analytic_period_s: Figure | None = None


class Line(msgspec.Struct, kw_only=True):
    """One record of a tuning log (its placement is checked by the reader)."""

    schema: int
    graph: str
    graph_fp: str
    profile: str
    profile_hash: str
    strategy: str
    measurer: str
    time: str
    trial: Count
    seed: Count | None
    result: Result
    run: str | None = None
    pipeline: Plan | None = None
    objective: str | None = None


def kind_of(value: object) -> str:
    """A JSON value's type as an error names it."""
    return "null" if value is None else type(value).__name__


def check_line(d: object) -> None:
    """What every reader of a log line relies on (see the module docstring); ValueError in
    one line naming the key."""
    if not isinstance(d, dict):
        raise ValueError(f"a record is a JSON object, got {kind_of(d)}")
    if d.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"schema version {d.get('schema')!r} is not one of "
                         f"{', '.join(map(str, READABLE_SCHEMAS))}")
    try:
        line = msgspec.convert(d, Line)
    except msgspec.ValidationError as exc:  # (a Figure's bounds said as what they mean)
        raise ValueError(str(exc).replace("`float` <= 1.7976931348623157e+308", "a finite "
                                          "`float`").replace("`float` >= 0.0", "a finite "
                                                             "`float` >= 0")) from None
    if line.schema >= 2 and line.run is None:
        raise ValueError("Object missing required field `run` - at `$` (schema 2)")
    for k, stage in enumerate(line.pipeline.stages if line.pipeline else ()):
        _check_stage(stage, f"$.pipeline.stages[{k}]")


def _check_stage(st: list[Any], where: str) -> None:
    """A stage's positions: integer start >= 0, end and pes >= 1, splits (each >= 1) and
    streamed (each >= 0) lists of integers or null, units a list of names or null."""
    if len(st) not in (4, 5, 6):
        raise ValueError(f"a pipeline stage is [start, end, pes, splits, units, streamed], "
                         f"got {st!r} - at `{where}`")
    for value, name, least in zip(st[:3], ("start", "end", "pes"), (0, 1, 1)):
        _count(value, f"a pipeline stage's {name}", least, where)
    for name, value in zip(("splits", "streamed"), (st[3], st[5] if len(st) == 6 else None)):
        if value is not None and not isinstance(value, list):
            raise ValueError(f"a pipeline stage's {name} must be a list or null, got {value!r}"
                             f" - at `{where}`")
        for w in value or ():
            _count(w, f"a pipeline stage's {name}", 1 if name == "splits" else 0, where)
    units = st[4] if len(st) >= 5 else None
    if units is not None and not (isinstance(units, list)
                                  and all(isinstance(u, str) and u for u in units)):
        raise ValueError(f"a pipeline stage's units must be unit names or null, got {units!r}"
                         f" - at `{where}`")


def _count(value: object, name: str, least: int, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r} - at `{where}`")
