"""A search over pipelines, measured by their stream (docs/pipeline.md, "Search").

The dynamic program is exact for the stage model's analytic period with every op of a stage
split over all its PEs on its default unit. What it does not see: a stream with two
inferences in flight per stage (double buffers) runs a tightly balanced plan slower than its
analytic period; an op whose input rotation costs more than its split saves runs better on
fewer PEs; an op may do better on another unit than its default. The search measures
each candidate by simulating its stream (:func:`autoplace.pipeline.stream.pipeline_period`),
starts from the DP's plan (trial 0) and moves from the best plan so far:

- ``cut``: a stage boundary moves by up to three ops;
- ``pe``: a PE moves from one stage to another;
- ``grow`` / ``shrink``: a stage gains or loses a PE (fewer or more replicas may then fit);
- ``split``: one op of a stage runs on fewer of its PEs, or on all again;
- ``unit`` (where a PE's units overlap): one op of a stage moves to another unit of its PEs
  that runs it (two times in three an op of the stage's busiest unit), which the dynamic
  program never does: an op moved off the busiest unit to a slower but idle one can shorten
  the period;
- ``weights``: a stage whose PEs memory sets (it does not fit on one fewer) streams its
  biggest weights from the shared memory until it fits on a PE fewer, and gives that PE up;
  or one of its ops holds its weights again (the dynamic program holds every op's, or
  streams every op's: streaming a few big ones can free PEs). Drawn only if a start plan
  streams weights, as the DP's does where streaming every weight beats holding them all:
  elsewhere the shared memory's bandwidth leaves too little room, and its draws would only
  dilute the others';
- ``spill``: the tensors of a cut next to a stage whose PEs memory sets pass through the
  shared memory instead of the link (written over the uplinks of the stage before, read
  over those of the stage after; each holds them once, not double-buffered), and the stage
  gives the slowest stage the PE it then fits without; or a spilled cut goes over the link
  again (drawn only if a start plan spills a cut or would be faster, analytically,
  spilling the cuts next to one of its stages: the dynamic program spills none);
- ``divide`` / ``merge``: a stage is cut in two, or two neighbours become one (an op keeps
  its unit and where its weights are through every move).

Moves favour the slowest stage. Each trial draws ``candidates`` moves and measures the one
whose plan the cost model ranks first: the tuner's :class:`~autoplace.cost_model.XGBCostModel`
on the plans' features (:mod:`autoplace.pipeline.features`), boosted on the stream's
slowdown over the analytic period and refitted as streamed trials come in; before it is
fitted, or without one (``ranking="analytic"``), the analytic period ranks them;
``ranking="none"`` measures one move per trial, unranked. A candidate whose analytic
throughput is not above the best streamed one is not streamed (no stream beats its busiest
resource). Every candidate counts once (a memo by plan); each trial is reported to
``on_trial`` (the log). Deterministic with a seed, so a search run again with the trials of
its log (``known``) replays them without measuring them again (the model refitted on the same
trials) and goes on from where the log ends.
"""

from __future__ import annotations

import dataclasses
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autoplace.cost_model import CostModel, XGBCostModel
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.features import PLAN_FEATURES, plan_features
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate
from autoplace.pipeline.stream import pipeline_period

MOVES = ("cut", "pe", "grow", "shrink", "split", "unit", "weights", "spill", "divide",
         "merge")
