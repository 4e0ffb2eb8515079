"""The search-strategy interface (MetaSchedule's ``SearchStrategy``): propose, observe.

A strategy proposes genomes of the compiled space; the tuning loop measures them, records
them (log, then study) and hands the measured ones back with :meth:`SearchStrategy.observe`.
The loop knows no strategy by name, and a strategy knows nothing of logs or measurers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


class SearchError(ValueError):
    """The search cannot start (e.g. a study that exists without ``resume``), or a strategy
    is asked for what it does not have (a state, a cost model)."""


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """Candidates to measure: genome rows, how each was picked, and optionally the model's
    prediction and the Optuna trial each was asked as (``None`` when not asked)."""

    choice: np.ndarray  # (n, n_ops) choice per op
    mode: np.ndarray  # (n, n_edges) copy mode per edge
    labels: tuple[str, ...]  # the strategy name of each candidate, as logged
    predicted: np.ndarray | None = None
    trials: tuple = field(default=())  # optuna.trial.Trial or None per candidate

    def __post_init__(self) -> None:
        n = len(self.choice)
        if len(self.mode) != n or len(self.labels) != n or (self.trials and len(self.trials) != n):
            raise ValueError(f"a proposal's rows disagree: {n} choices, {len(self.mode)} modes, "
                             f"{len(self.labels)} labels, {len(self.trials)} trials")

    def __len__(self) -> int:
        return len(self.choice)

    def trial(self, i: int):
        """The Optuna trial candidate ``i`` was asked as, or None."""
        return self.trials[i] if self.trials else None

    def take(self, rows: Sequence[int]) -> Proposal:
        """The candidates at ``rows``, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        return Proposal(choice=self.choice[rows], mode=self.mode[rows],
                        labels=tuple(self.labels[i] for i in rows),
                        predicted=None if self.predicted is None else self.predicted[rows],
                        trials=tuple(self.trials[i] for i in rows) if self.trials else ())


def fastest(best: tuple | None, choice: np.ndarray, mode: np.ndarray,
            latency: np.ndarray) -> tuple | None:
    """``best`` (``(latency, choice, mode)`` or None), or the fastest measured row of a batch
    (``latency`` NaN: failed) where it is faster."""
    ok = np.flatnonzero(~np.isnan(latency))
    if not len(ok):
        return best
    i = ok[np.argmin(latency[ok])]
    if best is not None and not latency[i] < best[0]:
        return best
    return float(latency[i]), choice[i].copy(), mode[i].copy()


def figure_rows(values: np.ndarray, n: int, k: int) -> np.ndarray:
    """``values`` as :meth:`SearchStrategy.observe` gets them in a job of ``k`` objectives:
    ``[n, k]`` floats; ValueError naming the shape otherwise."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (n, k):
        raise ValueError(f"a job of {k} objectives observes {n} candidates' figures as "
                         f"[{n}, {k}], got an array of shape {values.shape}")
    return values


class SearchStrategy(ABC):
    """Proposes candidates and learns from their measurements."""

    #: the study's trials carry per-op parameters (the Optuna samplers read them)
    study_params: bool = False
    #: the strategy asks the Optuna study for candidates (so a job needs one even without
    #: storage; otherwise the study only mirrors the log for storage and dashboards)
    asks_study: bool = False
    #: the strategy makes its own candidates one-op local optima (the search of several
    #: objectives: autoplace.search.pareto_search), so the loop's descent from the best by
    #: one objective stays off
    descends: bool = False

    def __init__(self) -> None:
        self.stats: list[dict] = []  # per-round figures a strategy may keep (cost model)

    @abstractmethod
    def propose(self, n: int) -> Proposal:
        """Up to ``n`` candidates not measured yet; none when the strategy has run dry."""

    @abstractmethod
    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        """Measured candidates (``latency`` in seconds, NaN for a failed one; of a job of
        several objectives, ``[candidates, objectives]``: each one's figure of each, in the
        objective's order, a row of NaN for a failed one). Also called with the records of
        a resumed job and the baselines, which carry no prediction."""

    def finishing(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Called before each of the search's last rounds (the ``descent`` share of its
        trials): a strategy that :attr:`descends` proposes then what makes what it found
        local optima before anything else. Default: nothing."""

    def estimate(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray | None:
        """Each genome's latency (seconds) as the strategy's cost model, fitted on what it
        observed, predicts it; None without a fitted model."""
        return None

    def state(self) -> dict | None:
        """What the strategy carries between rounds beyond what it observed (random state,
        carried-over candidates...), as strict JSON; None if it cannot say (then a resumed
        job goes on from what it observed, not exactly where it stopped)."""
        return None

    def restore(self, state: dict) -> None:
        """Come back to :meth:`state`'s ``state``, having observed what the strategy had
        observed when it was taken: from then on it proposes what it proposed then."""
        raise SearchError(f"{type(self).__name__} has no state to restore")

    def save_model(self, path: str) -> None:
        """Fit the strategy's cost model on everything observed and write it."""
        raise SearchError(f"{type(self).__name__} has no cost model to save")
