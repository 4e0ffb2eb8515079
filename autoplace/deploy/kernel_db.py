"""Kernels tuned by MetaSchedule, kept per unit target and applied when a library is built.

A :class:`KernelDatabase` is a directory of MetaSchedule databases in TVM's own format
(``JSONDatabase``: ``database_workload.json`` and ``database_tuning_record.json``, one JSON
line per entry), one sub-directory per target: MetaSchedule matches a kernel by its
structure alone, whatever target a record was tuned for, so two units' records must not
share a database. Each sub-directory also holds ``target.json``, the target it is for.

A kernel is looked up as MetaSchedule tunes it: the PrimFunc alone, named ``main``
(:func:`workload`). Besides MetaSchedule's candidates, ``tune-kernels`` records the default
schedule of each kernel (:func:`~autoplace.deploy.schedule.default_schedule`), measured by
the same runner: a record like the others, known by its trace. So a build takes whichever
ran faster: :meth:`KernelDatabase.schedule` gives the fastest record's schedule, or None
when the kernel was never tuned for the target or its default schedule is the fastest (the
build then uses the default schedule); :meth:`KernelDatabase.tag` names what a build used,
so a library built from other records is not taken from the cache.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import tvm
import tvm_ffi
from tvm import tirx

from autoplace.deploy.schedule import default_schedule, traced_default_schedule
from autoplace.deploy.targets import BuildError, target_key

#: what a build records for a kernel the database has no record of
UNTUNED = "default"
#: MetaSchedule's files in each target's directory
WORKLOADS, RECORDS = "database_workload.json", "database_tuning_record.json"


def workload(func: tirx.PrimFunc) -> tvm.IRModule:
    """The module MetaSchedule tunes and looks ``func`` up by: ``func`` alone, as ``main``."""
    if func.attrs is not None and "target" in func.attrs:
        func = func.without_attr("target")
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def target_dir_name(target: tvm.target.Target) -> str:
    """The sub-directory of ``target``'s database: a digest of the target."""
    return hashlib.sha256(target_key(target).encode()).hexdigest()[:16]


