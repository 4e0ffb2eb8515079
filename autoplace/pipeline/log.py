"""Reading a pipeline search's log: its records (:mod:`autoplace.records.tuning_log`) with a
plan (:mod:`autoplace.pipeline.plan_space` says what they hold), one per trial.

:func:`read_lines` gives each trial's fields (those of ``pipeline`` beside the record's,
``move`` and ``throughput``) by the tuning log's rules
(:func:`autoplace.records.tuning_log.parse_lines`), for the reports and the pandas frame; logs
of ``kind: pipeline-trial`` lines (before the records) are still read there.
:func:`best_plan` reads back the best plan for a graph and mesh (by throughput, or as
``--pick`` chooses: :func:`autoplace.records.front.pick`), which ``autoplace compile
--objective throughput --log`` builds.
"""

from __future__ import annotations

from pathlib import Path

from autoplace.measure.limits import Limits
from autoplace.measure.objective import THROUGHPUT
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, check_covers
from autoplace.pipeline.plan_space import STATUSES, plan_of
from autoplace.records.tuning_log import (
    Record,
    RecordError,
    parse_lines,
    read,
    strict_json,
)

#: the ``kind`` of a line of the logs written before the search logged records
LEGACY_KIND = "pipeline-trial"


class TrialLogError(RecordError):
    """A pipeline log line is malformed, or the log has no trial of this graph and mesh."""


def read_lines(path: str | Path) -> list[dict]:
    """The trials of a pipeline log, as :func:`trial_fields` each, by the tuning log's rules
    (:func:`~autoplace.records.tuning_log.parse_lines`: a torn last line is skipped with a warning);
    TrialLogError naming the file and line if one is not a pipeline trial. Not
    :func:`~autoplace.records.tuning_log.read`: a line of before the records is no Record."""
    return parse_lines(path, lambda line: trial_fields(strict_json(line)), error=TrialLogError)


def is_pipeline_line(d: object) -> bool:
    """Whether a log line's object is a pipeline trial (a record, or a line of before)."""
    return isinstance(d, dict) and (isinstance(d.get("pipeline"), dict)
                                    or d.get("kind") == LEGACY_KIND)


def trial_fields(d: dict) -> dict:
    """A trial's fields from its log line: graph, graph_fp, profile, profile_hash, seed,
    trial, run, move, status, stages, replicas, spilled, period_s (one copy's stream),
    analytic_period_s, throughput (over every copy; None unless streamed). ValueError if
    the line is not a pipeline trial."""
    if not is_pipeline_line(d):
        raise ValueError("not a pipeline trial (a tuning record, or not a record)")
    if d.get("kind") == LEGACY_KIND:
        line = {"run": "", **d}
    else:
        rec = Record.from_dict(d)
        p = rec.pipeline
        period = p["period_s"]
        if period is not None and (isinstance(period, bool) or not period > 0):
            raise ValueError(f"pipeline period_s {period!r} is not a number > 0")
        line = {k: d[k] for k in ("graph", "graph_fp", "profile", "profile_hash", "seed",
                                  "trial")}
        line.update(run=rec.run, move=rec.strategy, status=p["status"], stages=p["stages"],
                    replicas=p["replicas"], spilled=p.get("spilled"), period_s=period,
                    analytic_period_s=p["analytic_period_s"],
                    throughput=p["replicas"] / period if period is not None else None)
    if line["status"] not in STATUSES:
        raise ValueError(f"status {line['status']!r} is not one of {STATUSES}")
    plan_of(line)
    return line


def best_plan(path: str | Path, costs: StageCosts, profile_hash: str, *,
              how: str = THROUGHPUT.name, criteria: str | None = None,
              limits: Limits | None = None) -> tuple[PipelinePlan, Record]:
    """The plan of the trial of ``path`` for this graph and mesh that ``how`` picks among
    those ``limits`` admits (:func:`autoplace.records.front.pick`: by default the highest
    throughput; ``knee``: the knee of the front over ``criteria``, by default the job's
    objectives), with its record; TrialLogError if it has none."""
    from autoplace.records.front import criteria_of, pick

    plans = [r for r in read(path) if r.pipeline is not None
             and r.graph_fp == costs.graph.fingerprint and r.profile_hash == profile_hash]
    top = pick(plans, how, criteria_of(plans, criteria), limits)
    if top is None:
        raise TrialLogError(f"{path}: no fitting pipeline trial of graph {costs.graph.name} "
                            f"({costs.graph.fingerprint}) on this mesh (hash {profile_hash})")
    plan = plan_of(top.pipeline)
    try:
        check_covers(plan, costs.n)
    except ValueError as exc:
        raise TrialLogError(f"{path}: the best trial ({top.trial}): {exc} "
                            f"({costs.graph.name})") from None
    return plan, top
