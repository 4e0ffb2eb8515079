"""Model-guided proposals (Ansor/MetaSchedule style): evolve many, rank, measure a few.

:class:`GuidedProposer` keeps what was measured (genomes, features, latencies), fits the
cost model to it (plus warm-start rows), and for each round evolves ``candidates`` genomes
from the best measured ones and the best unmeasured ones of earlier rounds, scored by the
model. The search measures the top of that ranking, with a share ``explore`` of each batch
drawn at random from the rest of the pool so the model also sees what it ranks low. It
knows nothing of Optuna or logs: the search feeds results back with :meth:`observe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autoplace.cost_model import (
    BASE,
    AnalyticCostModel,
    CostModel,
    Featurizer,
    SimulatorCostModel,
    XGBCostModel,
)
from autoplace.measure.batch import BatchOutput, simulate_batch
from autoplace.measure.objective import LATENCY, Objective
from autoplace.search.checkpoint import Appended, pack, unpack
from autoplace.search.config import COST_MODELS
from autoplace.search.genetic_operators import Genomes, evolve
from autoplace.search.scored import Growing, Scored
from autoplace.space import SearchSpace


@dataclass(frozen=True, kw_only=True)
class Batch:
    """Genomes to measure, the model's prediction for each, and how each was picked."""

    choice: np.ndarray
    mode: np.ndarray
    predicted: np.ndarray
    strategy: tuple[str, ...]


def make_model(kind: str, *, seed: int, init_model: str | None = None,
               target: str = "latency") -> CostModel | None:
    """The cost model ``kind`` names (None for ``"none"``); ``target``: the objective."""
    if kind == "xgb":
        return XGBCostModel(seed=seed, init_model=init_model, target=target)
    if kind == "simulator":
        return SimulatorCostModel()
    if kind == "analytic":
        return AnalyticCostModel()
    if kind == "none":
        return None
    raise ValueError(f"cost model must be one of {COST_MODELS}, got {kind!r}")


#: added to the score of a row that does not fit the profile (a scope over capacity, a copy
#: without a route, a limit exceeded): above the score of any row that fits (a log of a time
#: over its bound), so evolution selects and ranks rows that fit first, and the ones that do
#: not by their predicted figure among themselves
NOT_FITTING = 1e3
#: evolution rounds per proposed batch at most (more only when too few candidates fit)
ROUNDS = 4
#: the model is retrained once its training rows have grown by this share (MetaSchedule
#: retrains per batch of 64; here a batch is 8 or 16, and a fit costs tens of milliseconds)
REFIT_GROWTH = 0.1


