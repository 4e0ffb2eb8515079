"""The space of pipeline plans on a mesh, as the tuning loop sees a space.

The loop (:mod:`autoplace.search.loop`) handles candidates as genome rows of a space:
``choice`` and ``mode`` arrays it canonicalises, keys, decodes and writes as text. A plan
space's genome is the plan itself: ``choice`` is an object array of
:class:`~autoplace.pipeline.plan.PipelinePlan` (one per candidate) and ``mode`` has no
columns. Its text form (:func:`plan_text`, parsed back by :func:`parse_plan`) is the key
that dedupes candidates, the genome a study trial carries and what a worker claims.

A plan's record (:meth:`PlanSpace.record_fields`) has an empty placement and the plan in
``pipeline`` (docs/pipeline.md, "Log"): ``stages`` as ``[start, end, pes, splits, units,
streamed]``, ``replicas``, ``spilled`` (left out when no cut is), ``status`` (``ok``: streamed;
``no-fit``; ``bounded``: its analytic throughput could not beat the best, so it was not
streamed), ``period_s`` (one copy's stream, null unless streamed) and ``analytic_period_s``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from autoplace.hardware.profile import Profile
from autoplace.measure.base import MeasureResult
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate
from autoplace.space import Placement

#: what a plan's record says it found: streamed, does not fit, or bounded (its analytic
#: throughput, which no stream exceeds, was not above the best streamed one: not streamed)
STATUSES = ("ok", "no-fit", "bounded")
#: the label of the dynamic program's plans, measured before the search (its baselines)
START = "dp"

def dp_reference(trials: Iterable[tuple[str, int, float | None]]) -> tuple[str, int, float] | None:
    """Of ``(strategy, trial, streamed throughput or None)``, the DP's start plan that
    streams best: what a search's best is compared with (``pipeline``, its report and its
    search picture); None if no start plan streamed."""
    starts = [(m, t, v) for m, t, v in trials
              if (m == START or m.startswith(START + "-")) and v is not None and v == v]
    return max(starts, key=lambda s: (s[2], -s[1])) if starts else None


def reference_text(ref: tuple[str, int, float], starts: int) -> str:
    """The one wording of :func:`dp_reference`: "the DP's better plan, trial 1 (dp-2),
    1,278.3 inferences/s streamed" (``starts``: the DP's start plans measured)."""
    which = "plan" if starts == 1 else "better plan"
    return f"the DP's {which}, trial {ref[1]} ({ref[0]}), {ref[2]:,.1f} inferences/s streamed"


_STAGE = re.compile(r"(\d+):(\d+):(\d+)(?:/([\d,]+))?(?:@([^~\s]+))?(?:~([\d,]+))?$")


