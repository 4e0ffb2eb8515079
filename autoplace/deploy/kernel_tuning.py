"""Tuning a model's kernels for each unit target with MetaSchedule (``autoplace tune-kernels``).

Every distinct kernel a unit may run (the kinds it accepts) is tuned for the unit's target
by MetaSchedule's own tuner (its post-order-apply design space, evolutionary search, XGBoost
cost model, builder and runner), locally or on a board reached through a TVM RPC tracker,
for a budget of trials per kernel, the kernels with the most work (flops over all their
calls) first. Records go into a :class:`KernelDatabase` as MetaSchedule measures them, so a
job stopped at any point keeps what it measured, and a job run again tunes each kernel only
for the trials its budget still has (a kernel at its budget is skipped). Units sharing a
target share their kernels' records.

Each kernel's default schedule is measured too, once, by the same builder and runner, and
recorded beside MetaSchedule's candidates (not counted in the budget): a build then takes
whichever ran faster. Then its finalists (the fastest few of MetaSchedule's candidates as
recorded, and the default schedule) are timed again, back to back, :data:`ROUNDS` rounds
interleaved, and ranked by the fastest round of each
(:meth:`~autoplace.deploy.kernel_db.KernelDatabase.record_finalists`): times recorded
minutes apart on a shared machine are not comparable.

The local runner runs a kernel as the unit's worker does: on a TVM pool of the target's
``num-cores`` threads, pinned to the unit's ``cpus`` when it names them (TVM's own default
pool on x86 has half the logical CPUs: one thread on a 2-vCPU machine, which would tune a
two-core unit's kernels for one core).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import tvm
import tvm_ffi
from tvm import tirx

from autoplace.deploy.intrinsics import import_tensor_intrinsics
from autoplace.deploy.kernel_db import (
    KernelDatabase,
    made_by_rules,
    record_schedule,
    record_seconds,
    workload,
)
from autoplace.deploy.prepack import measurable
from autoplace.deploy.schedule import cores, traced_default_schedule
from autoplace.deploy.targets import BuildError, target_key, unit_target
from autoplace.deploy.toolchain import compiler_for, host_arch, target_arch
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.runtime.workers import pool_setup
from autoplace.space.capability import capable

#: MetaSchedule measures this many candidates per round (fewer when the budget is smaller):
#: its own default. A round's evolutionary search costs about the same whatever it measures
#: (30-90 s for squeezenet's convs on 2 cores, more than half of a 64-candidate round), so
#: 64 trials of a squeezenet conv took 49 s in one round against 116 s in four of 16
#: (experiments/results/bench_deployed_ms.md)
TRIALS_PER_ROUND = 64
#: the evolutionary search's population per candidate a round measures (512 from 16 up)
POPULATION_PER_TRIAL = 32
#: rounds of the finalists' re-timing (each runs every finalist once, in turn)
ROUNDS = 3


@dataclass(frozen=True, kw_only=True)
class KernelTuning:
    """How ``tune-kernels`` tunes: ``trials`` per kernel, the builder's and runner's
    timeouts (s), MetaSchedule's seed, the RPC tracker (``host:port``) and key of a board
    to measure on (None: this host), and whether to time every kernel's finalists again
    (``retime``), even those timed since their last trial: times taken beside other load
    rank nothing (a database tuned beside test runs kept kernels that ran up to 9.6x slower
    in the model than their default schedules: experiments/results/bench_deployed_ms.md)."""

    trials: int
    seed: int = 0
    build_timeout: float = 120.0
    run_timeout: float = 60.0
    tracker: str | None = None
    key: str | None = None
    retime: bool = False

    def __post_init__(self):
        if self.trials < 1:
            raise ValueError(f"trials per kernel must be at least 1, got {self.trials}")
        if (self.tracker is None) != (self.key is None):
            raise ValueError("a tracker and a key go together (the board's key at the tracker)")


@dataclass(frozen=True)
class KernelTask:
    """One kernel to tune for one target, and the units that run it there."""

    func: str
    prim_func: tirx.PrimFunc
    target: tvm.target.Target
    units: tuple[str, ...]
    ops: int  # how many ops of the model call it
    cpus: tuple[int, ...] = ()  # the first unit's pinned CPUs (none: not pinned)
    #: what links its candidates for a board of another architecture (None: the host's)
    compiler: str | None = None
    flops: float = 0.0  # of all its calls in the model (the graph's count)


def kernel_tasks(funcs: dict[str, tirx.PrimFunc], graph: OpGraph, profile: Profile,
                 units: list[str] | None = None, *, on_board: bool = False,
                 cross_compiler: str | None = None) -> list[KernelTask]:
    """The distinct kernels of ``graph`` per target of ``units`` (default: every unit), the
    most work first (:attr:`KernelTask.flops`; ties in the order the model first calls
    them), so a job stopped early has tuned the kernels that weigh most; a kernel is
    distinct by its structure, so two names of one kernel are tuned once. ``on_board``:
    measured on a board (RPC), whose architecture may differ from this host's: its
    candidates are then linked here by the unit's cross compiler, else ``cross_compiler``,
    else by the board's RPC server (which then needs a compiler). BuildError, naming the
    unit, for a target without ``num-cores`` (MetaSchedule needs it) and for one of another
    architecture to be measured here."""
    names = units or [u.name for u in profile.units]
    per_target: dict[str, tuple[tvm.target.Target, list[str]]] = {}
    for name in names:
        target = unit_target(profile.unit(name), profile)
        per_target.setdefault(target_key(target), (target, []))[1].append(name)
    tasks = []
    for target, on in per_target.values():
        unit = profile.unit(on[0])
        compiler = _compiler(unit, profile, on_board, cross_compiler)
        tasks += sorted(_target_tasks(funcs, graph, profile, target, tuple(on), unit.cpus,
                                      compiler), key=lambda t: -t.flops)
    if not tasks:
        raise BuildError(f"no kernel to tune: units {', '.join(names)} accept none of "
                         f"{graph.name}'s ops")
    return tasks


def heaviest(tasks: list[KernelTask], share: float) -> list[KernelTask]:
    """Of each target's ``tasks``, the fewest of the heaviest (:attr:`KernelTask.flops`)
    that hold at least ``share`` of that target's flops, the most work first (ties in the
    order given): the kernels worth tuning when not all are; every one when ``share`` is 1
    or the target's kernels count no flops."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a share of the flops is in (0, 1], got {share}")
    per_target: dict[str, list[KernelTask]] = {}
    for task in tasks:
        per_target.setdefault(target_key(task.target), []).append(task)
    kept: list[KernelTask] = []
    for group in per_target.values():
        group.sort(key=lambda t: -t.flops)
        total = sum(t.flops for t in group)
        held = 0.0
        for task in group:
            if share < 1.0 and total > 0.0 and held >= share * total:
                break
            kept.append(task)
            held += task.flops
    return kept


