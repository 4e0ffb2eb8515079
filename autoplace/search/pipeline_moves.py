"""The pipeline search as a strategy of the tuning loop (docs/pipeline.md, "Search").

From the best plan measured so far, each candidate is the best-ranked of ``candidates``
plans one move away (:class:`autoplace.pipeline.moves.PlanMoves`; none measured or proposed
before). Once every plan one move from the best is known (a local optimum: :data:`DRY_DRAWS`
draws find no new one), the moves start from the next best measured plan, and so on down
(best first), so a job ends short of its trials only when no measured plan has a new
neighbour; a new best takes the lead again. Within limits (``--max-latency``,
``--max-energy``) the best is the best that keeps them; while none does, the moves start
from the plan least beyond them, and candidates that keep them (by their analytic figures)
rank first. Candidates are ranked by the learned
:class:`~autoplace.cost_model.XGBCostModel` on the plans' features
(:mod:`autoplace.pipeline.features`), boosted on the stream's slowdown over the analytic
period and refitted as streamed plans come in; before it is fitted, or without one
(``ranking="analytic"``), by the analytic period; ``ranking="none"`` proposes one move per
candidate, unranked. The loop measures the plans (:class:`autoplace.pipeline.stream_measurer.
StreamMeasurer`), logs them and hands them back. Deterministic with a seed; its state is its
random state and the plans whose neighbourhoods ran dry (a resumed job proposes what it
would have).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence

import numpy as np

from autoplace.cost_model import CostModel, XGBCostModel
from autoplace.measure.limits import Limits
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.features import PLAN_FEATURES, plan_features
from autoplace.pipeline.moves import MOVES, PlanMoves
from autoplace.pipeline.plan import PipelinePlan, PlanFigures, evaluate
from autoplace.pipeline.plan_space import PlanSpace, parse_plan, plan_text
from autoplace.pipeline.stream_measurer import plan_figures
from autoplace.search.config import RANKINGS
from autoplace.search.strategy import Proposal, SearchStrategy

#: streamed plans before the model is first fitted, and the least growth to refit
FIRST_FIT, REFIT = 8, 4
#: draws of ``candidates`` moves that find no new plan, after which a plan's neighbourhood
#: counts as run dry (the moves go on from the next best plan)
DRY_DRAWS = 500


def ranking_model(ranking: str, seed: int = 0) -> tuple[CostModel | None, int]:
    """``(model, candidates)`` of a :data:`RANKINGS` name."""
    if ranking not in RANKINGS:
        raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
    if ranking == "xgb":
        return XGBCostModel(seed=seed, target="throughput", features=PLAN_FEATURES), 8
    return None, 8 if ranking == "analytic" else 1


def new_neighbours(neighbours: PlanMoves, anchor: PipelinePlan, known: set,
                   candidates: int) -> dict[PipelinePlan, str] | None:
    """The first draw of ``candidates`` moves from ``anchor`` that reaches plans not
    ``known``: those plans and their moves; None when :data:`DRY_DRAWS` draws reach none."""
    for _ in range(DRY_DRAWS):
        pool: dict[PipelinePlan, str] = {}
        for _ in range(candidates):
            plan, move = neighbours.draw(anchor)
            if plan is not None and plan not in known and plan not in pool:
                pool[plan] = move
        if pool:
            return pool
    return None


def beyond_limits(plan: PipelinePlan, costs: StageCosts, limits: Limits,
                  f: PlanFigures | None = None) -> float:
    """How far the plan's analytic figures (``f``: :func:`~autoplace.pipeline.plan.evaluate`'s,
    computed if not given; latency, and energy at the analytic period) are beyond
    ``limits`` (:meth:`~autoplace.measure.limits.Limits.beyond`: 0 within)."""
    f = evaluate(plan, costs) if f is None else f
    _, energy = plan_figures(plan, costs, f.period_s)
    return float(limits.beyond(f.latency_s, energy, lambda scope: math.nan))


class PipelineMoves(SearchStrategy):
    """Local search over the plans of ``space`` (module docstring); ``moves``: which of
    :data:`~autoplace.pipeline.moves.MOVES` it draws (all that apply by default);
    ``limits``: the job's bounds on a plan's latency and energy, if any."""

    def __init__(self, space: PlanSpace, *, seed: int = 0, ranking: str = "xgb",
                 moves: Sequence[str] = MOVES, limits: Limits | None = None):
        super().__init__()
        self.space, self.costs, self.limits = space, space.costs, limits or Limits()
        self.rng = np.random.default_rng(seed)
        self.neighbours = PlanMoves(space.costs, space.pes, self.rng, moves)
        self.neighbours.worth_drawing(space.starts)
        self.model, self.candidates = ranking_model(ranking, seed)
        self.rows: tuple[list, list] = ([], [])  # streamed plans' features, log periods
        self.fitted = 0  # rows the model was last fitted on
        self.known: set[PipelinePlan] = set()  # observed or proposed
        #: (seconds per inference, plan) of the best: infinite until a plan streams
        self.best: tuple[float, PipelinePlan] | None = None
        #: a heap of the measured plans the moves may start from, best first: (rank
        #: (:meth:`_rank`), order observed, plan); run-dry ones are popped when they come up
        self.anchors: list[tuple[tuple[int, float], int, PipelinePlan]] = []
        self._order = itertools.count()
        self.dry: set[PipelinePlan] = set()  # plans whose every neighbour is known

    @property
    def moves(self) -> tuple[str, ...]:
        """The moves it draws."""
        return self.neighbours.moves

    def propose(self, n: int) -> Proposal:
        """Up to ``n`` plans, each the best-ranked of a draw of moves from the best measured
        plan that has a neighbour not yet known; fewer when no measured plan has one."""
        plans, labels = [], []
        while len(plans) < n and (got := self._next()) is not None:
            plans.append(got[0])
            labels.append(got[1])
            self.known.add(got[0])
        choice, mode = self.space.encode(plans)
        return Proposal(choice=choice, mode=mode, labels=tuple(labels))

    def _next(self) -> tuple[PipelinePlan, str] | None:
        """A new plan one move from the best measured plan whose neighbourhood has not run
        dry, and its move; None when every measured plan's has."""
        while self.anchors:
            anchor = self.anchors[0][2]
            if anchor not in self.dry and (got := self._near(anchor)) is not None:
                return got
            self.dry.add(anchor)
            heapq.heappop(self.anchors)
        return None

    def _near(self, anchor: PipelinePlan) -> tuple[PipelinePlan, str] | None:
        pool = new_neighbours(self.neighbours, anchor, self.known, self.candidates)
        if pool is None:
            return None
        plan = self._pick(list(pool))
        return plan, pool[plan]

    def _pick(self, plans: list[PipelinePlan]) -> PipelinePlan:
        """The plan the model ranks first (the highest predicted throughput that fits; with
        limits, of those whose analytic figures keep them, else the least beyond them)."""
        if len(plans) == 1:
            return plans[0]
        X, fits = plan_features(plans, self.costs)
        log_period = X[:, 0] if self.fitted == 0 else self.model.predict(X)
        log_throughput = np.log([p.replicas for p in plans]) - log_period
        if not self.limits:
            return plans[int(np.argmax(np.where(fits, log_throughput, -np.inf)))]
        over = np.array([beyond_limits(p, self.costs, self.limits) for p in plans])
        kind = np.where(~fits, 2, np.where(over > 0, 1, 0))
        return plans[int(np.lexsort((np.where(kind == 0, -log_throughput, over), kind))[0])]

    def _rank(self, plan: PipelinePlan, value: float) -> tuple[int, float]:
        """An anchor's rank: by seconds per inference where it has them (kept the limits),
        then, with limits, by how far its analytic figures are beyond them (the moves go
        toward the limits while no plan keeps them), then the rest."""
        if math.isfinite(value):
            return 0, value
        if self.limits and (f := evaluate(plan, self.costs)).fits:
            over = beyond_limits(plan, self.costs, self.limits, f)
            return (1, over) if over > 0 else (2, 0.0)
        return 2, 0.0

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        """Measured plans (seconds per inference over every copy; NaN: not streamed)."""
        for plan, value in zip(proposal.choice, latency):
            self.known.add(plan)
            value = math.inf if np.isnan(value) else float(value)
            if self.best is None or value < self.best[0]:
                self.best = value, plan
            heapq.heappush(self.anchors, (self._rank(plan, value), next(self._order), plan))
            if math.isfinite(value) and value > 0:
                self._learn(plan, value)

    def _learn(self, plan: PipelinePlan, value: float) -> None:
        """Take a streamed plan in as a training row; refit once enough came in."""
        if self.model is None:
            return
        X, _ = plan_features([plan], self.costs)
        self.rows[0].append(X[0])
        self.rows[1].append(math.log(value * plan.replicas))  # one copy's period
        n = len(self.rows[1])
        if n >= FIRST_FIT and n >= self.fitted + max(REFIT, self.fitted // 10):
            self.model.fit(np.array(self.rows[0]), np.array(self.rows[1]))
            self.fitted = n

    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state,
                "dry": sorted(plan_text(p) for p in self.dry)}

    def restore(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.dry = {parse_plan(text) for text in state.get("dry", ())}
