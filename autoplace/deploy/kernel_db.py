"""Kernels tuned by MetaSchedule, kept per unit target and applied when a library is built.

A :class:`KernelDatabase` is a directory of MetaSchedule databases in TVM's own format
(``JSONDatabase``: ``database_workload.json`` and ``database_tuning_record.json``, one JSON
line per entry), one sub-directory per target: MetaSchedule matches a kernel by its
structure alone, whatever target a record was tuned for, so two units' records must not
share a database. Each sub-directory also holds ``target.json``, the target it is for.

A kernel is looked up as MetaSchedule tunes it: the PrimFunc alone, named ``main``
(:func:`workload`), its weights marked layout free as a library compiles it
(:func:`autoplace.runtime.libraries.kernel_func`). MetaSchedule's ``RewriteLayout`` then
packs each weight in a block of its own, as the default schedule does, which its builder
leaves out when it times a candidate and a library splits off to run once
(:mod:`autoplace.deploy.prepack`): both are timed, and run, reading packed weights
(tuned without the mark, the default schedule was timed packing its weights on every call,
twice its time in a library on resnet50's 7x7 convs: experiments/results/
bench_weight_packing.md; and MetaSchedule's read them unpacked).

Besides MetaSchedule's candidates, ``tune-kernels`` records the default schedule of each
kernel (:func:`~autoplace.deploy.schedule.default_schedule`), measured by the same
runner: a record like the others, known by its trace. So a build takes whichever ran
faster: :meth:`KernelDatabase.schedule` gives the fastest record's schedule, or None when
the kernel was never tuned for the target or its default schedule is the fastest (the
build then uses the default schedule); :meth:`KernelDatabase.tag` names what a build used,
so a library built from other records is not taken from the cache.

Records timed one at a time over a long job on a shared machine are not comparable, the
default schedule's among them: at the end of a kernel's tuning ``tune-kernels`` times its
finalists again, back to back, and writes their times, with the host's load average, to
:data:`FINALISTS` beside MetaSchedule's files (one JSON line per kernel, the last line of a
kernel the one that counts). While the kernel's trials are what they were then, its
finalists alone are its records, ranked by those times. A re-timing beside other load
ranks nothing either (a database tuned beside test runs had its finalists timed at a median
2.85x what they took quiet: experiments/results/bench_deployed_ms.md): ``tune-kernels
--retime`` times them again, on a quieter machine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from autoplace.deploy.fast_math import for_target
from autoplace.deploy.schedule import default_schedule, traced_default_schedule
from autoplace.deploy.targets import BuildError, target_key

#: what a build records for a kernel the database has no record of
UNTUNED = "default"
#: MetaSchedule's candidates of a kernel timed again at the end of its tuning (and the
#: default schedule): the fastest as recorded
FINALISTS_KEPT = 3
#: MetaSchedule's files in each target's directory
WORKLOADS, RECORDS = "database_workload.json", "database_tuning_record.json"
#: the finalists re-timed at the end of each kernel's tuning (autoplace's, JSON lines)
FINALISTS = "finalists.json"


def workload(func: tirx.PrimFunc) -> tvm.IRModule:
    """The module MetaSchedule tunes and looks ``func`` up by: ``func`` alone, as ``main``,
    without a target (with its layout-free mark: :mod:`autoplace.deploy.prepack`)."""
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
        #: (target directory, kernel's structural hash) -> its last re-timing's line
        self._finalists: dict[tuple[str, str], dict] = {}
        for name in self._dbs:
            self._finalists.update(_read_finalists(self.directory / name))
        #: the default schedule's trace per (kernel, target): its length and text
        self._defaults: dict[tuple[int, str], tuple[int, str] | None] = {}
        #: per target's database: its size when read, and its records by workload (every
        #: lookup of a kernel's records would otherwise scan the whole database)
        self._groups: dict[object, tuple[int, dict]] = {}
        #: trace (by identity: the database keeps it) -> its text (a trace's text is ~5 kB
        #: of JSON; a build asks for each record's several times)
        self._texts: dict[object, str] = {}

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
        schedule's among them when it was measured); its finalists with the times of their
        re-timing instead when it was re-timed at its present trials (:meth:`finalists`)."""
        db = self.database(target)
        mod = workload(func)
        if db is None or not db.has_workload(mod):
            return []
        ranked = list(db.get_top_k(db.commit_workload(mod), 1 << 30))
        if not self.retimed(func, target):
            return ranked
        final = self._finalists[_kernel_key(func, target)]
        wanted, by_trace = {f["trace"] for f in final["finalists"]}, {}
        for r in ranked:  # (the finalists were the fastest as recorded: near the top)
            by_trace.setdefault(self._digest(r.trace), r)
            if wanted <= by_trace.keys():
                break
        timed = [(by_trace[f["trace"]], f["seconds"]) for f in final["finalists"]
                 if f["trace"] in by_trace]
        return [type(r)(r.trace, r.workload, [s], r.target, r.args_info)
                for r, s in sorted(timed, key=lambda x: x[1])]

    def finalists(self, func: tirx.PrimFunc, target: tvm.target.Target) -> list:
        """The records to time again at the end of a tuning: the :data:`FINALISTS_KEPT`
        fastest of MetaSchedule's as recorded, and the default schedule's (one record of
        each schedule)."""
        first: dict[str, object] = {}  # (MetaSchedule may measure a candidate twice)
        for r in self.records(func, target):
            first.setdefault(self._digest(r.trace), r)
        ranked = list(first.values())
        tuned = [r for r in ranked if not self.is_default(r, func, target)]
        return tuned[:FINALISTS_KEPT] + [r for r in ranked if self.is_default(r, func, target)]

    def retimed(self, func: tirx.PrimFunc, target: tvm.target.Target) -> bool:
        """Whether ``func``'s finalists on ``target`` were timed again since its last trial."""
        final = self._finalists.get(_kernel_key(func, target))
        return final is not None and final["trials"] == self.trials(func, target)

    def record_finalists(self, func: tirx.PrimFunc, target: tvm.target.Target,
                         timed: list[tuple[object, float]], load: float | None = None) -> None:
        """Keep the re-timing of ``func``'s finalists on ``target`` (record, seconds), and
        the load average of the host that ran them (None: a board's): one JSON line,
        appended and flushed."""
        where, key = self.directory / target_dir_name(target), _kernel_key(func, target)
        line = {"workload": key[1], "trials": self.trials(func, target),
                "finalists": [{"trace": self._digest(r.trace), "seconds": float(s)}
                              for r, s in timed]}
        if load is not None:
            line["load"] = round(float(load), 2)
        with open(where / FINALISTS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True, allow_nan=False) + "\n")
            fh.flush()
        self._finalists[key] = line

    def retime_load(self, func: tirx.PrimFunc, target: tvm.target.Target) -> float | None:
        """The host's load average when ``func``'s finalists on ``target`` were last timed
        again (None: never, on a board, or not recorded)."""
        return self._finalists.get(_kernel_key(func, target), {}).get("load")

    def trials(self, func: tirx.PrimFunc, target: tvm.target.Target) -> int:
        """How many of MetaSchedule's candidates of ``func`` on ``target`` the database
        records (the default schedule's record is not one)."""
        return sum(1 for r in self._all(func, target) if not self.is_default(r, func, target))

    def has_default(self, func: tirx.PrimFunc, target: tvm.target.Target) -> bool:
        """Whether the default schedule of ``func`` on ``target`` was measured."""
        return any(self.is_default(r, func, target) for r in self._all(func, target))

    def is_default(self, record, func: tirx.PrimFunc, target: tvm.target.Target) -> bool:
        """Whether ``record`` (of ``func`` on ``target``) is the default schedule's."""
        default = self._default(func, target)
        return default is not None and len(record.trace.insts) == default[0] and \
            self._text(record.trace) == default[1]

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
        return record_schedule(best[0]).mod["main"].without_attr("global_symbol")

    def tag(self, func: tirx.PrimFunc, target: tvm.target.Target) -> str:
        """A name of the record a build of ``func`` for ``target`` uses (:data:`UNTUNED`
        when it uses the default schedule)."""
        best = self.records(func, target)[:1]
        if not best or self.is_default(best[0], func, target):
            return UNTUNED
        return "tuned-" + self._digest(best[0].trace)

    def _all(self, func: tirx.PrimFunc, target: tvm.target.Target) -> list:
        """Every record of ``func`` on ``target``, failed runs too."""
        db = self.database(target)
        mod = workload(func)
        if db is None or not db.has_workload(mod):
            return []
        size, groups = self._groups.get(db, (-1, {}))
        if size != len(db):  # (read again once MetaSchedule has committed more)
            groups = {}
            for r in db.get_all_tuning_records():
                groups.setdefault(r.workload, []).append(r)
            self._groups[db] = (len(db), groups)
        return groups.get(db.commit_workload(mod), [])

    def _text(self, trace) -> str:
        if trace not in self._texts:
            self._texts[trace] = _trace_text(trace)
        return self._texts[trace]

    def _digest(self, trace) -> str:
        return hashlib.sha256(self._text(trace).encode()).hexdigest()[:16]

    def _default(self, func: tirx.PrimFunc, target: tvm.target.Target) -> tuple | None:
        """The default schedule's trace: its instructions' count and its text (None: no
        default schedule for the target)."""
        key = (tvm_ffi.structural_hash(workload(func)), target_key(target))
        if key not in self._defaults:
            sch = traced_default_schedule(workload(func)["main"], target)
            self._defaults[key] = None if sch is None else \
                (len(sch.trace.insts), _trace_text(sch.trace))
        return self._defaults[key]