def flops_share(tasks: list[KernelTask], of: list[KernelTask]) -> float:
    """The share of the flops of ``of`` that ``tasks`` hold (1 when ``of`` counts none)."""
    total = sum(t.flops for t in of)
    return sum(t.flops for t in tasks) / total if total > 0 else 1.0


def _compiler(unit, profile: Profile, on_board: bool, default: str | None) -> str | None:
    """The compiler that links ``unit``'s candidates (None: the host's); refusals first."""
    if "num-cores" not in unit.target:
        raise BuildError(f"unit {unit.name!r}: MetaSchedule tunes for a number of cores: set "
                         f"num-cores in its target in {profile.source}")
    if not on_board and target_arch(unit.target) != host_arch():
        raise BuildError(f"unit {unit.name!r} builds for {target_arch(unit.target)}, this host "
                         f"is {host_arch()}: tune its kernels on the board (--rpc-tracker, "
                         "--rpc-key)")
    if on_board and unit.cross_compiler is None and default is None:
        return None  # MetaSchedule's tar of objects: the board's RPC server links it
    return compiler_for(unit, unit.target, profile, default)


def _target_tasks(funcs, graph, profile, target, units, cpus, compiler) -> list[KernelTask]:
    seen: dict[int, int] = {}  # structural hash -> index in tasks
    tasks: list[KernelTask] = []
    runs = capable(graph, profile)[:, [profile.unit_index[u] for u in units]].any(axis=1)
    for op, ok in zip(graph.ops, runs):
        func = op.func or op.name
        if not ok:
            continue
        h = tvm_ffi.structural_hash(workload(funcs[func]))
        if h in seen:
            t = tasks[seen[h]]
            tasks[seen[h]] = replace(t, ops=t.ops + 1, flops=t.flops + op.flops)
            continue
        seen[h] = len(tasks)
        tasks.append(KernelTask(func, funcs[func], target, units, 1, tuple(cpus), compiler,
                                op.flops))
    return tasks


