"""The moves of the pipeline search: plans one step from a plan (docs/pipeline.md, "Search").

The dynamic program is exact for the stage model's analytic period with every op of a stage
split over all its PEs on its default unit. What it does not see: a stream with two
inferences in flight per stage (double buffers) runs a tightly balanced plan slower than its
analytic period; an op whose input rotation costs more than its split saves runs better on
fewer PEs; an op may do better on another unit than its default. The moves reach such plans
(the strategy :class:`autoplace.search.pipeline_moves.PipelineMoves` draws and ranks them):

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

Moves favour the slowest stage (two times in three).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate

MOVES = ("cut", "pe", "grow", "shrink", "split", "unit", "weights", "spill", "divide",
         "merge")
#: the moves that trade memory for the shared memory's traffic (drawn where they may pay:
#: :meth:`PlanMoves.worth_drawing`)
SHARED_MOVES = ("weights", "spill")


class PlanMoves:
    """The moves of :data:`MOVES` (``moves``: those to draw) from plans over at most ``pes``
    PEs of ``costs``, drawn with ``rng``. ``unit`` is left out where a PE runs one op at a
    time (each op's default unit is its fastest already), ``weights`` where no op has any."""

    def __init__(self, costs: StageCosts, pes: int, rng: np.random.Generator,
                 moves: Sequence[str] = MOVES):
        if not 1 <= pes:
            raise ValueError(f"pes >= 1 must hold, got {pes}")
        if not moves or not set(moves) <= set(MOVES):
            raise ValueError(f"moves must be some of {MOVES}, got {tuple(moves)}")
        self.moves = tuple(m for m in moves if (m != "unit" or costs.overlap)
                           and (m != "weights" or costs.weights.any()))
        self.costs, self.pes, self.rng = costs, pes, rng
        self._slowest: tuple[PipelinePlan | None, int] = (None, 0)  # a plan's slowest stage
        self._kept: tuple[PipelinePlan | None, np.ndarray, np.ndarray, np.ndarray] = \
            (None, None, None, None)  # a plan's units, where chosen, and its streamed ops
        self.runs_on = np.isfinite(costs.unit_secs[:, 0, :])  # [U, n]: unit u runs op o

    def draw(self, plan: PipelinePlan) -> tuple[PipelinePlan | None, str]:
        """``(plan one move from plan, or None where the move drawn does not apply; the
        move)``."""
        move = self.moves[int(self.rng.integers(len(self.moves)))]
        return self._propose(plan, move), move

    def worth_drawing(self, starts: Sequence[PipelinePlan]) -> tuple[str, ...]:
        """Keep to the moves worth drawing from ``starts`` on, and return them: ``weights``
        only if one streams weights, ``spill`` only if one spills a cut or would be faster
        spilling the cuts next to one of its stages (elsewhere their draws dilute the
        others'); all if nothing else is left."""
        drop = set()
        if not any(st.streamed for plan in starts for st in plan.stages):
            drop.add("weights")
        if not any(plan.spilled or self._spill_pays(plan) for plan in starts):
            drop.add("spill")
        self.moves = tuple(m for m in self.moves if m not in drop) or self.moves
        return self.moves

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



def _with_pes(stage: Stage, pes: int) -> Stage:
    """``stage`` on ``pes`` PEs: an op keeps its ways if it can, else uses all ``pes``, and
    keeps its unit."""
    if stage.splits is None:
        return dataclasses.replace(stage, pes=pes)
    ways = tuple(min(w, pes) for w in stage.splits)
    return dataclasses.replace(stage, pes=pes, splits=None if min(ways) == pes else ways)