class GuidedProposer:
    """Proposes batches of genomes for one space (see the module docstring)."""

    def __init__(self, space: SearchSpace, *, model: CostModel | None,
                 candidates: int, seed: int, warm: tuple[np.ndarray, np.ndarray] | None = None,
                 explore: float = 0.1, generations: int = 3, keep: int = 64,
                 feasible: Callable[[BatchOutput], np.ndarray] | None = None,
                 objective: Objective = LATENCY):
        self.space, self.genomes = space, Genomes(space)
        self.featurizer = Featurizer(space, objective)
        self.model, self.candidates, self.explore = model, candidates, explore
        self.generations, self.keep = generations, keep
        self.rng = np.random.default_rng(seed)
        width = len(self.featurizer.names)
        self.warm = warm if warm is not None else (np.zeros((0, width)), np.zeros(0))
        self._rows = {"X": Growing(np.zeros((0, width))), "latency": Growing(np.zeros(0)),
                      "choice": Growing(np.zeros((0, space.n_ops), dtype=np.int64)),
                      "mode": Growing(np.zeros((0, space.n_edges), dtype=np.int64))}
        self.measured: set[bytes] = set()  # duplicate keys (see score) measured
        self.measured_genomes: set[bytes] = set()
        #: per row of a batch simulator output, whether it fits the profile (a row that does
        #: not is never proposed); None: no filter
        self.feasible = feasible
        self.infeasible: set[bytes] = set()  # duplicate keys found not to fit
        self._infeasible_hex = Appended()  # the same, in the order found, for the checkpoint
        self.scored = Scored(space.keys, self._featurize)
        self.population = (self.choice, self.mode)
        self._fitted_rows = -1

    # the measured rows, in the order observed (views)
    X = property(lambda self: self._rows["X"].rows)
    latency = property(lambda self: self._rows["latency"].rows)
    choice = property(lambda self: self._rows["choice"].rows)
    mode = property(lambda self: self._rows["mode"].rows)

    # -- data ----------------------------------------------------------------------------
    def observe(self, choice: np.ndarray, mode: np.ndarray, latency: np.ndarray) -> None:
        """Add measured genomes; ``latency`` is NaN for a failed candidate."""
        plan = self.space.copy_plan(choice, mode)
        mode = plan[1]
        X, dup, _ = self.scored(choice, mode, plan)
        genomes = self.space.keys(choice, mode)
        self.measured_genomes.update(genomes)
        self.measured.update(dup if self.model is not None else genomes)
        for name, rows in (("choice", choice), ("mode", mode), ("X", X),
                           ("latency", np.asarray(latency, dtype=np.float64))):
            self._rows[name].extend(rows)

    def seed_population(self, choice: np.ndarray, mode: np.ndarray) -> None:
        """Genomes to evolve from besides the measured ones (e.g. HEFT's)."""
        self.population = (np.concatenate([self.population[0], choice]),
                           np.concatenate([self.population[1], mode]))

    def fit(self, *, force: bool = False) -> int:
        """(Re)train the model on warm-start and own rows once they have grown by
        :data:`REFIT_GROWTH` since the last fit (every new row with ``force``); the number
        of rows the model was trained on."""
        rows = len(self.warm[1]) + len(self.latency)
        grown = rows >= self._fitted_rows * (1 + REFIT_GROWTH) if not force else True
        if self.model is None or rows == self._fitted_rows or rows == 0 or not grown:
            return max(self._fitted_rows, 0)
        X = np.concatenate([self.warm[0], self.X])
        y = np.concatenate([self.warm[1], self.featurizer.targets(self.latency, self.X)])
        self.model.fit(X, y)
        self._fitted_rows = rows
        return rows

    def state(self) -> dict:
        """Random state, carried-over population, keys known not to fit and the rows the
        model was last trained on, as strict JSON (see :meth:`restore`)."""
        return {"rng": self.rng.bit_generator.state,
                "population": [pack(self.population[0]), pack(self.population[1])],
                "infeasible": self._infeasible_hex, "fitted_rows": self._fitted_rows}

    def restore(self, state: dict) -> None:
        """Back to ``state`` (from :meth:`state`), having observed the same rows as then:
        the model is retrained on the rows it was trained on then (the same model: its
        training is seeded and single-threaded)."""
        rows = int(state["fitted_rows"])
        own = rows - len(self.warm[1])
        if rows > 0 and not 0 <= own <= len(self.latency):
            raise ValueError(f"the model was trained on {rows} rows; {len(self.latency)} "
                             f"observed and {len(self.warm[1])} warm-start rows now")
        self.rng.bit_generator.state = state["rng"]
        c, m = (unpack(x) for x in state["population"])
        if c.shape[1:] != (self.space.n_ops,) or m.shape != (len(c), self.space.n_edges):
            raise ValueError(f"a population of shapes {c.shape}, {m.shape}: not this space's")
        self.population = (c, m)
        self.infeasible = {bytes.fromhex(k) for k in state["infeasible"]}
        self._infeasible_hex = Appended(state["infeasible"])
        if rows > 0 and self.model is not None:
            X, lat = self.X[:own], self.latency[:own]
            self.model.fit(np.concatenate([self.warm[0], X]),
                           np.concatenate([self.warm[1], self.featurizer.targets(lat, X)]))
        self._fitted_rows = rows if self.model is not None else -1

    def dup_keys(self, choice: np.ndarray, mode: np.ndarray,
                 X: np.ndarray | None = None) -> list[bytes]:
        """The duplicate key of each row (as :meth:`score` gives it), without predicting:
        its features with a model (``X`` if already computed), else its genome."""
        if self.model is None:
            return self.space.keys(choice, mode)
        return self.scored(choice, mode)[1] if X is None else _feature_keys(X)

    def score(self, choice: np.ndarray, mode: np.ndarray,
              plan: tuple | None = None) -> tuple[np.ndarray, list[bytes]]:
        """Predicted ``log(latency / bound)`` (lower is better; plus :data:`NOT_FITTING`
        where a row does not fit, with a filter) and a duplicate key per row.

        With a model, rows with equal features are duplicates (the model cannot tell them
        apart: e.g. the same work on twin units); without one, scores are random and only
        equal genomes are duplicates. ``plan``: the rows' copy plan, if already computed.
        """
        if self.model is None:
            return self.rng.random(len(choice)), self.space.keys(choice, mode)
        X, keys, fits = self.scored(choice, mode, plan)
        if self._fitted_rows < 0:  # as the model ranks untrained: the simulator, or its column
            predicted = X[:, getattr(self.model, "column", BASE)]
        else:
            predicted = self.model.predict(X)
        if fits is not None:  # a row that does not fit ranks after every row that does
            predicted = np.where(fits, predicted, predicted + NOT_FITTING)
        return predicted, keys

    def estimate(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray | None:
        """Each genome's latency (seconds) as the model, (re)fitted on what was observed
        (:meth:`fit`), predicts it; None without a model or anything to fit it on."""
        if self.model is None or self.fit() == 0:
            return None
        X = self.featurizer.transform(choice, mode)
        return np.exp(self.model.predict(X)) * self.featurizer.reference

    def _featurize(self, choice: np.ndarray, mode: np.ndarray, plan: tuple | None):
        """Features, duplicate keys and (with a filter) fits of rows (see :class:`Scored`):
        one simulation of each row for both."""
        X, out = self.featurizer.features(choice, mode, plan)
        fits = None if self.feasible is None or out is None else \
            np.asarray(self.feasible(out), dtype=bool)
        return X, _feature_keys(X), fits

    # -- proposing -----------------------------------------------------------------------
    def parents(self) -> tuple[np.ndarray, np.ndarray]:
        """The best measured genomes, then the best unmeasured ones carried over."""
        ok = np.flatnonzero(~np.isnan(self.latency))
        best = ok[np.argsort(self.latency[ok], kind="stable")][: self.keep // 2]
        pc, pm = self.population
        c = np.concatenate([self.choice[best], pc[: self.keep - len(best)]])
        m = np.concatenate([self.mode[best], pm[: self.keep - len(best)]])
        if not len(c):
            c, m = self.space.random_genomes(self.keep, self.rng)
        return c, m

    def propose(self, n: int, avoid: tuple[np.ndarray, np.ndarray] | None = None) -> Batch:
        """Up to ``n`` unmeasured genomes that fit the profile: the model's best, ``explore``
        of them at random from lower ranks; fewer (even none) only when none can be found.
        None equals a genome of ``avoid`` (e.g. others of the same batch).

        When too few of a pool fit, evolution runs again (up to :data:`ROUNDS` times) from
        the best measured genomes and the best of the pool just ranked.
        """
        parts: list[tuple] = []
        taken: tuple[set, set] = (set(), set())  # score keys, genome keys already picked
        if avoid is not None:
            c, m = self.space.canonical(*avoid)
            taken[0].update(self.dup_keys(c, m))
            taken[1].update(self.space.keys(c, m))
        for _ in range(ROUNDS):
            want = n - sum(len(p[0]) for p in parts)
            c, m, s = self._pool(want, taken)
            pick = self._feasible(c, m, self._pick(len(c), want), want)
            rest = np.setdiff1d(np.arange(len(c)), pick)[: self.keep]
            self.population = (c[rest], m[rest])
            parts.append((c[pick], m[pick], s[pick],
                          ["evolve" if p < want else "explore" for p in pick]))
            taken[0].update(self.dup_keys(c[pick], m[pick]))
            taken[1].update(self.space.keys(c[pick], m[pick]))
            if len(pick) == want or not len(c):
                break
        cs, ms, ss, labels = zip(*parts)
        return Batch(choice=np.concatenate(cs), mode=np.concatenate(ms),
                     predicted=np.concatenate(ss), strategy=tuple(x for ls in labels for x in ls))

    def _pool(self, n: int, taken: tuple[set, set]):
        """Evolved genomes, best first, none measured, known not to fit, or ``taken``;
        topped up with random ones when fewer than ``n``."""
        c, m, s = evolve(self.genomes, *self.parents(), self.score,
                         children=max(self.candidates // self.generations, 1),
                         generations=self.generations, keep=self.keep, rng=self.rng,
                         exclude=(self.measured, self.infeasible, taken[0]))
        if len(c) < n:  # running dry: top up with random genomes never measured
            top = self._random_unmeasured(c, m, taken[1])
            c, m, s = (np.concatenate(x) for x in zip((c, m, s), top))
        return c, m, s

    def _random_unmeasured(self, c: np.ndarray, m: np.ndarray, taken: set):
        """Random genomes not measured, not in the pool and not ``taken`` (equal features
        allowed: in a small space, the model's twins are measured before the search gives
        up)."""
        rc, rm = self.space.random_genomes(8 * self.keep, self.rng)
        rc, rm = self.space.canonical(rc, rm)

        def score(choice, mode, plan=None):
            return self.score(choice, mode, plan)[0], self.space.keys(choice, mode)

        exclude = (self.measured_genomes, set(self.space.keys(c, m)), taken)
        return evolve(self.genomes, rc, rm, score, children=1, generations=0, keep=self.keep,
                      rng=self.rng, exclude=exclude)

    def _feasible(self, c: np.ndarray, m: np.ndarray, pick: np.ndarray, n: int) -> np.ndarray:
        """``pick`` without the rows that do not fit the profile (a scope over capacity, a
        copy without a route: every measurer fails them), topped up from the next ranks;
        rejected rows are remembered and never proposed again."""
        if self.feasible is None or not len(pick):
            return pick
        rest = np.setdiff1d(np.arange(len(c)), pick)  # ranked: the next ones to try
        chosen: list[int] = []
        todo, start = pick, 0
        while len(todo):
            ok, dup = self._fits(c[todo], m[todo])
            chosen += todo[ok].tolist()
            self._not_fitting([k for k, fit in zip(dup, ok.tolist()) if not fit])
            want = max(n - len(chosen), 0)
            todo = rest[start:start + 2 * want]  # twice the gap: most of them fit
            start += len(todo)
        return np.array(sorted(chosen[:n]), dtype=np.int64)

    def _fits(self, c: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
        """Whether each row fits, and its duplicate key: from its scoring with a model,
        else simulated."""
        if self.model is not None:
            _, dup, fits = self.scored(c, m)
            return fits, dup
        out = simulate_batch(self.space, c, m, per_unit=self.featurizer.objective.per_unit)
        return np.asarray(self.feasible(out), dtype=bool), \
            self.space.keys(c, m)

    def _not_fitting(self, keys: list[bytes]) -> None:
        """Remember duplicate keys found not to fit (the new ones also for the checkpoint)."""
        for k in keys:
            if k not in self.infeasible:
                self.infeasible.add(k)
                self._infeasible_hex.append(k.hex())

    def _pick(self, pool: int, n: int) -> np.ndarray:
        """Indices into the ranked pool: the top ones, the last few swapped for random
        lower-ranked ones (each slot with probability ``explore``)."""
        n = min(n, pool)
        k = min(int((self.rng.random(n) < self.explore).sum()), pool - n)
        extra = self.rng.choice(np.arange(n, pool), size=k, replace=False) if k else []
        return np.array(sorted([*range(n - k), *(int(x) for x in extra)]), dtype=np.int64)

    def batch_quality(self, predicted: np.ndarray) -> dict:
        """How well ``predicted`` (made before measuring) ranked the last observed batch:
        Spearman's rho and RMSE over its valid candidates with a prediction (NaN: none, e.g.
        a candidate descent replaced), and how many failed."""
        n = len(predicted)
        lat = self.latency[len(self.latency) - n:]
        y = self.featurizer.targets(lat, self.X[len(self.X) - n:])
        failed = np.isnan(lat)
        ok = ~failed & ~np.isnan(predicted)
        rho = spearman_rho(predicted[ok], y[ok])
        rmse = float(np.sqrt(np.mean((predicted[ok] - y[ok]) ** 2))) if ok.any() else None
        return {"batch": n, "failed": int(failed.sum()), "spearman": rho, "rmse": rmse}


def spearman_rho(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation (``scipy.stats.spearmanr``) of the pairs of ``a`` and
    ``b`` that are both finite; None with fewer than three such pairs or a constant side.

    Equal sides rank alike, so their rho is 1 without ranking: the figure of every batch
    when the simulator is the measurer (the learned model, its residual range ``(0, 0)``,
    predicts the simulator's figure exactly). ``scipy.stats`` (337 modules, 0.3 s) is
    imported only where a ranking is needed, not by a simulator-measured job."""
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    if np.array_equal(a, b):
        return 1.0
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def _feature_keys(X: np.ndarray) -> list[bytes]:
    return [r.tobytes() for r in np.round(X, 9)]
