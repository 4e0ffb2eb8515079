"""A log line's schema (msgspec structs): each field's type and bounds refused in one line
naming its path; a valid line of either schema version passes."""

from __future__ import annotations

import math

import pytest

from autoplace.records.schema import check_line

LINE = {"schema": 2, "graph": "g", "graph_fp": "f", "profile": "p", "profile_hash": "h",
        "strategy": "evolve", "measurer": "simulator", "time": "t", "trial": 3, "seed": None,
        "run": "r", "result": {"latency_s": 0.001, "energy_j": 0.0, "peak_bytes": {"dram": 5}},
        "pipeline": {"stages": [[0, 3, 2, [1, 1], ["pe"], [0]]], "replicas": 2,
                     "period_s": 0.5}}


def test_a_valid_line_of_each_version_passes():
    check_line(LINE)
    check_line({k: v for k, v in LINE.items() if k not in ("run", "pipeline")} | {"schema": 1})


@pytest.mark.parametrize("path, value, says", [
    (("trial",), -1, "`int` >= 0 - at `$.trial`"),
    (("trial",), True, "got `bool` - at `$.trial`"),
    (("seed",), 1.5, "got `float` - at `$.seed`"),
    (("graph",), 3, "Expected `str`, got `int` - at `$.graph`"),
    (("result", "latency_s"), -1e-3, "a finite `float` >= 0 - at `$.result.latency_s`"),
    (("result", "latency_s"), math.inf, "a finite `float` - at `$.result.latency_s`"),
    (("result", "energy_j"), math.nan, "`float` >= 0 - at `$.result.energy_j`"),
    (("result", "period_s"), "fast", "got `str` - at `$.result.period_s`"),
    (("result", "peak_bytes"), {"dram": -5}, "at `$.result.peak_bytes[...]`"),
    (("result", "unit_busy_s"), [], "Expected `object`, got `array` - at `$.result.unit_busy_s`"),
    (("pipeline", "replicas"), 0, "`int` >= 1 - at `$.pipeline.replicas`"),
    (("pipeline", "spilled"), [0], "`int` >= 1 - at `$.pipeline.spilled[0]`"),
    (("pipeline", "stages"), [[0, 0, 2, None]], "end must be an integer >= 1, got 0 - at "
                                                "`$.pipeline.stages[0]`"),
    (("pipeline", "stages"), [[0, 3, 2, [0]]], "splits must be an integer >= 1, got 0"),
    (("run",), 7, "got `int` - at `$.run`"),
])
def test_each_bad_field_is_refused_naming_its_path(path, value, says):
    line = {**LINE, "result": dict(LINE["result"]), "pipeline": dict(LINE["pipeline"])}
    where = line
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    with pytest.raises(ValueError) as err:
        check_line(line)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_missing_field_and_a_schema_2_line_without_its_run_are_refused():
    with pytest.raises(ValueError, match=r"missing required field `measurer`"):
        check_line({k: v for k, v in LINE.items() if k != "measurer"})
    with pytest.raises(ValueError, match=r"missing required field `run` - at `\$` \(schema 2\)"):
        check_line({k: v for k, v in LINE.items() if k != "run"})
    with pytest.raises(ValueError, match="schema version 9 is not one of 1, 2"):
        check_line({**LINE, "schema": 9})
