"""The tuning log: one JSON line per measured candidate, appended and flushed line by line.

A reader skips a torn last line (a crash mid-write) with a warning; a corrupt line anywhere
else is an error naming the file and line. Analyse logs with :func:`load` (pandas).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO

from autoplace.measure.base import MeasureResult
from autoplace.space import Placement

SCHEMA_VERSION = 1


class RecordError(ValueError):
    """A log file cannot be read; the message names the file and line."""


@functools.cache
def versions() -> dict[str, str]:
    """Versions of autoplace and TVM, read from package metadata (no TVM import)."""
    out = {}
    for key, dist in (("autoplace", "autoplace"), ("tvm", "apache-tvm")):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "unknown"
    return out


@dataclass(frozen=True, kw_only=True)
class Record:
    """One measured candidate."""

    graph: str
    graph_fp: str
    profile: str
    profile_hash: str
    strategy: str
    trial: int
    seed: int | None
    measurer: str
    placement: Placement
    result: MeasureResult
    time: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat())
    versions: Mapping[str, str] = field(default_factory=versions)
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return {
            "schema": self.schema,
            "graph": self.graph,
            "graph_fp": self.graph_fp,
            "profile": self.profile,
            "profile_hash": self.profile_hash,
            "strategy": self.strategy,
            "trial": self.trial,
            "seed": self.seed,
            "measurer": self.measurer,
            "placement": self.placement.to_dict(),
            "result": self.result.to_dict(),
            "time": self.time,
            "versions": dict(self.versions),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Record:
        if d.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"schema version {d.get('schema')!r} is not {SCHEMA_VERSION}")
        return cls(
            schema=d["schema"], graph=d["graph"], graph_fp=d["graph_fp"],
            profile=d["profile"], profile_hash=d["profile_hash"], strategy=d["strategy"],
            trial=int(d["trial"]), seed=d["seed"], measurer=d["measurer"],
            placement=Placement.from_dict(d["placement"]),
            result=MeasureResult.from_dict(d["result"]), time=d["time"],
            versions=d.get("versions", {}),
        )


class TuningLog:
    """Appends records to a JSON-lines file, one flushed line each.

    A torn last line left by a crash is cut off (with a warning) before appending, so the
    file stays readable; complete records are never rewritten.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._cut_torn_tail()
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")

    def _cut_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        warnings.warn(f"{self.path}: dropping a torn last line ({len(data) - keep} bytes)",
                      stacklevel=3)
        with open(self.path, "r+b") as fh:
            fh.truncate(keep)

    def append(self, record: Record) -> None:
        self._fh.write(json.dumps(record.to_dict(), sort_keys=True) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> TuningLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read(path: str | Path) -> list[Record]:
    """All records of a log; a torn last line is skipped with a warning."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot read log: {exc}") from None
    lines = text.split("\n")
    records = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(Record.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            if no == len(lines) and not text.endswith("\n"):
                warnings.warn(f"{path}:{no}: skipping a torn last line", stacklevel=2)
                break
            raise RecordError(f"{path}:{no}: corrupt record: {exc}") from None
    return records


def _flat(r: Record) -> dict:
    res = r.result
    row = {
        "graph": r.graph, "graph_fp": r.graph_fp, "profile": r.profile,
        "profile_hash": r.profile_hash, "strategy": r.strategy, "trial": r.trial,
        "seed": r.seed, "measurer": r.measurer, "latency_s": res.latency_s,
        "error": res.error.value if res.error else None, "detail": res.detail,
        "energy_j": res.energy_j, "time": r.time,
    }
    row.update({f"busy_s.{k}": v for k, v in res.unit_busy_s.items()})
    row.update({f"copy_bytes.{k}": v for k, v in res.copy_bytes.items()})
    row.update({f"peak_bytes.{k}": v for k, v in res.peak_bytes.items()})
    row["placement"] = r.placement.to_json()
    return row


def load(*paths: str | Path):
    """Records of one or more logs as a ``pandas.DataFrame``, one row per record."""
    import pandas as pd

    rows = [_flat(r) for p in paths for r in read(p)]
    df = pd.DataFrame(rows)
    for col in ("graph", "profile", "strategy", "measurer", "error"):
        if col in df:
            df[col] = df[col].astype("category")
    return df


def best(records: Iterable[Record], *, graph_fp: str | None = None,
         profile_hash: str | None = None) -> Record | None:
    """The valid record with the lowest latency, optionally for one graph and profile."""
    ok = [
        r for r in records
        if r.result.ok
        and (graph_fp is None or r.graph_fp == graph_fp)
        and (profile_hash is None or r.profile_hash == profile_hash)
    ]
    return min(ok, key=lambda r: (r.result.latency_s, r.trial), default=None)
