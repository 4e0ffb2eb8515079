"""A pipelined placement: stages of contiguous ops, PEs per stage, whole pipelines replicated.

:class:`PipelinePlan` is pure data (validated); :func:`evaluate` gives its figures under the
stage model of :mod:`autoplace.pipeline.costs`: the period (the slowest stage: its compute
or its communication; or the shared memory, when every copy's traffic through it takes
longer), throughput (replicas / period), one inference's latency, each stage's
memory per PE and whether it fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoplace.pipeline.costs import StageCosts


@dataclass(frozen=True)
class Stage:
    """Ops ``[start, end)`` on ``pes`` PEs; ``splits``: the ways each op is split (1 to
    ``pes``), or None: every op over all ``pes``; ``units``: the PE unit (by name) that runs
    each op, or None: each op on the unit that runs it whole fastest; ``streamed``: the ops
    (graph indices, ascending) whose weights stay in the shared memory and stream to the PEs
    each inference, or None: every op's weights held in the PEs' local memory."""

    start: int
    end: int
    pes: int
    splits: tuple[int, ...] | None = None
    units: tuple[str, ...] | None = None
    streamed: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        n = self.end - self.start
        if self.splits is not None and (len(self.splits) != n or not all(
                1 <= w <= self.pes for w in self.splits)):
            raise ValueError(f"stage [{self.start}, {self.end}) on {self.pes} PEs: splits "
                             f"{self.splits} must give 1 to {self.pes} ways per op")
        if self.units is not None and (len(self.units) != n or not all(
                isinstance(u, str) and u for u in self.units)):
            raise ValueError(f"stage [{self.start}, {self.end}): units {self.units} must "
                             f"name a PE unit per op ({n})")
        if self.streamed is not None and not (
                self.streamed and all(isinstance(o, int) and self.start <= o < self.end
                                      for o in self.streamed)
                and list(self.streamed) == sorted(set(self.streamed))):
            raise ValueError(f"stage [{self.start}, {self.end}): streamed {self.streamed} must "
                             "be ops of the stage, ascending, or None")

    def ways(self) -> tuple[int, ...]:
        """The ways each op of the stage is split."""
        return self.splits if self.splits is not None else (self.pes,) * (self.end - self.start)


@dataclass(frozen=True, kw_only=True)
class PipelinePlan:
    """Stages covering the ops in order, and how many copies of the whole pipeline run;
    ``spilled``: the cuts (op indices where a stage starts, ascending) whose tensors pass
    through the shared memory (the stage before writes them over its uplinks, the stage
    after reads them in over its uplinks, neither double-buffers them), or None: every cut's
    tensors go over the link between its stages."""

    stages: tuple[Stage, ...]
    replicas: int = 1
    spilled: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.stages or self.stages[0].start != 0:
            raise ValueError("a pipeline's first stage starts at op 0")
        for a, b in zip(self.stages, self.stages[1:]):
            if a.end != b.start:
                raise ValueError(f"stages [{a.start}, {a.end}) and [{b.start}, {b.end}) "
                                 "are not contiguous")
        for s in self.stages:
            if s.end <= s.start or s.pes < 1:
                raise ValueError(f"stage [{s.start}, {s.end}) on {s.pes} PEs is empty")
        if self.replicas < 1:
            raise ValueError(f"replicas >= 1 must hold, got {self.replicas}")
        if self.spilled is not None and not (
                self.spilled and set(self.spilled) <= set(self.cuts)
                and list(self.spilled) == sorted(set(self.spilled))):
            raise ValueError(f"spilled {self.spilled} must be cuts of the plan "
                             f"{self.cuts}, ascending, or None")

    def spilled_at(self, n: int) -> tuple[bool, bool]:
        """Whether the cut before stage ``n`` and the one after it pass through the shared
        memory."""
        cuts = self.spilled or ()
        return self.stages[n].start in cuts, self.stages[n].end in cuts

    @property
    def pes(self) -> int:
        """PEs of one pipeline."""
        return sum(s.pes for s in self.stages)

    @property
    def cuts(self) -> tuple[int, ...]:
        """Where stages start after the first (op indices)."""
        return tuple(s.start for s in self.stages[1:])


@dataclass(frozen=True, kw_only=True)
class PlanFigures:
    """What a plan achieves under the stage model."""

    period_s: float  # of one copy: its slowest stage, or the shared memory's traffic
    latency_s: float
    throughput: float  # inferences per second over all replicas
    stage_period_s: tuple[float, ...]
    shared_period_s: float  # the shared memory's time per inference of one copy
    stage_memory: tuple[float, ...]  # bytes per PE
    fits: bool
    pes_used: int


def rate_text(copy_period_s: float, copies: int, how: str = "streamed") -> str:
    """The one wording of a plan's throughput and period, from ``copy_period_s``, the
    seconds per inference of one copy (``how``: streamed, the throughput of a plan, or
    analytic, the stage model's bound on it), e.g. "1,161.3 inferences/s streamed: period
    0.8611 ms over 2 copies (1.7222 ms per copy)"; the throughput is over every copy."""
    over = copy_period_s / copies
    rate = f"{1 / over:,.1f} inferences/s {how}" if over > 0 else f"no period ({how})"
    if copies == 1:
        return f"{rate}: period {copy_period_s * 1e3:.4f} ms (1 copy)"
    return (f"{rate}: period {over * 1e3:.4f} ms over {copies} copies "
            f"({copy_period_s * 1e3:.4f} ms per copy)")


#: plans whose figures a StageCosts keeps (the last ones asked; then it starts again)
EVALUATED = 256


def evaluate(plan: PipelinePlan, costs: StageCosts) -> PlanFigures:
    """The plan's figures; ValueError if it does not cover the graph or a stage has more
    PEs than the costs were tabulated for. Kept in ``costs.evaluated`` (figures are frozen,
    a plan is a value): asked again, the same figures."""
    memo = costs.evaluated
    figures = memo.get(plan)
    if figures is None:
        if len(memo) >= EVALUATED:
            memo.clear()
        figures = memo[plan] = _evaluate(plan, costs)
    return figures


def check_covers(plan: PipelinePlan, ops: int) -> None:
    """ValueError unless ``plan``'s stages end at the last of a graph's ``ops`` ops."""
    if plan.stages[-1].end != ops:
        raise ValueError(f"the plan covers ops [0, {plan.stages[-1].end}), the graph has "
                         f"{ops}")


def _evaluate(plan: PipelinePlan, costs: StageCosts) -> PlanFigures:
    check_covers(plan, costs.n)
    figures = costs.plan_stages(plan)
    shared = costs.shared_seconds(plan)
    period = max(shared, *(f["period"] for f in figures))
    return PlanFigures(period_s=period, latency_s=sum(f["latency"] for f in figures),
                       throughput=plan.replicas / period if period > 0 else float("inf"),
                       stage_period_s=tuple(f["period"] for f in figures),
                       shared_period_s=shared,
                       stage_memory=tuple(f["memory"] for f in figures),
                       fits=all(f["fits"] for f in figures),
                       pes_used=plan.pes * plan.replicas)
