"""What the front search (:class:`~autoplace.search.pareto_search.ParetoSearch`) takes a
placement's figures to be: the simulator's, each corrected by a learned residual once the
measurements differ from it.

Per objective, an :class:`~autoplace.cost_model.XGBCostModel` is boosted on the measured
placements' features (:class:`~autoplace.cost_model.Featurizer`'s, with column 0 the log of
the simulator's figure of that objective) against the log of the measured figure: it learns
what the simulator misses on the measurer (a unit slower than its profile says, a copy that
costs more energy), as the single-objective search's model does. With the simulator as the
measurer every residual is zero and the figures are the simulator's, computed as before
(no features, no trees). The models are refitted once the measured rows have grown by
:data:`~autoplace.search.guided_proposer.REFIT_GROWTH`; a fit is a function of the rows it
is made on (seeded, single-threaded), so a resumed search refits on the rows of its
checkpoint (:meth:`LearnedFigures.refit`) and predicts what it predicted.
"""

from __future__ import annotations

import numpy as np

from autoplace.cost_model import BASE, Featurizer, XGBCostModel
from autoplace.measure.batch import fitting, simulate_batch
from autoplace.measure.objective import Objectives
from autoplace.search.guided_proposer import REFIT_GROWTH
from autoplace.search.scored import Growing
from autoplace.space import SearchSpace

#: measured rows before the models are first fitted
FIRST_FIT = 8
#: a residual (log of measured over simulated) no larger than this is the simulator's own
#: rounding, not something to learn
TOLERANCE = 1e-9


class LearnedFigures:
    """Figures of genomes of ``space`` under ``objective`` (module docstring)."""

    def __init__(self, space: SearchSpace, objective: Objectives, *, seed: int = 0,
                 learn: bool = True):
        self.space, self.objective, self.k = space, objective, len(objective.members)
        self.learn = learn  # False: the simulator's figures always
        self.featurizer = Featurizer(space, objective)
        self.models = [XGBCostModel(seed=seed) for _ in range(self.k)]
        width = len(self.featurizer.names)
        self._X, self._S = Growing(np.zeros((0, width))), Growing(np.zeros((0, self.k)))
        self._M = Growing(np.zeros((0, self.k)))
        self.fitted_rows = 0  # the rows the models were last fitted on
        self._fitted = [False] * self.k  # per model: fitted (it had rows of its figure)
        self.active = False  # whether a residual was learned (else: the simulator's figures)

    def figures(self, choice: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each genome's figures ``[rows, objectives]`` and whether it is feasible (fits,
        within the limits: by the simulator)."""
        if not self.active:
            out = simulate_batch(self.space, choice, mode)
            return self.objective.figures(out), self._feasible(out)
        X, out = self.featurizer.features(choice, mode)
        F = self.objective.figures(out)
        return self._corrected(X, F), self._feasible(out)

    def _feasible(self, out) -> np.ndarray:
        return self.objective.feasible(self.space, out) & fitting(self.space, out)

    def _corrected(self, X: np.ndarray, F: np.ndarray) -> np.ndarray:
        """``F`` with each positive figure replaced by its model's prediction."""
        F = F.copy()
        for j, model in enumerate(self.models):
            pos = F[:, j] > 0
            if self._fitted[j] and pos.any():
                F[pos, j] = self.featurizer.reference * np.exp(
                    model.predict(self._columns(X[pos], F[pos, j])))
        return F

    def _columns(self, X: np.ndarray, figure: np.ndarray) -> np.ndarray:
        """``X`` with its base column the log of ``figure`` (one objective's, > 0) over the
        featurizer's reference: the model's input for that objective."""
        X = X.copy()
        X[:, BASE] = np.log(figure / self.featurizer.reference)
        return X

    def observe(self, choice: np.ndarray, mode: np.ndarray, measured: np.ndarray) -> bool:
        """Take in measured genomes (``measured``: their figures, finite); refit once the
        rows have grown enough. Returns whether the figures it gives changed."""
        if not len(choice) or not self.learn:
            return False
        X, out = self.featurizer.features(choice, mode)
        self._X.extend(X)
        self._S.extend(self.objective.figures(out))
        self._M.extend(np.asarray(measured, dtype=np.float64))
        rows = len(self._M)
        if rows < FIRST_FIT or rows < self.fitted_rows * (1 + REFIT_GROWTH):
            return False
        return self.refit(rows)

    def refit(self, rows: int) -> bool:
        """Fit the models on the first ``rows`` measured rows (nothing if their figures are
        the simulator's); returns whether the figures it gives changed."""
        X, S, M = (g.rows[:rows] for g in (self._X, self._S, self._M))
        self.fitted_rows = rows
        pos = (S > 0) & (M > 0)
        residual = np.log(np.where(pos, M, 1.0)) - np.log(np.where(pos, S, 1.0))
        if not self.learn or (not self.active
                              and np.abs(residual).max(initial=0.0) <= TOLERANCE):
            return False
        ref = self.featurizer.reference
        for j, model in enumerate(self.models):
            on = pos[:, j]
            self._fitted[j] = bool(on.any())
            if self._fitted[j]:
                model.fit(self._columns(X[on], S[on, j]), np.log(M[on, j] / ref))
        self.active = True
        return True
