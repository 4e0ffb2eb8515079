"""An Optuna sampler (``--sampler tpe|random``) as a search strategy.

Each candidate is a trial asked from the study (one categorical parameter per op and free
edge, :mod:`autoplace.search.params`). A share ``mutation_ratio`` of them are mutations of
the best so far, enqueued before asking: the cost model's pick among evolved candidates
when there is a model, else a random one-parameter change. The tuning loop tells the study
each trial's result (its store does); this strategy only asks.
"""

from __future__ import annotations

import numpy as np
import optuna

from autoplace.search.guided_proposer import GuidedProposer
from autoplace.search.params import distributions, to_genome, to_params
from autoplace.search.strategy import Proposal, SearchStrategy, fastest
from autoplace.space import SearchSpace

#: attempts at a random one-parameter mutation not measured yet
MUTATION_TRIES = 20


def sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """Optuna's sampler called ``name`` (``tpe`` or ``random``)."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, multivariate=True)


class OptunaSampling(SearchStrategy):
    """Ask the study's sampler, mixed with mutations of the best so far."""

    study_params = True
    asks_study = True

    def __init__(self, space: SearchSpace, study: optuna.Study, *, label: str,
                 proposer: GuidedProposer | None, mutation_ratio: float, seed: int):
        super().__init__()
        self.space, self.study, self.label, self.proposer = space, study, label, proposer
        self.mutation_ratio = mutation_ratio
        self.dists = distributions(space)
        self.rng = np.random.default_rng(seed)
        self.best: tuple[float, np.ndarray, np.ndarray] | None = None  # latency, genome
        self.seen: set[bytes] = set()

    def propose(self, n: int) -> Proposal:
        asked = [self._ask() for _ in range(n)]
        rows = [to_genome(self.space, trial.params) for trial, _ in asked]
        return Proposal(choice=np.array([c for c, _ in rows], dtype=np.int64).reshape(n, -1),
                        mode=np.array([m for _, m in rows], dtype=np.int64).reshape(n, -1),
                        labels=tuple(label for _, label in asked),
                        trials=tuple(trial for trial, _ in asked))

    def _ask(self) -> tuple[optuna.Trial, str]:
        if self.rng.random() < self.mutation_ratio:
            params = self.mutate()
            if params is not None:
                self.study.enqueue_trial(params)
                return self.study.ask(self.dists), "mutate"
        return self.study.ask(self.dists), self.label

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        if not len(proposal):
            return
        choice, mode = self.space.canonical(proposal.choice, proposal.mode)
        self.seen.update(self.space.keys(choice, mode))
        self.best = fastest(self.best, choice, mode, latency)
        if self.proposer is not None:
            self.proposer.observe(choice, mode, latency)

    def mutate(self) -> dict | None:
        """Parameters of a mutation of the best so far not measured yet (None if none found):
        the model's pick among evolved candidates, or else a random one-parameter change."""
        if self.best is None:
            return None
        if self.proposer is not None:
            self.proposer.fit()
            batch = self.proposer.propose(1)
            if len(batch.choice):
                return to_params(self.space, self.space.decode(batch.choice[0], batch.mode[0]))
        return self._random_mutation()

    def _random_mutation(self) -> dict | None:
        best = to_params(self.space, self.space.decode(self.best[1], self.best[2]))
        names = sorted(self.dists)
        for _ in range(MUTATION_TRIES):
            name = names[self.rng.integers(len(names))]
            choices = [c for c in self.dists[name].choices if c != best.get(name)]
            if not choices:
                continue
            params = {**best, name: choices[self.rng.integers(len(choices))]}
            choice, mode = (x[None, :] for x in to_genome(self.space, params))
            if self.space.keys(*self.space.canonical(choice, mode))[0] not in self.seen:
                return params
        return None

    def estimate(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray | None:
        return None if self.proposer is None else self.proposer.estimate(choice, mode)

    def save_model(self, path: str) -> None:
        if self.proposer is None:
            super().save_model(path)
        self.proposer.fit(force=True)
        self.proposer.model.save(path)