class KernelTuner:
    """Tunes kernels into ``db`` as ``tuning`` says, with one builder and XGBoost cost model
    for every kernel of the job (MetaSchedule's cost model learns across kernels, as in its
    own multi-task tuning), and one runner per thread pool the targets need."""

    def __init__(self, db: KernelDatabase, tuning: KernelTuning):
        from tvm.s_tir import meta_schedule as ms

        import_tensor_intrinsics()  # (TuneContext imports them: 66 s instead of 6 s here)
        self.db, self.tuning = db, tuning
        self.cost_model = ms.cost_model.XGBModel(num_tuning_cores=_cores())
        self._builders: dict[str | None, object] = {}
        self._runners: dict[tuple, object] = {}

    def tune(self, task: KernelTask) -> int:
        """Tune ``task`` for what is left of its budget, then measure its default schedule
        if it never was, then time its finalists again unless they were since its last
        trial (and ``retime`` is off); the trials recorded now (fewer than that when
        MetaSchedule's search finds no new candidate: an elementwise kernel's design space
        may be smaller than the budget)."""
        before = self.db.trials(task.prim_func, task.target)
        left = self.tuning.trials - before
        if left > 0:
            self._search(task, left)
        if not self.db.has_default(task.prim_func, task.target):
            self._measure_default(task)
        if self.tuning.retime or not self.db.retimed(task.prim_func, task.target):
            self._retime_finalists(task)
        return self.db.trials(task.prim_func, task.target) - before

    def _search(self, task: KernelTask, trials: int) -> None:
        from tvm.s_tir import meta_schedule as ms

        database = self.db.database(task.target, create=True)
        logs = Path(database.path_workload).parent / "logs"
        logs.mkdir(exist_ok=True)
        with _quiet_meta_schedule():
            ctx = ms.TuneContext(mod=workload(task.prim_func), target=task.target,
                                 space_generator="post-order-apply",
                                 search_strategy=evolutionary(min(TRIALS_PER_ROUND, trials)),
                                 task_name=task.func,
                                 rand_state=self.tuning.seed, num_threads=_cores(),
                                 logger=_file_logger(logs / f"{task.func}.log"))
            ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(logs),
                          max_trials_global=trials,
                          num_trials_per_iter=min(TRIALS_PER_ROUND, trials),
                          builder=self.builder(task), runner=self.runner(task),
                          database=_without_default(database, self.db, task),
                          cost_model=self.cost_model)

    def _measure_default(self, task: KernelTask) -> None:
        """Build and run ``task``'s default schedule as MetaSchedule runs a candidate, and
        record it (nothing is recorded when it fails to build or run, or on a GPU)."""
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tvm.s_tir.meta_schedule.builder import BuilderInput
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        mod = workload(task.prim_func)
        sch = traced_default_schedule(mod["main"], task.target)
        if sch is None:
            return
        (built,) = self.builder(task).build([BuilderInput(sch.mod, task.target)])
        if built.error_msg:
            return
        args = ArgInfo.from_entry_func(measurable(sch.mod), remove_preproc=True)
        (future,) = self.runner(task).run([RunnerInput(built.artifact_path, "cpu", args)])
        ran = future.result()
        _remove_artefacts([built])
        if ran.error_msg or not ran.run_secs:
            return
        database = self.db.database(task.target, create=True)
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, database.commit_workload(mod), ran.run_secs, task.target, args))

    def _retime_finalists(self, task: KernelTask) -> None:
        """Build the finalists of ``task`` (:meth:`KernelDatabase.finalists`) and run them
        :data:`ROUNDS` times in turn on one runner; record each one's fastest round (other
        load only adds time), with this host's load average when they ran here. Finalists
        that fail are left out; nothing is recorded when none runs."""
        from tvm.s_tir.meta_schedule.builder import BuilderInput
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        final = self.db.finalists(task.prim_func, task.target)
        built = self.builder(task).build([BuilderInput(record_schedule(r).mod, task.target)
                                          for r in final])
        ok = [(r, b) for r, b in zip(final, built) if not b.error_msg]
        inputs = [RunnerInput(b.artifact_path, "cpu", r.args_info) for r, b in ok] * ROUNDS
        runs = [f.result() for f in self.runner(task).run(inputs)] if ok else []
        _remove_artefacts(built)
        best: dict[int, float] = {}
        for n, ran in enumerate(runs):
            if not ran.error_msg and ran.run_secs:
                secs = sum(float(x) for x in ran.run_secs) / len(ran.run_secs)
                best[n % len(ok)] = min(best.get(n % len(ok), secs), secs)
        if best:
            load = os.getloadavg()[0] if self.tuning.tracker is None else None
            self.db.record_finalists(task.prim_func, task.target,
                                     [(ok[i][0], s) for i, s in sorted(best.items())], load)

    def builder(self, task: KernelTask):
        """The builder of ``task``'s candidates: one pool of worker processes per compiler
        for the whole job (:class:`~autoplace.deploy.builder_pool.PooledBuilder`), its
        artefacts shared libraries linked by the task's cross compiler for a board of another
        architecture (a board then needs no compiler of its own), else MetaSchedule's
        default (a tar of objects, which the runner's side links)."""
        if task.compiler not in self._builders:
            self._builders[task.compiler] = _builder(self.tuning, task.compiler)
        return self._builders[task.compiler]

    def runner(self, task: KernelTask):
        """The runner of ``task``'s candidates: on a board, its RPC runner; here, a local
        runner whose worker's TVM pool has the target's ``num-cores`` threads (pinned to the
        unit's CPUs when it names them), as the unit's kernels run."""
        key = (cores(task.target), task.cpus if self.tuning.tracker is None else ())
        if key not in self._runners:
            self._runners[key] = _runner(self.tuning, *key)
        return self._runners[key]

    def tune_all(self, tasks: list[KernelTask], *,
                 progress: Callable[[str], None] = print) -> None:
        """Tune each of ``tasks`` in turn (see :meth:`tune`), saying how each ends; then
        :meth:`close`."""
        try:
            self._tune_each(tasks, progress)
        finally:
            self.close()

    def close(self) -> None:
        """End the builders' worker processes (kept from one kernel to the next)."""
        for builder in self._builders.values():
            builder.close()

    def _tune_each(self, tasks: list[KernelTask], progress: Callable[[str], None]) -> None:
        for n, task in enumerate(tasks, start=1):
            ran = self.tune(task)
            total = self.db.trials(task.prim_func, task.target)
            now = (f"{ran} now" if ran else "none now") + (
                "" if total >= self.tuning.trials else ": no other candidate to try")
            progress(f"  [{n}/{len(tasks)}] {task.func} on {', '.join(task.units)} "
                     f"({task.ops} ops): {self._best(task)}, {total} trials ({now})")

    def _best(self, task: KernelTask) -> str:
        """What a build of ``task`` takes: the fastest record, and whose it is."""
        best = self.db.records(task.prim_func, task.target)[:1]
        if not best:
            return "no candidate ran"
        whose = ("the default schedule" if self.db.is_default(best[0], task.prim_func,
                                                                task.target)
                 else "MetaSchedule's")
        again = ""
        if self.db.retimed(task.prim_func, task.target):
            load = self.db.retime_load(task.prim_func, task.target)
            again = ", timed again" + ("" if load is None else f" at load {load:.1f}")
        return f"best {record_seconds(best[0]) * 1e6:.1f} us ({whose}{again})"