def scheduled(func: tirx.PrimFunc, target: tvm.target.Target,
              kernels: KernelDatabase | None = None) -> tirx.PrimFunc:
    """``func`` scheduled for ``target`` as every build schedules it: by the best record of
    ``kernels`` when it has one, else by :func:`~autoplace.deploy.schedule.default_schedule`
    (which packs the weights ``func`` marks layout free at its root:
    :mod:`autoplace.deploy.prepack`). A kernel is looked up with that mark
    (:func:`workload`). On a CPU the schedule's ``exp``, ``erf`` and ``tanh`` are then
    polynomials (:func:`~autoplace.deploy.fast_math.for_target`), as MetaSchedule's
    candidates are built (:func:`~autoplace.deploy.candidate_build.build_candidate`)."""
    tuned = kernels.schedule(func, target) if kernels is not None else None
    return for_target(tuned if tuned is not None else default_schedule(func, target), target)


def made_by_rules(record) -> bool:
    """Whether ``record``'s schedule was made by the default rules, this version's or an
    earlier one's (which :meth:`KernelDatabase.is_default` no longer recognises): its
    trace samples nothing, where every candidate of MetaSchedule's samples its tiles or
    unrolling."""
    return len(record.trace.decisions) == 0


def record_schedule(record) -> s_tir.Schedule:
    """The schedule ``record``'s trace makes of its workload, as MetaSchedule's
    ``as_measure_candidate`` makes it, without the arguments it also derives (the record
    holds them), which fail on a weight pack that pads
    (:func:`~autoplace.deploy.prepack.measurable`)."""
    sch = s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


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
    """``trace`` as JSON text, the same for a trace as tuned and as read back from the
    database (where MetaSchedule made a JSON number of an annotation's ``IntImm``, and of
    a boolean one: ``RewriteLayout``'s mark of its packing block)."""
    text = json.dumps(trace.as_json(), default=lambda x: getattr(x, "value", str(x)))
    return json.dumps(_bools_as_ints(json.loads(text)))


