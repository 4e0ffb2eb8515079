"""One tuning job: :func:`tune` sets up its study, store, strategy and
:class:`~autoplace.search.loop.Tuner` (taking in what a resumed job or other workers
measured), runs the baselines and the search, stops cleanly on Ctrl-C, and says what it
found (:class:`~autoplace.search.config.TuneResult`).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import optuna

from autoplace.measure.base import Measurer
from autoplace.measure.objective import PLAN_FRONT, THROUGHPUT, objective_named
from autoplace.pipeline.plan_space import PlanSpace
from autoplace.records.front import front
from autoplace.records.tuning_log import MODEL_STATS, TuningLog, best, side_file
from autoplace.search.config import TuneConfig, TuneResult
from autoplace.search.interrupt import CtrlC, from_ctrl_c
from autoplace.search.loop import Tuner
from autoplace.search.store import Store, open_study
from autoplace.search.strategies import (
    check_given,
    make_strategy,
    needs_study,
    study_sampler,
    trial_params,
    warm_rows,
)
from autoplace.search.strategy import SearchStrategy
from autoplace.search.study_storage import open_storage
from autoplace.search.workers import SharedStudy, new_worker_id, worker_seed
from autoplace.space import SearchSpace


def tune(space: SearchSpace | PlanSpace, measurer: Measurer, log: TuningLog,
         config: TuneConfig, *, strategy: SearchStrategy | None = None) -> TuneResult:
    """Run baselines then the search; Ctrl-C stops cleanly with everything measured logged,
    after making the best a one-op local optimum (:meth:`Tuner.finish`; Ctrl-C again stops
    at once).

    ``space``: placements (:class:`~autoplace.space.SearchSpace`) or a mesh's pipeline plans
    (:class:`~autoplace.pipeline.plan_space.PlanSpace`, tuned for throughput without
    descent: :func:`autoplace.search.mesh.tune_mesh`). ``strategy``: a
    :class:`SearchStrategy` of ``space`` that proposes the search's candidates (logged
    with its labels); without it, the one ``config.sampler`` names (in a plan space, the
    pipeline moves), built with the config's cost model. ValueError if both are given (a
    ``config`` that sets its sampler or how to build one, beside a ``strategy``).
    """
    from tqdm import tqdm

    if strategy is not None:
        check_given(config, strategy)
    if config.save_model is not None:  # before the job, not after it
        _check_writable(config.save_model, "save_model")
    check_objective(space, config)
    if unknown := config.limits.unknown_scopes(space.profile.scope_index):
        raise ValueError(f"--max-memory: profile {space.profile.name} has no scope "
                         f"{', '.join(map(repr, unknown))} (its scopes: "
                         f"{', '.join(space.profile.scope_index)})")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    interrupted = polished = False
    with CtrlC() as ctrl_c, tqdm(total=config.trials, disable=not config.progress,
                                 unit="trial") as bar:
        def progress(n: int) -> None:  # after each round
            bar.update(n)
            ctrl_c.check()

        bar.set_description_str("set-up (study, cost model, log)")
        warm = warm_rows(space, config)
        tuner = make_tuner(space, measurer, log, config, warm=warm, given=strategy)
        bar.update(min(tuner.search_trials_done(), config.trials))
        try:
            bar.set_description_str("baselines")
            tuner.run_baselines()
            bar.set_description_str("search")
            tuner.run_search(progress)
            if config.save_model:
                tuner.strategy.save_model(config.save_model)
        except (KeyboardInterrupt, SystemError) as exc:
            if not from_ctrl_c(exc):
                raise
            ctrl_c.seen()
            interrupted = True
            bar.set_description_str("interrupted: descent from the best (Ctrl-C: stop now)")
            polished = tuner.finish(progress)
        finally:
            if tuner.shared is not None:
                tuner.shared.close()
    result = _result(tuner, interrupted, time.perf_counter() - t0)
    return replace(result, warm_start=warm.summary() if warm is not None else "",
                   polished=polished)


def _check_writable(path: str, what: str) -> None:
    """ValueError naming ``what`` unless a file can be written at ``path``."""
    parent = Path(path).absolute().parent
    if not parent.is_dir():
        raise ValueError(f"{what} {path}: no directory {parent}")
    if Path(path).is_dir():
        raise ValueError(f"{what} {path}: a directory")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{what} {path}: directory {parent} is not writable")


def check_objective(space: SearchSpace | PlanSpace, config: TuneConfig) -> None:
    """ValueError unless a plan space is tuned for throughput (or throughput and energy),
    without descent, its limits on latency and energy only, and a space of placements not
    for throughput and energy."""
    names = {c.name for c in objective_named(config.objective).criteria}  # (limits aside)
    if isinstance(space, PlanSpace) and (config.descent or names not in (
            {THROUGHPUT.name}, set(PLAN_FRONT))):
        raise ValueError(f"a plan space is tuned for throughput (or {','.join(PLAN_FRONT)}), "
                         "without descent: autoplace.search.mesh.mesh_config")
    if isinstance(space, PlanSpace) and config.limits.memory:
        raise ValueError("--max-memory: a pipeline plan's memory is its PEs' local scope, "
                         "which every plan must fit anyway (out of memory otherwise); bound "
                         "its --max-latency or --max-energy")
    if isinstance(space, SearchSpace) and len(names) > 1 and THROUGHPUT.name in names:
        raise ValueError(f"objective {config.objective!r}: a front of throughput and energy "
                         "is searched over a mesh's pipeline plans (a profile with [mesh]), "
                         "not over per-op placements")


def make_tuner(space: SearchSpace | PlanSpace, measurer: Measurer, log: TuningLog,
               config: TuneConfig, *, warm=None, given: SearchStrategy | None = None) -> Tuner:
    """The job's tuner, set up and not run (:func:`tune` runs it), with what it measured
    before taken in (``resume``, a worker); its strategy the ``given`` one, else the one
    ``config.sampler`` names (with ``warm``: cost-model rows of old logs)."""
    config = config.with_batch(measurer.free)
    params = trial_params(space, config, given)  # (a bad setting fails before the study exists)
    storage = open_storage(config.storage)
    study = open_study(space, config, study_sampler(config), storage) \
        if needs_study(config, given) else None
    worker = new_worker_id() if config.worker else None
    if worker is not None:  # workers proposing alike would only lose claims to each other
        config = replace(config, seed=worker_seed(config.seed, worker))
    strategy = given if given is not None else make_strategy(
        space, study, config, warm=warm,
        stats_path=side_file(log.path, MODEL_STATS))
    store = Store(space, log, study, measurer=measurer.name, seed=config.seed,
                  objective=config.goal,
                  params=params, study_numbers=worker is not None,
                  continues=config.continues, append=config.append)
    log.open()  # the job starts: its log exists from here, even if it measures nothing
    shared = None
    if worker is not None:
        shared = SharedStudy(study, storage, grace_s=config.grace_s, worker=worker,
                             log=log.path, recover=store.logged_attrs)
        shared.reclaim()
    named = given is not None or isinstance(space, PlanSpace)  # (not config.sampler's)
    tuner = Tuner(space, measurer, store, strategy, config, shared,
                  name=type(strategy).__name__ if named else None)
    tuner.replay()
    return tuner


def _result(tuner: Tuner, interrupted: bool, wall_s: float) -> TuneResult:
    """The job's result over its logged records before this run and this run's."""
    job = [*tuner.store.logged, *tuner.records] if tuner.config.continues else tuner.records
    names = tuner.references
    base = {r.strategy: r for r in job if r.strategy in names}
    config = tuner.config
    points = front(job, config.goal.criteria, config.limits) if config.multi else ()
    return TuneResult(best=best(job, objective=tuner.objective), baselines=base,
                      front=tuple(points),
                      measured=len(tuner.records), log10_space=tuner.space.log10_size,
                      interrupted=interrupted, resumed=tuner.resumed, wall_s=wall_s,
                      records=tuple(tuner.records),
                      measure_s=tuner.measure_s, stats=tuple(tuner.strategy.stats))