#: the moves that trade memory for the shared memory's traffic (drawn where they may pay:
#: :meth:`PipelineSearch._worth_drawing`)
SHARED_MOVES = ("weights", "spill")
#: what a trial found: streamed, does not fit, or bounded (its analytic throughput, which no
#: stream exceeds, is not above the best streamed one, so it is not streamed)
STATUSES = ("ok", "no-fit", "bounded")
#: how each trial's move is picked (``--cost-model``): the learned model, the analytic
#: period alone, or one move per trial, unranked
RANKINGS = ("xgb", "analytic", "none")
#: relative difference of throughputs below which they are the same (sums in another order)
TIE = 1e-9
#: streamed trials before the model is first fitted, and the least growth to refit
FIRST_FIT, REFIT = 8, 4


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One candidate: its plan, what it found, its stream period and throughput (None
    unless ``status`` is ``ok``)."""

    number: int
    move: str  # "dp" for the start, else one of MOVES
    plan: PipelinePlan
    status: str
    period_s: float | None  # of one copy's stream
    analytic_period_s: float
    throughput: float | None  # inferences/s over all replicas


def stream_inferences(plan: PipelinePlan) -> int:
    """Inferences streamed to measure ``plan``: 16 per stage (at least 64), so that the
    middle half of the stream runs with the double buffers full."""
    return max(64, 16 * len(plan.stages))


def measure(plan: PipelinePlan, costs: StageCosts, *,
            above: float | None = None) -> tuple[str, float | None, float, float | None]:
    """``(status, stream period, analytic period, throughput)`` of ``plan``. A stream is
    never faster than the analytic period (the busiest resource's work per inference), so
    a plan whose analytic throughput is not ``above`` is not streamed, and a stream measured
    faster (the error of a finite stream's window, up to 1.1%) counts as the analytic
    period."""
    f = evaluate(plan, costs)
    if not f.fits:
        return "no-fit", None, f.period_s, None
    if above is not None and f.throughput <= above:
        return "bounded", None, f.period_s, None
    period = max(pipeline_period(plan, costs, inferences=stream_inferences(plan)), f.period_s)
    return "ok", period, f.period_s, plan.replicas / period if period > 0 else math.inf


def ranking_model(ranking: str, seed: int = 0) -> tuple[CostModel | None, int]:
    """``(model, candidates)`` of a :data:`RANKINGS` name."""
    if ranking not in RANKINGS:
        raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
    if ranking == "xgb":
        return XGBCostModel(seed=seed, target="throughput", features=PLAN_FEATURES), 8
    return None, 8 if ranking == "analytic" else 1


class Shared(ABC):
    """A search's side of a study shared with other workers' searches
    (:class:`autoplace.search.pipeline_study.PipelineWorker`)."""

    @abstractmethod
    def claim(self, plan: PipelinePlan, baseline: bool, limit: int) -> int | None:
        """The study's trial number under which this worker measures ``plan``, or None if
        another worker measures it, or ``limit`` search trials are claimed already."""

    @abstractmethod
    def others(self) -> list[Trial]:
        """Trials the other workers measured since the last call."""

    @abstractmethod
    def remaining(self, limit: int) -> int:
        """Search trials still to measure for a study total of ``limit``."""


class PipelineSearch:
    """Local search from a start plan over at most ``pes`` PEs (module docstring); by
    default ranked by the learned model (``ranking_model("xgb")``); ``moves``: which of
    :data:`MOVES` it draws (all by default). With ``shared``, one
    of several workers: a trial is measured only under the study trial this worker claimed
    for it (its number the study's), the others' trials are taken in as they come, and
    ``trials`` counts the whole study."""

    def __init__(self, costs: StageCosts, pes: int, *, seed: int = 0,
                 on_trial: Callable[[Trial], None] | None = None,
                 known: Sequence[Trial] = (), ranking: str = "xgb",
                 shared: Shared | None = None, moves: Sequence[str] = MOVES):
        if not 1 <= pes:
            raise ValueError(f"pes >= 1 must hold, got {pes}")
        if not moves or not set(moves) <= set(MOVES):
            raise ValueError(f"moves must be some of {MOVES}, got {tuple(moves)}")
        # where a PE runs one op at a time, each op's default unit is its fastest already
        self.moves = tuple(m for m in moves if (m != "unit" or costs.overlap)
                           and (m != "weights" or costs.weights.any()))
        self.costs, self.pes, self.on_trial, self.shared = costs, pes, on_trial, shared
        self.lost: set[PipelinePlan] = set()  # claimed by other workers
        self.model, self.candidates = ranking_model(ranking, seed)
        self.rows: tuple[list, list] = ([], [])  # streamed trials' features, log periods
        self.fitted = 0  # rows the model was last fitted on
        self.rng = np.random.default_rng(seed)
        self.seen: dict[PipelinePlan, Trial] = {}
        self.known = {t.plan: t for t in known}  # measured before (a log): not again
        self.best: Trial | None = None
        self.baselines = 1  # the DP's plans measured first (not the search's trials)
        self._slowest: tuple[PipelinePlan | None, int] = (None, 0)  # a plan's slowest stage
        self._kept: tuple[PipelinePlan | None, np.ndarray, np.ndarray, np.ndarray] = \
            (None, None, None, None)  # a plan's units, where chosen, and its streamed ops
        self.runs_on = np.isfinite(costs.unit_secs[:, 0, :])  # [U, n]: unit u runs op o

    def run(self, start: PipelinePlan, trials: int, *,
            also: Sequence[PipelinePlan] = ()) -> Trial:
        """Measure ``start``, then the plans ``also`` (other starts, within ``trials``), then
        up to ``trials`` candidates in all; the best trial."""
        if trials < 1:
            raise ValueError(f"trials >= 1 must hold, got {trials}")
        self._take_in()
        starts = (start, *also)[:trials]
        self.baselines = len(starts)
        self.moves = self._worth_drawing(starts)
        for plan in starts:
            while plan not in self.seen:  # a worker waits for the one that claimed it
                self.lost.discard(plan)
                self._measure(plan, "dp", trials, baseline=True)
                if plan not in self.seen:
                    time.sleep(0.05)
                    self._take_in()
        drawn = 0  # moves drawn: at most 50 per trial asked (the neighbourhood may run dry)
        while self._left(trials) > 0 and drawn < 50 * trials:
            drawn += self.candidates
            self._take_in()
            pool = self._pool() if self.best is not None else {}
            if pool:
                plan = self._pick(list(pool))
                self._measure(plan, pool[plan], trials)
        return self.best

    def _worth_drawing(self, starts: Sequence[PipelinePlan]) -> tuple[str, ...]:
        """The moves to draw from ``starts`` on: ``weights`` only if one streams weights,
        ``spill`` only if one spills a cut or would be faster spilling the cuts next to one
        of its stages (elsewhere their draws dilute the others'); all if nothing else is
        left."""
        drop = set()
        if not any(st.streamed for plan in starts for st in plan.stages):
            drop.add("weights")
        if not any(plan.spilled or self._spill_pays(plan) for plan in starts):
            drop.add("spill")
        kept = tuple(m for m in self.moves if m not in drop)
        return kept or self.moves

    def _spill_pays(self, plan: PipelinePlan) -> bool:
        """Whether spilling the cuts next to a stage of ``plan`` (:meth:`_spilled`) makes a
        plan of a higher analytic throughput."""
        if "spill" not in self.moves:
            return False
        at = evaluate(plan, self.costs).throughput
        for s in range(len(plan.stages)):
            free = [c for c in self._cuts_of(plan, s) if c not in (plan.spilled or ())]
            candidate = self._spilled(plan, s, free) if free else None
            if candidate is not None and evaluate(candidate, self.costs).throughput > at:
                return True
        return False

    def _left(self, trials: int) -> int:
        if self.shared is None:
            return trials - len(self.seen)
        return self.shared.remaining(trials - self.baselines)  # all but the DP's plans

    def _take_in(self) -> None:
        """The other workers' new trials, as if this search had measured them."""
        for trial in self.shared.others() if self.shared is not None else ():
            if trial.plan not in self.seen:
                self._seen(trial)

    def _pool(self) -> dict[PipelinePlan, str]:
        """Unmeasured plans of ``candidates`` moves from the best, with their moves."""
        pool: dict[PipelinePlan, str] = {}
        for _ in range(self.candidates):
            move = self.moves[int(self.rng.integers(len(self.moves)))]
            plan = self._propose(self.best.plan, move)
            if plan is not None and plan not in self.seen and plan not in pool \
                    and plan not in self.lost:
                pool[plan] = move
        return pool

    def _pick(self, plans: list[PipelinePlan]) -> PipelinePlan:
        """The plan the model ranks first (the highest predicted throughput that fits)."""
        if len(plans) == 1:
            return plans[0]
        X, fits = plan_features(plans, self.costs)
        log_period = X[:, 0] if self.fitted == 0 else self.model.predict(X)
        log_throughput = np.log([p.replicas for p in plans]) - log_period
        return plans[int(np.argmax(np.where(fits, log_throughput, -np.inf)))]

    def _learn(self, trial: Trial) -> None:
        """Take a streamed trial in as a training row; refit once enough came in."""
        if self.model is None or trial.status != "ok" or not trial.period_s > 0:
            return
        X, _ = plan_features([trial.plan], self.costs)
        self.rows[0].append(X[0])
        self.rows[1].append(math.log(trial.period_s))
        n = len(self.rows[1])
        if n >= FIRST_FIT and n >= self.fitted + max(REFIT, self.fitted // 10):
            self.model.fit(np.array(self.rows[0]), np.array(self.rows[1]))
            self.fitted = n

    def _measure(self, plan: PipelinePlan, move: str, trials: int, *,
                 baseline: bool = False) -> None:
        before = self.known.get(plan)
        best = self.best.throughput if self.best is not None else None
        if before is not None and before.status == "bounded" and (
                best is None or plan.replicas / before.analytic_period_s > best * (1 + TIE)):
            before = None  # bounded by another run's best, which this run has not reached
        if before is not None:  # its figures from the log, nothing logged again
            number = before.number if self.shared is not None else len(self.seen)
            self._seen(dataclasses.replace(before, number=number, move=move))
            return
        number = len(self.seen) if self.shared is None else \
            self.shared.claim(plan, baseline, trials - self.baselines)
        if number is None:  # another worker's
            self.lost.add(plan)
            return
        # a plan whose bound ties the best's (but for rounding) cannot beat it either
        above = best * (1 + TIE) if best is not None else None
        status, period, analytic, throughput = measure(plan, self.costs, above=above)
        trial = Trial(number=number, move=move, plan=plan, status=status, period_s=period,
                      analytic_period_s=analytic, throughput=throughput)
        if self.on_trial is not None:
            self.on_trial(trial)
        self._seen(trial)

    def _seen(self, trial: Trial) -> None:
        self.seen[trial.plan] = trial
        if self.best is None or _better(trial.throughput, self.best.throughput):
            self.best = trial
        self._learn(trial)

    # -- moves ---------------------------------------------------------------------------
    def _stage_index(self, plan: PipelinePlan) -> int:
        """The slowest stage (analytic) two times in three, else any."""
        if self.rng.random() < 2 / 3:
            return self._slowest_stage(plan)
        return int(self.rng.integers(len(plan.stages)))

    def _slowest_stage(self, plan: PipelinePlan) -> int:
        """The stage of ``plan`` with the longest analytic period (kept for the last plan
        asked: the best, the same for many proposals)."""
        if self._slowest[0] != plan:
            self._slowest = plan, int(np.argmax(evaluate(plan, self.costs).stage_period_s))
        return self._slowest[1]

    def _fewer_pes_need_memory(self, stage: Stage,
                               spilled: tuple[bool, bool] = (False, False)) -> Stage | None:
        """``stage`` on a PE fewer if memory alone keeps that PE (it does not fit without
        it), else None (the shrink move gives it up as it is)."""
        if stage.pes == 1:
            return None
        smaller = _with_pes(stage, stage.pes - 1)
        return None if self.costs.of(smaller, spilled)["fits"] else smaller

    def _propose(self, plan: PipelinePlan, move: str) -> PipelinePlan | None:
        stages = list(plan.stages)
        s = self._stage_index(plan)
        if move == "spill":
            return self._spill(plan, s)
        stages = getattr(self, f"_{move}")(stages, s)
        if stages is None:
            return None
        return self._replicated(self._keep(plan, stages, streaming=move != "weights"),
                                plan.spilled)

    def _keep(self, plan: PipelinePlan, stages: list[Stage], *,
              streaming: bool) -> list[Stage]:
        """``stages`` with each op on the unit it had in ``plan``, and, if ``streaming``,
        streaming its weights where it did (a stage a move made anew has every op on its
        default unit and holding its weights)."""
        if self._kept[0] != plan:
            units = np.concatenate([self.costs.op_units(st) for st in plan.stages])
            chosen = np.concatenate([np.full(st.end - st.start, st.units is not None)
                                     for st in plan.stages])
            streamed = np.array([o for st in plan.stages for o in st.streamed or ()],
                                dtype=np.int64)  # ascending, as the stages are
            self._kept = plan, units, np.r_[0, np.cumsum(chosen)], streamed  # prefix counts
        _, units, chosen, streamed = self._kept
        stages = [self.costs.with_units(st, units[st.start:st.end])
                  if st.units is None and chosen[st.end] > chosen[st.start] else st
                  for st in stages]
        if not streaming or not len(streamed):
            return stages
        bounds = np.searchsorted(streamed, [(st.start, st.end) for st in stages])
        return [self.costs.with_streamed(st, streamed[a:b]) for st, (a, b) in
                zip(stages, bounds)]

    def _replicated(self, stages: list[Stage],
                    spilled: tuple[int, ...] | None = None) -> PipelinePlan | None:
        """The plan with as many copies as the PEs hold, spilling those of the cuts
        ``spilled`` it still has; None if one copy does not fit or a stage has more PEs
        than the costs were tabulated for."""
        pes = sum(st.pes for st in stages)
        if pes > self.pes or any(st.pes > self.costs.K for st in stages):
            return None
        kept = tuple(sorted(set(spilled or ()) & {st.start for st in stages[1:]}))
        try:
            return PipelinePlan(stages=tuple(stages), replicas=self.pes // pes,
                                spilled=kept or None)
        except ValueError:
            return None

    def _spill(self, plan: PipelinePlan, s: int) -> PipelinePlan | None:
        """Half the time a spilled cut next to stage ``s`` goes over the link again; else
        cuts next to it pass the shared memory (:meth:`_spilled`: one, or both if one is not
        enough)."""
        cuts = self._cuts_of(plan, s)
        spilled = set(plan.spilled or ())
        if spilled & set(cuts) and self.rng.random() < 0.5:
            back = int(self.rng.choice(sorted(spilled & set(cuts))))
            return self._replicated(list(plan.stages), tuple(sorted(spilled - {back})))
        free = [cuts[i] for i in self.rng.permutation(len(cuts)) if cuts[i] not in spilled]
        for more in ([free[0]], free) if len(free) == 2 else [free] if free else ():
            candidate = self._spilled(plan, s, more)
            if candidate is not None:
                return candidate
        return None

    def _cuts_of(self, plan: PipelinePlan, s: int) -> list[int]:
        st = plan.stages[s]
        return [c for c in (st.start, st.end) if 0 < c < self.costs.n]

    def _spilled(self, plan: PipelinePlan, s: int, more: list[int]) -> PipelinePlan | None:
        """``plan`` with the cuts ``more`` through the shared memory and stage ``s``, its
        buffers smaller, on a PE fewer, which goes to the slowest stage (if another); None
        unless memory alone kept that PE (stage ``s`` fits without it only so)."""
        stages = list(plan.stages)
        smaller = self._fewer_pes_need_memory(stages[s], plan.spilled_at(s))
        if smaller is None:
            return None
        stages[s] = smaller
        slowest = self._slowest_stage(plan)
        if slowest != s:
            stages[slowest] = _with_pes(stages[slowest], stages[slowest].pes + 1)
        candidate = self._replicated(stages, tuple(sorted(set(plan.spilled or ()) | set(more))))
        if candidate is None or not self.costs.of(candidate.stages[s],
                                                  candidate.spilled_at(s))["fits"]:
            return None
        return candidate

    def _cut(self, stages: list[Stage], s: int) -> list[Stage] | None:
        if len(stages) < 2:
            return None
        b = s if s > 0 and (s == len(stages) - 1 or self.rng.random() < 0.5) else s + 1
        delta = int(self.rng.choice([-3, -2, -1, 1, 2, 3]))
        left, right = stages[b - 1], stages[b]
        at = right.start + delta
        if not left.start < at < right.end:
            return None
        stages[b - 1] = Stage(left.start, at, left.pes)
        stages[b] = Stage(at, right.end, right.pes)
        return stages

    def _pe(self, stages: list[Stage], s: int) -> list[Stage] | None:
        donors = [d for d in range(len(stages)) if d != s and stages[d].pes > 1]
        if not donors:
            return None
        d = donors[int(self.rng.integers(len(donors)))]
        stages[d] = _with_pes(stages[d], stages[d].pes - 1)
        stages[s] = _with_pes(stages[s], stages[s].pes + 1)
        return stages

    def _grow(self, stages: list[Stage], s: int) -> list[Stage]:
        stages[s] = _with_pes(stages[s], stages[s].pes + 1)
        return stages

    def _shrink(self, stages: list[Stage], s: int) -> list[Stage] | None:
        if stages[s].pes == 1:
            return None
        stages[s] = _with_pes(stages[s], stages[s].pes - 1)
        return stages

    def _split(self, stages: list[Stage], s: int) -> list[Stage] | None:
        st = stages[s]
        if st.pes == 1:
            return None
        ways = list(st.ways())
        o = int(self.rng.integers(len(ways)))
        ways[o] = st.pes if ways[o] < st.pes else int(self.rng.integers(1, st.pes))
        stages[s] = dataclasses.replace(st, splits=None if min(ways) == st.pes
                                        else tuple(ways))
        return stages

    def _unit(self, stages: list[Stage], s: int) -> list[Stage] | None:
        st = stages[s]
        ops = np.arange(st.start, st.end)
        units = self.costs.op_units(st)
        movable = self.runs_on[:, ops].sum(axis=0) > 1  # another unit runs it
        if self.rng.random() < 2 / 3:  # off the busiest unit
            movable &= units == int(np.argmax(self.costs.unit_work(st, units)))
        if not movable.any():
            return None
        o = int(self.rng.choice(np.flatnonzero(movable)))
        others = np.flatnonzero(self.runs_on[:, ops[o]])
        others = others[others != units[o]]
        units = units.copy()
        units[o] = int(others[int(self.rng.integers(len(others)))])
        stages[s] = self.costs.with_units(st, units)
        return stages

    def _weights(self, stages: list[Stage], s: int) -> list[Stage] | None:
        """Half the time an op of the stage holds its weights again; else, if memory sets
        the stage's PEs, it streams its biggest held weights until it fits on a PE fewer,
        and gives that PE up."""
        st = stages[s]
        streamed = list(st.streamed or ())
        if streamed and self.rng.random() < 0.5:
            o = streamed[int(self.rng.integers(len(streamed)))]
            stages[s] = self.costs.with_streamed(st, set(streamed) - {o})
            return stages
        smaller = self._fewer_pes_need_memory(st)
        if smaller is None:
            return None
        weights = self.costs.weights[st.start:st.end]
        for o in np.argsort(-weights, kind="stable") + st.start:
            if self.costs.weights[o] == 0 or o in streamed:
                continue
            streamed.append(int(o))
            smaller = self.costs.with_streamed(smaller, streamed)
            if self.costs.of(smaller)["fits"]:
                stages[s] = smaller
                return stages
        return None

    def _divide(self, stages: list[Stage], s: int) -> list[Stage] | None:
        st = stages[s]
        if st.end - st.start < 2:
            return None
        at = int(self.rng.integers(st.start + 1, st.end))
        left = max(1, st.pes // 2)
        right = max(1, st.pes - left)
        stages[s:s + 1] = [Stage(st.start, at, left), Stage(at, st.end, right)]
        return stages

    def _merge(self, stages: list[Stage], s: int) -> list[Stage] | None:
        if len(stages) < 2:
            return None
        a = s if s < len(stages) - 1 else s - 1
        left, right = stages[a], stages[a + 1]
        stages[a:a + 2] = [Stage(left.start, right.end, left.pes + right.pes)]
        return stages


def _better(a: float | None, b: float | None) -> bool:
    """Whether throughput ``a`` beats ``b`` (None: the plan does not fit)."""
    return a is not None and (b is None or a > b)


def _with_pes(stage: Stage, pes: int) -> Stage:
    """``stage`` on ``pes`` PEs: an op keeps its ways if it can, else uses all ``pes``, and
    keeps its unit."""
    if stage.splits is None:
        return dataclasses.replace(stage, pes=pes)
    ways = tuple(min(w, pes) for w in stage.splits)
    return dataclasses.replace(stage, pes=pes, splits=None if min(ways) == pes else ways)