def _without_default(database, db: KernelDatabase, task: KernelTask):
    """``database`` as MetaSchedule's search sees it: the records of default schedules (this
    version's rules' and earlier ones': :func:`~autoplace.deploy.kernel_db.made_by_rules`)
    left out of its best records. The search replays its best records and runs its
    postprocessors on them again; ``RewriteLayout`` on a default schedule, whose weight is
    packed already, fails a check in TVM's C++ (a job resuming a kernel with more trials
    died there; after the rules changed, on an earlier default's record). Records are
    committed to ``database`` as MetaSchedule measures them."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.database import PyDatabase

    @derived_object
    class WithoutDefault(PyDatabase):
        def has_workload(self, mod):
            return database.has_workload(mod)

        def commit_workload(self, mod):
            return database.commit_workload(mod)

        def commit_tuning_record(self, record):
            database.commit_tuning_record(record)

        def get_top_k(self, workload, top_k):
            ranked = database.get_top_k(workload, len(database))
            return [r for r in ranked if not made_by_rules(r)][:top_k]

        def get_all_tuning_records(self):
            return database.get_all_tuning_records()

        def __len__(self):
            return len(database)

    return WithoutDefault()


def evolutionary(per_round: int):
    """MetaSchedule's evolutionary search, its population scaled to the candidates a round
    measures: :data:`POPULATION_PER_TRIAL` per candidate, from 64 to its default of 512 (a
    round of 16 or more keeps the default; a budget of 2 samples and evolves 64, not 512:
    ~1.5 s per kernel on 2 cores instead of ~10 s)."""
    from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch

    population = min(512, max(POPULATION_PER_TRIAL * per_round, 64))
    return EvolutionarySearch(population_size=population,
                              init_min_unmeasured=min(50, population // 2))


def _remove_artefacts(built: list) -> None:
    """Remove the builder's artefacts of ``built`` (as MetaSchedule's tuning loop does)."""
    from tvm.s_tir.meta_schedule.utils import remove_build_dir

    for b in built:
        if b.artifact_path:
            remove_build_dir(b.artifact_path)


def _cores() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def _builder(tuning: KernelTuning, compiler: str | None):
    from autoplace.deploy.builder_pool import PooledBuilder
    from autoplace.deploy.candidate_build import build_candidate

    return PooledBuilder(max_workers=_cores(), timeout_sec=tuning.build_timeout,
                         f_build=build_candidate, compiler=compiler)


def _runner(tuning: KernelTuning, threads: int, cpus: tuple[int, ...]):
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, LocalRunner, RPCConfig, RPCRunner

    evaluator = EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20,
                                enable_cpu_cache_flush=False)
    if tuning.tracker is None:
        return LocalRunner(timeout_sec=tuning.run_timeout, evaluator_config=evaluator,
                           initializer=pool_setup(threads, cpus))
    host, _, port = tuning.tracker.rpartition(":")
    config = RPCConfig(tracker_host=host, tracker_port=int(port), tracker_key=tuning.key,
                       session_timeout_sec=int(tuning.run_timeout))
    return RPCRunner(config, evaluator, max_workers=1)


def _file_logger(path: Path) -> logging.Logger:
    logger = logging.getLogger(f"autoplace.tune_kernels.{path.stem}")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger


class _quiet_meta_schedule:
    """MetaSchedule's task tables and XGBoost lines go to its logs, not the terminal."""

    def __enter__(self):
        self.logger = logging.getLogger("tvm.s_tir.meta_schedule")
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING)

    def __exit__(self, *exc):
        self.logger.setLevel(self.level)

