"""The front of throughput and energy over a mesh's pipeline plans (``--objective
throughput,energy`` on a mesh): the plan space's counterpart of
:class:`~autoplace.search.pareto_search.ParetoSearch`.

Each candidate is one move (:class:`~autoplace.pipeline.moves.PlanMoves`) from a streamed
plan: of ``candidates`` moves drawn from it, the one proposed is the best-ranked by the
stage model's figures, the analytic period (a bound no stream beats) and the energy at that
period (:func:`~autoplace.pipeline.stream_measurer.plan_figures`); a plan that does not fit
its PEs last. Candidates take turns (:data:`TURNS`):

- moving the fastest plan, ranked by the period alone, and moving the least-energy plan,
  ranked by the energy alone (each the first streamed of equals): the ends pushed as a
  search for either objective alone pushes them. Each end is a walk of its own, as that
  search is: it moves the best of the plans it proposed itself (and the start plans), with
  draws of its own random stream, so plans the other turns find do not pull it into their
  basins (on resnet50 over 8x8 PEs, when every turn moved the front's fastest plan with one
  stream, the fastest stalled at 252-259 inferences/s where the throughput job reaches
  264-268; with walks of their own, 263-266 at 1,024 trials);
- moving the front's points (the streamed plans no other is as good as on both figures) one
  after the other, ranked first by non-dominated sorting among the front and each other
  (:func:`~autoplace.records.front.ranks`), then by the hypervolume each adds to the front
  (:func:`~autoplace.records.front.contributions`).

(A turn that goes on while its candidates join the front, or two turns of four for the
fastest plan, gave a smaller hypervolume on average over the four mesh cases of
experiments/bench_pareto.py, two seeds each, at 256 trials.) A plan
none of whose draws finds a new plan in :data:`~autoplace.search.pipeline_moves.DRY_DRAWS`
draws has run dry; when every front point has, the moves start from the next layer of
non-dominated plans, and so on down, so a job ends short of its trials only when no
measured plan has a new neighbour.

Within limits (``--max-latency``, ``--max-energy``) the front is of the plans that keep them
(the loop values a plan beyond them at nothing); of each draw, a candidate that keeps them by
its analytic figures ranks first. While no plan keeps them, each candidate moves the plan
whose analytic figures are least beyond them, with one walk ranked as
:class:`~autoplace.search.pipeline_moves.PipelineMoves` ranks toward them.

The loop measures the plans with bounding off (a plan slower than the fastest may use less
energy: every plan is streamed). Deterministic with a seed; its state is its random state,
the turn, the points moved and the plans whose neighbourhoods ran dry (a resumed job
proposes what it would have).
"""

from __future__ import annotations

import math

import numpy as np

from autoplace.measure.limits import Limits
from autoplace.measure.objective import ENERGY, THROUGHPUT, Objectives
from autoplace.pipeline.moves import PlanMoves
from autoplace.pipeline.plan import PipelinePlan, evaluate
from autoplace.pipeline.plan_space import PlanSpace, parse_plan, plan_text
from autoplace.pipeline.stream_measurer import plan_figures
from autoplace.records.front import contributions, ranks, significant
from autoplace.search.checkpoint import Appended
from autoplace.search.pipeline_moves import beyond_limits, new_neighbours
from autoplace.search.strategy import Proposal, SearchStrategy, figure_rows

#: moves drawn from a front point per candidate, of which the best-ranked is proposed
CANDIDATES = 8
#: the objectives a front of plans is made of (in either order)
FIGURES = (THROUGHPUT.name, ENERGY.name)
#: what the candidates move in turn: the plan least by objective 0, by objective 1 (ranked
#: by it alone), then the front's points (ranked by the hypervolume they add)
TURNS = (0, 1, None)