class PlanSpace:
    """Pipeline plans of ``costs``' graph over at most ``pes`` PEs of ``profile``'s mesh,
    searched from ``starts`` (the dynamic program's plans, :func:`~autoplace.pipeline.
    best_pipelines`; measured first, as the search's baselines)."""

    def __init__(self, costs: StageCosts, profile: Profile, pes: int,
                 starts: Sequence[PipelinePlan]):
        if not 1 <= pes <= costs.machine.size:
            raise ValueError(f"pes: 1 to the mesh's {costs.machine.size} PEs, got {pes}")
        if not starts:
            raise ValueError("a plan space needs a start plan")
        self.costs, self.profile, self.pes = costs, profile, pes
        self.graph = costs.graph
        self.starts = tuple(starts)

    @property
    def log10_size(self) -> float:
        """log10 of the ways to cut the ops into stages and give each stage PEs (a lower
        bound: splits, units and streamed weights multiply it)."""
        n, p = self.costs.n, self.pes
        terms = [_log10_comb(n - 1, s - 1) + _log10_comb(p - 1, s - 1)
                 for s in range(1, min(n, p) + 1)]
        top = max(terms)
        return top + math.log10(sum(10 ** (t - top) for t in terms))

    def baselines(self) -> list[tuple[str, PipelinePlan]]:
        """The start plans by name: ``dp``, then ``dp-2``... (the tuning loop's baselines)."""
        return [(START if i == 0 else f"{START}-{i + 1}", plan)
                for i, plan in enumerate(self.starts)]

    # -- genomes (the loop's interface) ----------------------------------------------------
    def encode(self, plans: Sequence[PipelinePlan]) -> tuple[np.ndarray, np.ndarray]:
        """The genome rows of ``plans``."""
        choice = np.empty(len(plans), dtype=object)
        choice[:] = list(plans)
        return choice, np.zeros((len(plans), 0), dtype=np.int8)

    def canonical(self, choice: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Plans are canonical as made (a stage's splits are None when every op uses all
        its PEs, replicas fill the PEs): the rows as they are."""
        return choice, mode

    def keys(self, choice: np.ndarray, mode: np.ndarray) -> list[bytes]:
        """One key per row, equal for equal plans: the text form."""
        return [plan_text(p).encode() for p in choice]

    def decode_rows(self, choice: np.ndarray, mode: np.ndarray) -> list[PipelinePlan]:
        return list(choice)

    def decode(self, choice, mode) -> PipelinePlan:
        """The plan of one genome row (as :meth:`parse_genome` gives it)."""
        return choice

    def format_genome(self, choice, mode) -> str:
        return plan_text(choice)

    def parse_genome(self, text: str) -> tuple[PipelinePlan, np.ndarray]:
        """The genome row of :meth:`format_genome`'s text; ValueError naming what is wrong."""
        return parse_plan(text), np.zeros(0, dtype=np.int8)

    # -- records -------------------------------------------------------------------------
    def record_fields(self, plan: PipelinePlan, result: MeasureResult) -> dict:
        """What a record of ``plan`` measured as ``result`` holds beside the job's fields:
        an empty placement and the plan with its figures in ``pipeline``."""
        analytic = evaluate(plan, self.costs).period_s
        period = result.period_s * plan.replicas if result.period_s is not None else None
        status = "no-fit" if not result.ok else "ok" if period is not None else "bounded"
        return {"placement": Placement(ops={}, copies={}), "pipeline": {
            "stages": [stage_entry(s) for s in plan.stages], "replicas": plan.replicas,
            **({"spilled": list(plan.spilled)} if plan.spilled else {}),
            "status": status, "period_s": period,
            "analytic_period_s": analytic if math.isfinite(analytic) else None}}

    def candidate_of(self, pipeline: Mapping | None, placement: Placement) -> PipelinePlan:
        """The plan a record holds; ValueError if it holds none."""
        if pipeline is None:
            raise ValueError("the record holds a placement, not a pipeline plan")
        return plan_of(pipeline)


def _log10_comb(n: int, k: int) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(10)


def stage_entry(stage: Stage) -> list:
    """A stage as a record holds it: ``[start, end, pes, splits or null, units or null,
    streamed or null]``."""
    return [stage.start, stage.end, stage.pes, list(stage.splits) if stage.splits else None,
            list(stage.units) if stage.units else None,
            list(stage.streamed) if stage.streamed else None]


def plan_of(fields: Mapping) -> PipelinePlan:
    """The plan of a record's ``pipeline`` fields (``stages``, ``replicas``, ``spilled``;
    a stage of older logs may end before ``units`` or ``streamed``)."""
    stages = tuple(Stage(int(a), int(b), int(k), tuple(map(int, w)) if w else None,
                         tuple(map(str, rest[0])) if rest and rest[0] else None,
                         tuple(map(int, rest[1])) if len(rest) > 1 and rest[1] else None)
                   for a, b, k, w, *rest in fields["stages"])
    spilled = fields.get("spilled")
    return PipelinePlan(stages=stages, replicas=int(fields["replicas"]),
                        spilled=tuple(map(int, spilled)) if spilled else None)


def plan_text(plan: PipelinePlan) -> str:
    """A plan as text: its stages (``start:end:pes``, then ``/ways`` where split fewer ways,
    ``@units`` where ops run on other units than their defaults, ``~ops`` of the ops that
    stream their weights), ``x`` copies, and the cuts spilled to the shared memory
    (``^cuts``)."""
    spilled = f" ^{','.join(map(str, plan.spilled))}" if plan.spilled else ""
    return " ".join(map(_stage_text, plan.stages)) + f" x{plan.replicas}" + spilled


def _stage_text(s: Stage) -> str:
    return (f"{s.start}:{s.end}:{s.pes}"
            + (f"/{','.join(map(str, s.splits))}" if s.splits else "")
            + (f"@{','.join(s.units)}" if s.units else "")
            + (f"~{','.join(map(str, s.streamed))}" if s.streamed else ""))


def parse_plan(text: str) -> PipelinePlan:
    """The plan of :func:`plan_text`'s text; ValueError naming what is wrong."""
    tokens = text.split()
    spilled = None
    if tokens and tokens[-1].startswith("^"):
        spilled = tuple(_ints(tokens.pop()[1:], text))
    if len(tokens) < 2 or not re.fullmatch(r"x\d+", tokens[-1]):
        raise ValueError(f"plan {text!r}: stages, then 'x<copies>' expected")
    replicas = int(tokens.pop()[1:])
    stages = []
    for token in tokens:
        m = _STAGE.match(token)
        if m is None:
            raise ValueError(f"plan {text!r}: stage {token!r} is not start:end:pes"
                             "[/ways][@units][~ops]")
        a, b, k, ways, units, streamed = m.groups()
        stages.append(Stage(int(a), int(b), int(k),
                            tuple(_ints(ways, text)) if ways else None,
                            tuple(units.split(",")) if units else None,
                            tuple(_ints(streamed, text)) if streamed else None))
    return PipelinePlan(stages=tuple(stages), replicas=replicas, spilled=spilled)


def _ints(text: str, plan: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"plan {plan!r}: {text!r} is not a list of integers") from None
