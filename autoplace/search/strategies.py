"""The strategies a tuning job can use, by name: the one place that maps ``--sampler``
values to strategy objects (the tuning loop itself knows none of them)."""

from __future__ import annotations

import functools
from pathlib import Path

import optuna

from autoplace.baselines.named import baselines
from autoplace.cost_model import XGBCostModel
from autoplace.pipeline.plan_space import PlanSpace
from autoplace.search.config import SAMPLERS, TuneConfig, split_paths
from autoplace.search.evolution_strategy import ModelGuidedEvolution
from autoplace.search.guided_proposer import GuidedProposer, make_model
from autoplace.search.optuna_sampling import OptunaSampling, sampler
from autoplace.search.params import TrialParams
from autoplace.search.pareto_search import ParetoSearch
from autoplace.search.pipeline_front import PipelineFront
from autoplace.search.pipeline_moves import PipelineMoves
from autoplace.search.strategy import SearchStrategy
from autoplace.search.warm_start import WarmStart, load_rows
from autoplace.search.yardsticks import HillClimbing, SteepestDescent
from autoplace.space import SearchSpace

#: the strategy class of each ``--sampler`` value
STRATEGIES: dict[str, type[SearchStrategy]] = {
    "evolve": ModelGuidedEvolution, "tpe": OptunaSampling, "random": OptunaSampling,
    "hill": HillClimbing, "steepest": SteepestDescent}
assert tuple(STRATEGIES) == SAMPLERS


#: the settings that only build a strategy by name: a job given a strategy object leaves
#: them at their defaults (they would do nothing)
FACTORY_SETTINGS = ("sampler", "cost_model", "candidates", "explore", "mutation_ratio",
                    "warm_start")


def check_given(config: TuneConfig, strategy: SearchStrategy) -> None:
    """ValueError if ``config`` also names a strategy, or sets how to build one, beside the
    strategy object a job was given."""
    default = TuneConfig()
    given = [f"{k}={getattr(config, k)!r}" for k in FACTORY_SETTINGS
             if getattr(config, k) != getattr(default, k)]
    if given:
        raise ValueError(f"tune() takes a strategy object or the config's sampler, not both: "
                         f"with strategy={type(strategy).__name__}, leave {', '.join(given)} "
                         "at the default")


def needs_study(config: TuneConfig, strategy: SearchStrategy | None = None) -> bool:
    """Whether the job keeps an Optuna study: with storage, or when its strategy (the one
    given, else the one ``config.sampler`` names) asks one."""
    kind = type(strategy) if strategy is not None else STRATEGIES[config.sampler]
    return config.storage is not None or kind.asks_study


def trial_params(space: SearchSpace | PlanSpace, config: TuneConfig,
                 strategy: SearchStrategy | None = None) -> TrialParams:
    """The parameters of the study's trials: ``config.study_params``, by default ``ops``
    for a strategy that asks them (the Optuna samplers), none in a plan space, else
    ``counts``; ValueError if the strategy (the one given, else the one ``config.sampler``
    names) or the space has other parameters than the ones asked for."""
    kind = type(strategy) if strategy is not None else STRATEGIES[config.sampler]
    own = "ops" if kind.study_params else "none" if isinstance(space, PlanSpace) else None
    form = config.study_params or own or "counts"
    if own is not None and form != own:
        whose = (f"the trials {kind.__name__} asks carry its per-op parameters" if own == "ops"
                 else "a pipeline search's trials carry their plans as genomes, no parameters")
        raise ValueError(f"study_params={form!r}: {whose} (study_params={own!r})")
    return TrialParams(space, form)


def study_sampler(config: TuneConfig) -> optuna.samplers.BaseSampler:
    """The sampler of the job's Optuna study (used to ask only by the Optuna strategies;
    the others only add finished trials to the study)."""
    return sampler("random" if config.sampler == "random" else "tpe", config.seed)


def warm_rows(space: SearchSpace, config: TuneConfig) -> WarmStart | None:
    """Training rows from the logs of ``config.warm_start`` (None without any)."""
    logs, _ = split_paths(config.warm_start)
    return load_rows(logs, space, config.goal) if logs else None


def named_baselines(space: SearchSpace | PlanSpace) -> list[tuple[str, object]]:
    """(name, candidate) of the space's baselines, measured before the search: the named
    placements (:func:`autoplace.baselines.named.baselines`), or a plan space's start
    plans."""
    if isinstance(space, PlanSpace):
        return space.baselines()
    return baselines(space)


def make_strategy(space: SearchSpace | PlanSpace, study: optuna.Study, config: TuneConfig, *,
                  warm: WarmStart | None = None,
                  stats_path: str | Path | None = None) -> SearchStrategy:
    """The strategy ``config.sampler`` names, with its cost model (and warm-start rows);
    in a plan space, the pipeline moves ranked by ``config.cost_model`` (for throughput and
    energy, their front's moves)."""
    if isinstance(space, PlanSpace):
        return PipelineFront(space, config.goal, seed=config.seed) if config.multi else \
            PipelineMoves(space, seed=config.seed, ranking=config.cost_model,
                          limits=config.limits)
    if config.sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {config.sampler!r}")
    if config.multi:  # several objectives: their front (config allows evolve alone)
        return ParetoSearch(space, config.goal, seed=config.seed)
    if config.sampler in ("hill", "steepest"):  # no model: the yardsticks
        return STRATEGIES[config.sampler](space, seed=config.seed,
                                          objective=config.goal)
    proposer = _proposer(space, config, warm)
    if config.sampler == "evolve":
        return ModelGuidedEvolution(proposer, rank_stats=config.cost_model != "none",
                                    stats_path=stats_path)
    return OptunaSampling(space, study, label=config.sampler, mutation_ratio=config.mutation_ratio,
                          seed=config.seed,
                          proposer=proposer if config.cost_model != "none" else None)


def _proposer(space: SearchSpace, config: TuneConfig, warm: WarmStart | None) -> GuidedProposer:
    _, model_file = split_paths(config.warm_start)
    objective = config.goal
    if model_file is not None:  # a bad file fails now, before any measurement
        XGBCostModel.load(model_file, target=objective.target)
    model = make_model(config.cost_model, seed=config.seed, init_model=model_file,
                       target=objective.target)
    rows = (warm.X, warm.y) if warm is not None else None
    return GuidedProposer(space, model=model, candidates=config.candidates, seed=config.seed,
                          warm=rows, explore=config.explore, objective=objective,
                          feasible=functools.partial(objective.feasible, space))