class PipelineFront(SearchStrategy):
    """The front of ``objective`` (throughput and energy) over the plans of ``space``
    (module docstring); ``turns``: what its candidates move in turn (:data:`TURNS`; ``(0,)``
    moves only the plan least by the first objective, as a search for it alone does)."""

    def __init__(self, space: PlanSpace, objective: Objectives, *, seed: int = 0,
                 candidates: int = CANDIDATES, turns: tuple[int | None, ...] = TURNS):
        super().__init__()
        names = tuple(m.name for m in objective.criteria)
        if sorted(names) != sorted(FIGURES):
            raise ValueError(f"objective {objective.name!r}: a front of pipeline plans is "
                             f"of {','.join(FIGURES)}")
        if not turns or not set(turns) <= {0, 1, None}:
            raise ValueError(f"turns: some of 0, 1 (an objective's end) and None (the "
                             f"front's points), got {turns!r}")
        self.space, self.costs, self.candidates = space, space.costs, candidates
        self.limits = objective.limits or Limits()
        self.turns = tuple(turns)
        self.columns = [FIGURES.index(n) for n in names]  # plan_figures' order -> objective's
        self.period = names.index(THROUGHPUT.name)  # the objective's column of the period
        self.rng = np.random.default_rng(seed)
        self.neighbours = PlanMoves(space.costs, space.pes, self.rng)
        self.neighbours.worth_drawing(space.starts)
        #: per end (0, 1): its own moves (random stream) and the plans it proposed (text)
        self.walks = {j: PlanMoves(space.costs, space.pes, np.random.default_rng([seed, j]))
                      for j in (0, 1)}
        for moves in self.walks.values():
            moves.worth_drawing(space.starts)
        self.walked = {j: Appended() for j in (0, 1)}
        self._walk_plans = {j: set(space.starts) for j in (0, 1)}
        self.known: set[PipelinePlan] = set()  # observed or proposed
        self.plans: list[PipelinePlan] = []  # the streamed ones, in order observed ...
        self.F = np.zeros((0, 2))  # ... their figures, in the objective's order
        #: fitting plans beyond the limits (no figures), how far beyond (analytic), in order
        self.outside: dict[PipelinePlan, float] = {}
        self.dry: set[PipelinePlan] = set()  # plans whose every neighbour is known
        self.turn = 0  # candidates proposed (the next one takes turns[turn % len(turns)])
        self.points = 0  # candidates that moved the front's points (which point is next)

    def figures(self, plan: PipelinePlan, copy_period_s: float) -> np.ndarray:
        """The plan's figures in the objective's order when one copy's period is
        ``copy_period_s``."""
        return significant(np.array(plan_figures(plan, self.costs, copy_period_s)))[
            self.columns]

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        """Measured plans (``latency``: per plan, its figure of each objective, in the
        objective's order: seconds per inference over every copy, joules per inference; a
        row of NaN: not streamed, or beyond the limits)."""
        values = figure_rows(latency, len(proposal), len(FIGURES))
        for plan, row in zip(proposal.choice, values):
            self.known.add(plan)
            if np.isfinite(row).all() and row[self.period] > 0:
                self.plans.append(plan)
                self.F = np.vstack([self.F, significant(row)])
            elif self.limits and (f := evaluate(plan, self.costs)).fits:
                self.outside[plan] = beyond_limits(plan, self.costs, self.limits, f)

    # -- proposing ---------------------------------------------------------------------------
    def propose(self, n: int) -> Proposal:
        """Up to ``n`` plans, each the best-ranked of a draw of moves from the plan its turn
        moves (:data:`TURNS`; lower layers once every point of the front has run dry);
        fewer when no measured plan has a neighbour not yet known."""
        plans, labels = [], []
        layers, front = self._layers()
        while len(plans) < n and layers:
            anchors = [p for p in layers[0] if p not in self.dry]
            if not anchors:
                layers.pop(0)
                continue
            by = self.turns[self.turn % len(self.turns)]
            anchor = self._end(by) if by is not None else None
            if anchor is None:  # (beyond the limits, the least beyond first)
                anchor = anchors[0] if anchors[0] in self.outside else \
                    anchors[self.points % len(anchors)]
            got = self._near(anchor, front, by)
            if got is None:
                self.dry.add(anchor)
                continue
            if by is not None:
                self.walked[by].append(plan_text(got[0]))
                self._walk_plans[by].add(got[0])
            self.turn, self.points = self.turn + 1, self.points + (by is None)
            plans.append(got[0])
            labels.append(got[1])
            self.known.add(got[0])
        choice, mode = self.space.encode(plans)
        return Proposal(choice=choice, mode=mode, labels=tuple(labels))

    def _end(self, j: int) -> PipelinePlan | None:
        """Where end ``j``'s walk moves from: of the streamed plans (within the limits) it
        proposed and the starts, the least by figure ``j`` whose neighbourhood has not run
        dry, the first observed of equals (as a search for that figure alone moves); when
        all of those have run dry, of every streamed plan; None when every one has."""
        order = np.lexsort((np.arange(len(self.F)), self.F[:, j])).tolist()
        for mine in (True, False):
            for i in order:
                plan = self.plans[i]
                if plan not in self.dry and (not mine or plan in self._walk_plans[j]):
                    return plan
        return None

    def _layers(self) -> tuple[list[list[PipelinePlan]], np.ndarray]:
        """The streamed plans (within the limits) by non-dominated layer, each by its first
        figure (of equal figures the first observed only), then the plans beyond the limits
        that fit, the least beyond first; and the figures of the first layer (the front)."""
        outside = sorted(self.outside, key=lambda p: self.outside[p] or math.inf)  # (one
        # that keeps them by its analytic figures but not as streamed: last, as in a search
        # for throughput; stable: the order observed)
        if not len(self.F):
            return [outside] if outside else [], self.F
        rank = ranks(self.F, self.F[:0])
        order = np.lexsort((self.F[:, 1], self.F[:, 0], rank))
        seen, layers = set(), {}
        for i in order.tolist():
            key = tuple(self.F[i])
            if key not in seen:
                seen.add(key)
                layers.setdefault(int(rank[i]), []).append(self.plans[i])
        return [layers[r] for r in sorted(layers)] + ([outside] if outside else []), \
            self.F[rank == 0]

    def _near(self, anchor: PipelinePlan, front: np.ndarray,
              by: int | None = None) -> tuple[PipelinePlan, str] | None:
        """A new plan one move from ``anchor``, the best-ranked of a draw (against ``front``,
        or by figure ``by`` alone), and its move; None when :data:`DRY_DRAWS` draws find
        none."""
        if anchor in self.outside:  # toward the limits: one walk, ranked as a search for
            by = 0  # throughput within them ranks (draws of the walks would go in turns)
        moves = self.neighbours if by is None or anchor in self.outside else self.walks[by]
        pool = new_neighbours(moves, anchor, self.known, self.candidates)
        if pool is None:
            return None
        plan = self._pick(list(pool), front, by)
        return plan, pool[plan]

    def _pick(self, plans: list[PipelinePlan], front: np.ndarray,
              by: int | None = None) -> PipelinePlan:
        """The plan ranked first by its analytic figures: fits and keeps the limits (else
        the least beyond them), then the least figure ``by`` (then the other), or without
        ``by`` its non-dominated rank among ``front`` and the others, then the hypervolume
        it adds (the first of equals)."""
        if len(plans) == 1:
            return plans[0]
        analytic = [evaluate(p, self.costs) for p in plans]
        F = np.array([self.figures(p, f.period_s) for p, f in zip(plans, analytic)])
        fits = np.array([f.fits and math.isfinite(f.period_s) for f in analytic])
        over = np.array([beyond_limits(p, self.costs, self.limits, f) if self.limits
                         and fit else 0.0 for p, f, fit in zip(plans, analytic, fits)])
        kind = np.where(~fits, 2, np.where(over > 0, 1, 0))  # within, beyond, not fitting
        if by is not None:
            return plans[int(np.lexsort((F[:, 1 - by], F[:, by], over, kind))[0])]
        if not (kind == 0).any():
            return plans[int(np.lexsort((over, kind))[0])]
        score = np.full(len(plans), -np.inf)
        within = kind == 0
        rank = ranks(F[within], front)
        gain = np.zeros(int(within.sum()))
        gain[rank == 0] = contributions(F[within][rank == 0], front)
        score[within] = gain - rank
        return plans[int(np.argmax(score))]

    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "turn": self.turn, "points": self.points,
                "dry": sorted(plan_text(p) for p in self.dry),
                "walks": [{"rng": self.walks[j].rng.bit_generator.state,
                           "plans": self.walked[j]} for j in (0, 1)]}

    def restore(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.turn, self.points = int(state.get("turn", 0)), int(state.get("points", 0))
        self.dry = {parse_plan(text) for text in state.get("dry", ())}
        for j, walk in enumerate(state.get("walks", ())):
            self.walks[j].rng.bit_generator.state = walk["rng"]
            self.walked[j] = Appended(walk["plans"])
            self._walk_plans[j] = set(self.space.starts) | {parse_plan(t) for t in walk["plans"]}