def _bools_as_ints(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        return [_bools_as_ints(v) for v in value]
    return value


def _kernel_key(func: tirx.PrimFunc, target: tvm.target.Target) -> tuple[str, str]:
    return target_dir_name(target), format(tvm_ffi.structural_hash(workload(func)), "x")


def _read_finalists(where: Path) -> dict[tuple[str, str], dict]:
    """The last re-timing of each kernel in ``where``'s :data:`FINALISTS` (a half-written
    last line dropped); a line that is not one is a one-line BuildError naming the file."""
    path = where / FINALISTS
    _drop_torn_tail(path)
    out: dict[tuple[str, str], dict] = {}
    if not path.is_file():
        return out
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            line = json.loads(text, parse_constant=_no_constant)
            ok = isinstance(line["workload"], str) and isinstance(line["trials"], int) and all(
                isinstance(f["trace"], str) and float(f["seconds"]) > 0
                for f in line["finalists"]) and float(line.get("load", 0)) >= 0
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise BuildError(f"kernel database {path}: line {n} is not a re-timing of "
                             "finalists (workload, trials, finalists of trace and seconds, "
                             "a load of at least 0)")
        out[(where.name, line["workload"])] = line
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def record_seconds(record) -> float:
    """A record's measured time: the mean of its runs (s)."""
    runs = [float(x) for x in record.run_secs]
    return sum(runs) / len(runs)
