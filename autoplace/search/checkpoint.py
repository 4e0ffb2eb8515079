"""Where a job's strategy stood when each round began: ``LOG.state.jsonl`` beside the log.

The log alone makes a resume *safe* (nothing measured again, nothing lost); the checkpoint
makes it *exact*: a job killed at any moment and resumed measures the same candidates, with
the same trial numbers and the same best, as the job never interrupted (same seed). Before
each search round the loop writes the number of the job's records the strategy has observed
and the strategy's :meth:`~autoplace.search.strategy.SearchStrategy.state`; on ``--resume``
it observes that many records, restores the state, proposes that round again, and takes the
round's candidates already logged from the log instead of measuring them.

The file is a journal of strict JSON lines: a header naming the job, then a line per round.
A round's line costs what changed since the line before: a list of the state marked
:class:`Appended` (it only grows, e.g. keys known not to fit) is written as the items added
since the last line, never again in full. A writer starts the file afresh (written beside,
then renamed: a kill leaves the old file or the new one), and again once what it appended
since outgrows what it wrote then (so rewriting costs at most about as much as appending).
A torn last line (a kill mid-write) is left out: the round before it is resumed. A missing,
unreadable or foreign checkpoint (another run, seed, sampler, batch size or objective) is
ignored: the resume is then safe but not exact. Strategies that cannot give their state
(Optuna's samplers) and workers sharing a study (whose rounds interleave) write none.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from autoplace.records.tuning_log import CHECKPOINT, side_file

VERSION = 2  # 2: a journal of lines, appended lists as their new items (1: one JSON object)
#: bytes appended before a writer may start the file afresh (see :class:`CheckpointWriter`)
REWRITE_FLOOR = 1 << 20
JOB = ("run", "sampler", "seed", "batch_size", "objective")  # the header's fields
_TAIL = frozenset(("append_at", "items"))  # the keys of an appended list's new items


def checkpoint_path(log: Path) -> Path | None:
    """The checkpoint of the job logged in ``log`` (None: a log that is no regular file)."""
    return side_file(log, CHECKPOINT)


class Appended(list):
    """A list of a strategy's state that only grows (items appended, none changed or
    removed): a checkpoint writes only the items added since its last line. A strategy
    returns the same object from every :meth:`~SearchStrategy.state` call; it is a plain
    list to JSON and to :meth:`~SearchStrategy.restore`."""


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """The strategy's state when a round began, and the job it belongs to."""

    run: str
    sampler: str
    seed: int
    batch_size: int
    records: int  # the job's records the strategy had observed (in log order)
    strategy: dict
    objective: str = "latency"  # what its observations were (checkpoints before: latency)


class CheckpointWriter:
    """Writes the rounds of one job to its checkpoint (see the module docstring)."""

    def __init__(self, path: Path, **job):
        self.path, self.header = path, {"version": VERSION, **{k: job[k] for k in JOB}}
        self.written: dict[tuple, tuple[Appended, int]] = {}  # path in the state -> (list, n)
        self.fresh_bytes = self.appended_bytes = 0
        self.started = False

    def write(self, records: int, strategy: dict) -> None:
        """A round's line: ``records`` observed, the strategy's ``state()``."""
        restart = not self.started or self.appended_bytes > max(self.fresh_bytes, REWRITE_FLOOR)
        if restart:
            self.written.clear()
        line = msgspec.json.encode({"records": records,
                                    "strategy": self._encode(strategy, ())}) + b"\n"
        if restart:
            tmp = self.path.with_name(self.path.name + ".tmp")
            data = msgspec.json.encode(self.header) + b"\n" + line
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
            self.fresh_bytes, self.appended_bytes, self.started = len(data), 0, True
            return
        with open(self.path, "ab") as fh:
            fh.write(line)
        self.appended_bytes += len(line)

    def _encode(self, value, where: tuple):
        """``value`` with each :class:`Appended` list replaced by its items not written yet
        (``{"append_at": n, "items": [...]}``: the items from position ``n`` on)."""
        if isinstance(value, dict):
            return {k: self._encode(v, (*where, k)) for k, v in value.items()}
        if not isinstance(value, Appended):
            return value
        seen, n = self.written.get(where, (None, 0))
        start = n if seen is value and len(value) >= n else 0
        self.written[where] = (value, len(value))
        return {"append_at": start, "items": value[start:]}


def write_checkpoint(path: Path, cp: Checkpoint) -> None:
    """Start ``path`` afresh with ``cp`` alone."""
    CheckpointWriter(path, **{k: getattr(cp, k) for k in JOB}).write(cp.records, cp.strategy)


def read_checkpoint(path: Path, **job) -> Checkpoint | None:
    """The last round of the checkpoint at ``path`` if it belongs to ``job`` (run, sampler,
    seed, batch_size, objective as :class:`Checkpoint` names them), else None."""
    try:
        lines = path.read_bytes().split(b"\n")
        header = msgspec.json.decode(lines[0])
        if header.pop("version") != VERSION or any(header[k] != v for k, v in job.items()):
            return None
        records, strategy = _last_round(lines[1:])
        cp = Checkpoint(**header, records=records, strategy=strategy)
    except (OSError, msgspec.DecodeError, KeyError, TypeError, AttributeError, ValueError):
        return None
    return cp if isinstance(cp.records, int) else None


def _last_round(lines: list[bytes]) -> tuple[int, dict]:
    """``(records, state)`` of the last whole round line, its appended lists in full; a
    torn last line is left out."""
    lists: dict[tuple, list] = {}
    last = None
    for k, raw in enumerate(lines):
        try:
            line = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            if k < len(lines) - 1:
                raise  # torn in the middle: not a checkpoint this writer wrote
            break
        last = line["records"], _decode(line["strategy"], (), lists)
    if last is None:
        raise ValueError("a checkpoint without a round")
    return last


def _decode(value, where: tuple, lists: dict[tuple, list]):
    """A line's state with its appended items added to the lists of the lines before."""
    if not isinstance(value, dict):
        return value
    if value.keys() == _TAIL:
        items, start = lists.setdefault(where, []), value["append_at"]
        if not 0 <= start <= len(items):
            raise ValueError(f"items appended at {start} to a list of {len(items)}")
        del items[start:]
        items.extend(value["items"])
        return items  # (the lines before are left behind: only the last one's state counts)
    return {k: _decode(v, (*where, k), lists) for k, v in value.items()}


def pack(a: np.ndarray) -> dict:
    """A small non-negative integer array as strict JSON: its shape and its bytes in
    base64, in the narrowest unsigned type that holds it (see :func:`unpack`)."""
    a = np.asarray(a)
    top = int(a.max()) if a.size else 0
    dtype = next(t for t in ("u1", "u2", "u4", "u8") if top <= np.iinfo(t).max)
    if a.size and a.min() < 0:
        raise ValueError("pack takes non-negative integers")
    return {"shape": list(a.shape), "dtype": dtype,
            "data": base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode()}


def unpack(d: dict) -> np.ndarray:
    """The int64 array :func:`pack` packed."""
    raw = base64.b64decode(d["data"], validate=True)  # (binascii.Error is a ValueError)
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).astype(np.int64).reshape(d["shape"])
