"""The tuning log: one JSON line per measured candidate, appended and flushed line by line.

Every reader of a log goes through :func:`parse_lines`: it skips a torn last line (a crash
mid-write) with a warning; a corrupt line anywhere else is an error naming the file and line.
Read records with :func:`read`, pick the best with :func:`best`, analyse logs with
:func:`load` (pandas).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import functools
import glob
import json
import os
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from autoplace.measure.base import MeasureResult
from autoplace.measure.objective import LATENCY, Criterion
from autoplace.records.schema import check_line, kind_of
from autoplace.space import Placement
from autoplace.space.problem import ErrorKind

#: 2: each record names its run (``run``: the id of the tuning job that measured it; a
#: resumed job keeps its id). Logs of schema 1 (no run) are still read, their run "".
SCHEMA_VERSION = 2

#: files a tuning job writes beside its log ``LOG.jsonl``: the cost model's statistics per
#: round, and the checkpoint journal of its strategy (neither holds records)
MODEL_STATS, CHECKPOINT = ".model.jsonl", ".state.jsonl"


def side_file(log: str | Path, suffix: str) -> Path | None:
    """The side file ``suffix`` (:data:`MODEL_STATS`, :data:`CHECKPOINT`) of ``log``; None
    for a log that is no regular file (``--log /dev/null``, a pipe): it has none, as nothing
    is resumed from it, and its directory (``/dev``) is no place to write them."""
    log = Path(log)
    if log.exists() and not log.is_file():
        return None
    return log.with_name(log.stem + suffix)


def without_side_files(paths: Iterable[str]) -> list[str]:
    """``paths`` less the side files of a log among them (``best runs/*.jsonl`` reads the
    logs only); a side file named without its log is kept, and read as a log is."""
    given = {Path(p) for p in paths}
    return [p for p in paths if not any(
        str(p).endswith(s) and Path(str(p)[:-len(s)] + ".jsonl") in given
        for s in (MODEL_STATS, CHECKPOINT))]


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
    run: str = ""
    #: a pipeline search's trial (:mod:`autoplace.pipeline.log`): its plan and figures
    pipeline: Mapping | None = None
    #: the objectives of a job that searched several (``latency,energy``: docs/pareto.md);
    #: None (not written) for a job of one, which the figures alone say
    objective: str | None = None

    def to_dict(self) -> dict:
        run = {"run": self.run} if self.schema >= 2 else {}
        return {
            "schema": self.schema,
            **run,
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
            **({"pipeline": dict(self.pipeline)} if self.pipeline is not None else {}),
            **({"objective": self.objective} if self.objective is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Record:
        check_line(d)
        if not isinstance(d["placement"], dict):
            raise ValueError(f"'placement' must be an object, got {kind_of(d['placement'])}")
        return cls(
            schema=d["schema"], graph=d["graph"], graph_fp=d["graph_fp"],
            profile=d["profile"], profile_hash=d["profile_hash"], strategy=d["strategy"],
            trial=int(d["trial"]), seed=d["seed"], measurer=d["measurer"],
            placement=Placement.from_dict(d["placement"]),
            result=MeasureResult.from_dict(d["result"]), time=d["time"],
            versions=d.get("versions", {}), run=d.get("run", ""), pipeline=d.get("pipeline"),
            objective=d.get("objective"),
        )


def new_run_id() -> str:
    """A new run's id (twelve hex digits)."""
    return uuid.uuid4().hex[:12]


class TuningLog:
    """Appends records to a JSON-lines file, one line each, written by one ``write`` call
    (``O_APPEND``, no user-space buffer): a process killed at any moment has written whole
    lines, which the kernel keeps even if the process dies right after.

    A torn last line (a machine that lost power mid-write) is cut off, with a warning, before
    appending, so the file stays readable; complete records are never rewritten. A new file
    is made by :meth:`open` (the tuner calls it once the job's set-up has passed its checks)
    or with the first record, so a job refused before it starts leaves none; its directory
    is checked now.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._cut_torn_tail()
        self._fd: int | None = None
        if self.path.exists():
            self.open()
        elif not os.access(self.path.parent, os.W_OK | os.X_OK):
            why = (errno.ENOENT, "No such file or directory") if not self.path.parent.is_dir() \
                else (errno.EACCES, "Permission denied")
            raise OSError(*why, str(self.path))

    def open(self) -> int:
        """The file, opened for appending (made if missing); a second call is a no-op."""
        if self._fd is None:
            with self._named():
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

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
        data = _line_encoder().encode(record.to_dict()) + b"\n"  # (encode_line's bytes)
        fd = self.open()
        with self._named():
            while data:  # a regular file takes it in one call; a short write is continued
                data = data[os.write(fd, data):]

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with self._named():
                try:
                    _sync(fd)
                finally:
                    os.close(fd)

    @contextlib.contextmanager
    def _named(self):
        """An OSError of the log's file names the file (a full disk said only
        "[Errno 28] No space left on device")."""
        try:
            yield
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def __enter__(self) -> TuningLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sync(fd: int) -> None:
    """fsync, where the file can be synced (a pipe or a device such as /dev/full cannot:
    EINVAL, which is no error of the log's)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise


T = TypeVar("T")
#: what a line parser raises for a line it refuses
LINE_ERRORS = (ValueError, KeyError, TypeError)


def parse_lines(path: str | Path, parse: Callable[[bytes], T], *,
                errors: tuple[type[Exception], ...] = LINE_ERRORS,
                error: type[RecordError] = RecordError) -> list[T]:
    """Each non-blank line of the log at ``path`` (bytes, newline included) through
    ``parse``: the rules of every log reader. A last line without its newline (torn by a
    crash mid-write) that ``parse`` refuses (raises one of ``errors``) is skipped with a
    warning; any other refused line, or a file that cannot be read, is an ``error`` naming
    the file (and line)."""
    out = []
    try:
        with open(path, "rb") as fh:
            for no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    out.append(parse(line))
                except errors as exc:
                    if not line.endswith(b"\n"):  # only the last line can be torn
                        warnings.warn(f"{path}:{no}: skipping a torn last line", stacklevel=3)
                        break
                    raise error(f"{path}:{no}: corrupt record: {exc}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read log: {exc}") from None
    return out


def strict_json(line: bytes | str) -> object:
    """A log line's JSON value; ValueError for NaN or Infinity, which no log holds."""
    return json.loads(line, parse_constant=_no_constant)


def _no_constant(name: str):
    raise ValueError(f"{name} is not strict JSON")


def read(path: str | Path) -> list[Record]:
    """All records of a log (:func:`parse_lines`' rules)."""
    return parse_lines(path, lambda line: Record.from_dict(strict_json(line)))


#: What makes records comparable: one graph, one version of one profile, one measurer. A log
#: may hold several such jobs (``--append``, other models); every reader keys on these.
JOB = ("graph_fp", "profile_hash", "measurer")


def jobs_named(records: list[Record]) -> str:
    """``graph on profile (measurer)`` of the records' jobs, for a message."""
    names = sorted({f"{r.graph} on {r.profile} ({r.measurer})" for r in records})
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

#: Columns with few distinct values: categorical in :func:`load`'s frame.
_CATEGORIES = ("log", "run", "graph", "graph_fp", "profile", "profile_hash", "strategy",
               "measurer")
_HEADER = ("run", "graph", "graph_fp", "profile", "profile_hash", "strategy", "trial", "seed",
           "measurer")
#: (column prefix, result key) of the per-unit / per-mode / per-scope metrics
_METRICS = (("busy_s", "unit_busy_s"), ("copy_bytes", "copy_bytes"),
            ("peak_bytes", "peak_bytes"))


def encode_line(d: dict) -> str:
    """One log line: compact JSON with sorted keys (msgspec; the values are finite:
    :class:`~autoplace.measure.base.MeasureResult` refuses others)."""
    return _line_encoder().encode(d).decode()


@functools.cache
def _line_encoder():
    import msgspec

    return msgspec.json.Encoder(order="sorted")


def _decode_std(line: bytes) -> dict:
    d = strict_json(line)
    if isinstance(d, dict):
        d.setdefault("run", "")  # schema 1 has none
        d["placement"] = json.dumps(d["placement"], sort_keys=True, separators=(",", ":"))
    return d


@functools.cache
def _line_decoder(fast: bool = True):
    """(decode, errors): one log line to a dict whose ``placement`` is its JSON text.

    With msgspec (``fast``) the placement stays raw text and is never built as objects,
    which makes :func:`load` several times faster; otherwise the standard library does it.
    """
    try:
        import msgspec
    except ImportError:
        fast = False
    if not fast:
        return _decode_std, (ValueError, KeyError, TypeError, AttributeError)

    fields = [(k, object) for k in ("schema", *_HEADER, "result", "time") if k != "run"]
    line_type = msgspec.defstruct("Line", [*fields, ("placement", msgspec.Raw),
                                           ("run", object, ""),  # schema 1 has no run
                                           ("pipeline", object, None)])  # a pipeline trial
    decoder = msgspec.json.Decoder(line_type)

    def decode(line: bytes) -> dict:
        d = msgspec.structs.asdict(decoder.decode(line))
        d["placement"] = bytes(d["placement"]).decode()
        return d

    return decode, (msgspec.DecodeError, ValueError, KeyError, TypeError, AttributeError)


def _flat(path: Path, *, fast: bool = True) -> list[dict]:
    """The records of one log as plain dicts, placement as JSON text (no Record objects),
    by :func:`parse_lines`' rules; an unknown schema version or error kind is corrupt."""
    decode, errors = _line_decoder(fast)
    kinds = {e.value for e in ErrorKind} | {None}

    def parse(line: bytes) -> dict:
        d = decode(line)
        check_line(d)
        if not d["placement"].startswith("{"):
            raise ValueError("'placement' must be an object")
        if d["result"].get("error") not in kinds:
            raise ValueError(f"unknown error kind {d['result']['error']!r}")
        return d

    return parse_lines(path, parse, errors=errors)


def _columns(logs: list[tuple[str, list[dict]]]) -> dict[str, list]:
    """Flat columns over the records of several logs (metrics of other units/scopes: 0)."""
    recs = [d for _, ds in logs for d in ds]
    res = [d["result"] for d in recs]
    cols: dict[str, list] = {"log": [name for name, ds in logs for _ in ds],
                             "seq": [i for _, ds in logs for i in range(len(ds))]}
    cols.update({k: [d[k] for d in recs] for k in _HEADER})
    cols["error"] = [r.get("error") for r in res]
    cols["ok"] = [e is None for e in cols["error"]]
    # a failed candidate's figure (a simulated latency of a placement that does not fit)
    # is no latency to rank by: NaN, so that idxmin() never picks it
    cols["latency_s"] = [r.get("latency_s") if r.get("error") is None else None for r in res]
    cols["energy_j"] = [r.get("energy_j") for r in res]
    cols["period_s"] = [r.get("period_s") for r in res]
    for prefix, key in _METRICS:
        # an empty mapping means "not measured" (a failure); a name left out of a
        # measured one means 0 (the simulator omits scopes that were never used)
        got = [r.get(key) or None for r in res]
        for name in dict.fromkeys(k for m in got if m for k in m):
            cols[f"{prefix}.{name}"] = [m.get(name, 0) if m else None for m in got]
    cols["detail"] = [r.get("detail", "") for r in res]
    cols["time"] = [d["time"] for d in recs]
    cols["placement"] = [d["placement"] for d in recs]
    return cols


def log_paths(*paths: str | Path) -> list[str]:
    """The logs ``paths`` name: files as given, a directory's ``*.jsonl`` files, a glob's
    matches (sorted), less the side files of the logs among them; a pattern or directory
    that names none is an error."""
    out = []
    for p in map(str, paths):
        if Path(p).is_dir():
            found = sorted(str(x) for x in Path(p).glob("*.jsonl"))
        elif glob.has_magic(p):
            found = sorted(glob.glob(p))
        else:
            out.append(p)
            continue
        if not found:
            raise ValueError(f"{p}: no tuning logs (*.jsonl) there")
        out += found
    return without_side_files(out)


def load(*paths: str | Path, fast: bool = True):
    """Records of one or more logs as a ``pandas.DataFrame``, one row per measured candidate.
    A path may be a directory (its ``*.jsonl`` logs) or a glob (``runs/*.jsonl``); the side
    files beside a log are left out (:func:`log_paths`).

    Columns: ``log`` (the file), ``seq`` (position in it), graph, profile, strategy, trial,
    seed, measurer, ``ok``, ``error`` (an :class:`ErrorKind` value or NaN), ``latency_s``
    (NaN for a failure),
    ``energy_j``, ``period_s`` (NaN where the measurer models no stream, or the stream does
    not fit), ``busy_s.<unit>``, ``copy_bytes.<mode>``, ``peak_bytes.<scope>``
    (missing for failures without metrics), ``detail``, ``time`` (UTC) and ``placement``
    (its JSON text: :meth:`Placement.from_json` reads it). Repeated strings are categorical.
    ``fast=False`` uses only the standard library (same frame, slower).
    """
    import pandas as pd

    if not paths:
        raise ValueError("load() needs at least one log path")
    paths = log_paths(*paths)
    cols = _columns([(str(p), _flat(Path(p), fast=fast)) for p in paths])
    df = pd.DataFrame(cols)
    for col in _CATEGORIES:
        df[col] = df[col].astype("category")
    df["log"] = df["log"].cat.set_categories(list(dict.fromkeys(map(str, paths))))
    df["error"] = df["error"].astype(pd.CategoricalDtype([e.value for e in ErrorKind]))
    df["seed"] = df["seed"].astype("Int64")
    df["latency_s"] = df["latency_s"].astype("float64")
    df["energy_j"] = df["energy_j"].astype("float64")
    df["period_s"] = df["period_s"].astype("float64")
    for col in df.columns[df.columns.str.startswith(("copy_bytes.", "peak_bytes."))]:
        df[col] = df[col].astype("Int64")
    for col in df.columns[df.columns.str.startswith("busy_s.")]:
        df[col] = df[col].astype("float64").fillna(0.0)  # a unit a record omits was idle
    df["time"] = pd.to_datetime(df["time"], format="ISO8601", utc=True)
    return df


def best(records: Iterable[Record], *, graph_fp: str | None = None,
         profile_hash: str | None = None, objective: Criterion = LATENCY,
         plans: bool = True) -> Record | None:
    """The record with the lowest figure of ``objective`` (latency, a stream's period, or
    another criterion; the lowest trial of equals), optionally for one graph and profile;
    None if no record has a value. ``plans=False`` leaves out a pipeline search's records
    (a plan, no placement to build)."""
    ok = [
        r for r in records
        if objective.value(r.result) is not None
        and (graph_fp is None or r.graph_fp == graph_fp)
        and (profile_hash is None or r.profile_hash == profile_hash)
        and (plans or r.pipeline is None)
    ]
    return min(ok, key=lambda r: (objective.value(r.result), r.trial), default=None)
