"""Where a job's strategy stood when its last round began: ``LOG.state.json`` beside the log.

The log alone makes a resume *safe* (nothing measured again, nothing lost); the checkpoint
makes it *exact*: a job killed at any moment and resumed measures the same candidates, with
the same trial numbers and the same best, as the job never interrupted (same seed). Before
each search round the loop writes the number of the job's records the strategy has observed
and the strategy's :meth:`~autoplace.search.strategy.SearchStrategy.state`; on ``--resume``
it observes that many records, restores the state, proposes that round again, and takes the
round's candidates already logged from the log instead of measuring them.

The file is replaced atomically (written beside, then renamed). A missing, unreadable or
foreign checkpoint (another run, seed, sampler, batch size or objective) is ignored: the
resume is then safe but not exact. Strategies that cannot give their state (Optuna's
samplers) and workers sharing a study (whose rounds interleave) write none.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, fields
from pathlib import Path

import msgspec
import numpy as np

VERSION = 1


def checkpoint_path(log: Path) -> Path:
    """The checkpoint of the job logged in ``log``."""
    return log.with_name(log.stem + ".state.json")


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


def write_checkpoint(path: Path, cp: Checkpoint) -> None:
    """Replace ``path`` with ``cp`` atomically (a kill leaves the old one or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    d = {"version": VERSION, **{f.name: getattr(cp, f.name) for f in fields(cp)}}
    tmp.write_bytes(msgspec.json.encode(d))  # (not asdict: it deep-copies the state)
    os.replace(tmp, path)


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
    raw = base64.b64decode(d["data"], validate=True)
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).astype(np.int64).reshape(d["shape"])


def read_checkpoint(path: Path, **job) -> Checkpoint | None:
    """The checkpoint at ``path`` if it belongs to ``job`` (run, sampler, seed, batch_size,
    objective as :class:`Checkpoint` names them), else None."""
    try:
        d = msgspec.json.decode(path.read_bytes())
        if d.pop("version") != VERSION:
            return None
        cp = Checkpoint(**d)
    except (OSError, msgspec.DecodeError, KeyError, TypeError, AttributeError,
            binascii.Error):
        return None
    if any(getattr(cp, k) != v for k, v in job.items()) or not isinstance(cp.records, int):
        return None
    return cp
