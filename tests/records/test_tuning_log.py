"""Tuning log: golden schema, round trip, torn last line, corrupt lines, pandas view, best."""

from __future__ import annotations

import functools
import json
import re
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from factories import chain_graph, tiny_profile

from autoplace.measure import ErrorKind, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import (
    Record,
    RecordError,
    TuningLog,
    best,
    encode_line,
    load,
    read,
)
from autoplace.space import SearchSpace

GOLDEN = Path(__file__).parents[1] / "data" / "golden_v1.jsonl"
GOLDEN_V2 = Path(__file__).parents[1] / "data" / "golden_v2.jsonl"


def make_records(n_extra_failed: int = 1) -> list[Record]:
    g, p = chain_graph(), tiny_profile()
    space = SearchSpace(g, p)
    sim = Simulator(space)
    placements = [space.uniform("cpu"), space.from_user({"Y": {"unit": "acc", "scope": "sram"}}),
                  space.uniform("acc")]
    results = sim.measure(placements)
    results.append(MeasureResult.failure(ErrorKind.TIMEOUT, "no answer in 10 s"))
    placements.append(placements[0])
    return [
        Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name, profile_hash=p.hash,
               strategy="tpe", trial=i, seed=7, measurer="simulator", placement=pl,
               result=r, time="2026-01-01T00:00:00+00:00",
               versions={"autoplace": "0.1.0", "tvm": "0.27.0"})
        for i, (pl, r) in enumerate(zip(placements, results))
    ]


def write(path: Path, records) -> None:
    with TuningLog(path) as log:
        for r in records:
            log.append(r)


def test_golden_file_matches_the_schema():
    # If this fails the log schema changed: bump SCHEMA_VERSION and regenerate on purpose.
    lines = GOLDEN_V2.read_text().splitlines()
    records = [Record.from_dict(json.loads(line)) for line in lines]
    assert [encode_line(r.to_dict()) for r in records] == lines
    assert [encode_line(r.to_dict()) for r in make_records()] == lines


def test_schema_1_logs_are_still_read_and_kept_as_they_are():
    old = GOLDEN.read_text().splitlines()
    records = [Record.from_dict(json.loads(line)) for line in old]
    assert [encode_line(r.to_dict()) for r in records] == old  # no run added
    assert {r.schema for r in records} == {1} and {r.run for r in records} == {""}
    # written before streams had a period, they have none
    assert [replace(r, schema=2) for r in records] == [
        replace(r, result=replace(r.result, period_s=None)) for r in make_records()]
    assert any(r.result.period_s is not None for r in make_records())


def test_round_trip(tmp_path):
    path = tmp_path / "log.jsonl"
    write(path, make_records())
    back = read(path)
    assert back == make_records()
    assert back[3].result.error is ErrorKind.TIMEOUT


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "log.jsonl"
    write(path, make_records())
    with open(path, "a") as fh:
        fh.write('{"schema": 1, "graph": "ch')  # a crash mid-write
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(read(path)) == 4
    # appending again cuts the torn tail, keeps every complete record
    with pytest.warns(UserWarning, match="dropping a torn last line"):
        write(path, make_records()[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read(path)) == 5


def test_corrupt_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "log.jsonl"
    write(path, make_records())
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:40]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=r"log\.jsonl:2: corrupt record"):
        read(path)


def test_every_reader_refuses_a_line_that_is_not_strict_json(tmp_path):
    path = tmp_path / "log.jsonl"
    write(path, make_records())
    lines = path.read_text().splitlines()
    lines[0] = re.sub(r'"energy_j":[^,]+', '"energy_j":NaN', lines[0])
    path.write_text("\n".join(lines) + "\n")
    for reader in (read, load, functools.partial(load, fast=False)):
        with pytest.raises(RecordError, match=r"log\.jsonl:1: corrupt record"):
            reader(path)


def test_unknown_schema_version_is_an_error(tmp_path):
    path = tmp_path / "log.jsonl"
    d = make_records()[0].to_dict()
    d["schema"] = 99
    path.write_text(json.dumps(d) + "\n" + json.dumps(d) + "\n")
    with pytest.raises(RecordError, match="schema version 99"):
        read(path)


def test_dataframe_has_flat_columns(tmp_path):
    path = tmp_path / "log.jsonl"
    write(path, make_records())
    df = load(path)
    assert len(df) == 4
    assert df["latency_s"].iloc[0] == pytest.approx(4e-3)
    assert df["busy_s.cpu"].iloc[0] == pytest.approx(4e-3)
    assert df["copy_bytes.async"].iloc[1] == 2000
    assert df["error"].iloc[3] == "timeout"
    assert str(df["strategy"].dtype) == "category"


def test_best_picks_the_fastest_valid_record():
    records = make_records()
    assert best(records).trial == 2  # all on acc: the fastest
    assert best(records, graph_fp="nope") is None
    assert best(records[3:]) is None  # only a failure
    tie = replace(records[2], trial=9)
    assert best([tie, *records]).trial == 2  # of equals, the lowest trial


def test_a_result_refuses_non_finite_numbers():
    for bad in ({"latency_s": float("nan")}, {"latency_s": 1.0, "energy_j": float("inf")},
                {"latency_s": 1.0, "unit_busy_s": {"cpu": float("nan")}}):
        with pytest.raises(ValueError, match="must be|latency_s >= 0"):
            MeasureResult(**bad)