class KernelDatabase:
    """The MetaSchedule databases under ``directory``, one per target.

    ``create`` makes the directory when it is missing (a tuning job); otherwise a missing
    directory is a :class:`BuildError` naming it (a build given a database that is not
    there). Every target's database is read when the object is made, so a corrupt one is a
    :class:`BuildError` then, whichever targets are used.
    """

    def __init__(self, directory: str | Path, *, create: bool = False):
        self.directory = Path(directory)
        if create:
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not self.directory.is_dir():
            raise BuildError(f"kernel database {self.directory}: no such directory (tune "
                             "kernels into it with `autoplace tune-kernels`)")
        self._dbs: dict[str, object] = self._open_all()
        #: the default schedule's trace per (kernel, target), as text
        self._defaults: dict[tuple[int, str], str | None] = {}

    def _open_all(self) -> dict[str, object]:
        """Every target's database in the directory, read now: a corrupt one is refused
        whatever units a build uses."""
        from tvm.s_tir import meta_schedule as ms

        return {where.name: _open(ms, where) for where in sorted(self.directory.iterdir())
                if (where / "target.json").is_file()}

    def database(self, target: tvm.target.Target, *, create: bool = False):
        """The MetaSchedule ``JSONDatabase`` of ``target`` (None when it has none and
        ``create`` is false)."""
        from tvm.s_tir import meta_schedule as ms

        name = target_dir_name(target)
        if name not in self._dbs:
            where = self.directory / name
            if not where.is_dir() and not create:
                return None
            if not where.is_dir():
                where.mkdir(parents=True)
                (where / "target.json").write_text(target_key(target) + "\n")
            self._dbs[name] = _open(ms, where)
        return self._dbs[name]

    def records(self, func: tirx.PrimFunc, target: tvm.target.Target) -> list:
        """The records of ``func`` on ``target`` that ran, fastest first (the default
        schedule's among them when it was measured)."""
        db = self.database(target)
        mod = workload(func)
        if db is None or not db.has_workload(mod):
            return []
        return list(db.get_top_k(db.commit_workload(mod), 1 << 30))

    def trials(self, func: tirx.PrimFunc, target: tvm.target.Target) -> int:
        """How many of MetaSchedule's candidates of ``func`` on ``target`` the database
        records (the default schedule's record is not one)."""
        return sum(1 for r in self._all(func, target) if not self.is_default(r, func, target))

    def has_default(self, func: tirx.PrimFunc, target: tvm.target.Target) -> bool:
        """Whether the default schedule of ``func`` on ``target`` was measured."""
        return any(self.is_default(r, func, target) for r in self._all(func, target))

    def is_default(self, record, func: tirx.PrimFunc, target: tvm.target.Target) -> bool:
        """Whether ``record`` (of ``func`` on ``target``) is the default schedule's."""
        return _trace_text(record.trace) == self._default_text(func, target)

    def best_seconds(self, func: tirx.PrimFunc, target: tvm.target.Target) -> float | None:
        """The best measured time of ``func`` on ``target`` (mean of its runs), or None."""
        best = self.records(func, target)[:1]
        return record_seconds(best[0]) if best else None

    def schedule(self, func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc | None:
        """``func`` as the fastest record of ``target`` schedules it, or None (never tuned,
        or the default schedule ran fastest)."""
        best = self.records(func, target)[:1]
        if not best or self.is_default(best[0], func, target):
            return None
        sch = self.database(target).query_schedule(workload(func), target,
                                                   workload_name="main")
        return None if sch is None else sch.mod["main"].without_attr("global_symbol")

    def tag(self, func: tirx.PrimFunc, target: tvm.target.Target) -> str:
        """A name of the record a build of ``func`` for ``target`` uses (:data:`UNTUNED`
        when it uses the default schedule)."""
        best = self.records(func, target)[:1]
        if not best or self.is_default(best[0], func, target):
            return UNTUNED
        return "tuned-" + hashlib.sha256(_trace_text(best[0].trace).encode()).hexdigest()[:16]

    def _all(self, func: tirx.PrimFunc, target: tvm.target.Target) -> list:
        """Every record of ``func`` on ``target``, failed runs too."""
        db = self.database(target)
        mod = workload(func)
        if db is None or not db.has_workload(mod):
            return []
        wl = db.commit_workload(mod)
        return [r for r in db.get_all_tuning_records() if r.workload.same_as(wl)]

    def _default_text(self, func: tirx.PrimFunc, target: tvm.target.Target) -> str | None:
        key = (tvm_ffi.structural_hash(workload(func)), target_key(target))
        if key not in self._defaults:
            sch = traced_default_schedule(workload(func)["main"], target)
            self._defaults[key] = None if sch is None else _trace_text(sch.trace)
        return self._defaults[key]


def scheduled(func: tirx.PrimFunc, target: tvm.target.Target,
              kernels: KernelDatabase | None = None) -> tirx.PrimFunc:
    """``func`` scheduled for ``target`` as every build schedules it: by the best record of
    ``kernels`` when it has one, else by :func:`~autoplace.deploy.schedule.default_schedule`."""
    tuned = kernels.schedule(func, target) if kernels is not None else None
    return tuned if tuned is not None else default_schedule(func, target)


def schedule_tag(func: tirx.PrimFunc, target: tvm.target.Target,
                 kernels: KernelDatabase | None = None) -> str:
    """What :func:`scheduled` uses for ``func`` on ``target``, named (for cache keys)."""
    return kernels.tag(func, target) if kernels is not None else UNTUNED


def _open(ms, where: Path):
    """The JSONDatabase in ``where`` (a line a killed job left half-written is dropped
    first: MetaSchedule writes a whole line at once); a corrupt file is a one-line
    BuildError naming it."""
    for name in (WORKLOADS, RECORDS):
        _drop_torn_tail(where / name)
    try:
        return ms.database.JSONDatabase(work_dir=str(where))
    except (ValueError, RuntimeError) as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise BuildError(f"kernel database {where}: {WORKLOADS} or {RECORDS} cannot be "
                         f"read ({why.removeprefix('parallel_for_dynamic error with ')})"
                         ) from None


def _drop_torn_tail(path: Path) -> None:
    """Cut ``path`` after its last newline (a file that ends in one is left alone)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def _trace_text(trace) -> str:
    return json.dumps(trace.as_json(), default=str)


def record_seconds(record) -> float:
    """A record's measured time: the mean of its runs (s)."""
    runs = [float(x) for x in record.run_secs]
    return sum(runs) / len(runs)
