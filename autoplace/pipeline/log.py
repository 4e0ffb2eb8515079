"""The pipeline search's log: the tuner's records (:mod:`autoplace.records.tuning_log`), one per
trial.

A trial is a :class:`~autoplace.records.tuning_log.Record` as a tuned placement is, appended by the
tuner's :class:`~autoplace.records.tuning_log.TuningLog` (one whole line per write, a torn tail
cut): ``strategy`` is the move that made it (``dp`` for the start), ``measurer`` ``stream``,
``result`` the plan's analytic latency (one inference through one copy) and ``period_s``,
seconds per inference over every copy (1 / throughput: the throughput objective's value;
null unless the plan was streamed), an ``out_of_memory`` error when it does not fit. Its
``placement`` is empty: the plan is in ``pipeline`` — ``stages`` as ``[start, end, pes,
splits, units, streamed]`` (``splits`` null when every op uses all the stage's PEs, ``units``
the PE unit of each op, null when each runs on its default unit, ``streamed`` the ops whose
weights stream from the shared memory, null when none does; lines of before may end
before ``units`` or ``streamed``), ``replicas``, ``spilled`` (the cuts whose tensors pass
through the shared memory; left out when none does),
``status`` (``ok``; ``no-fit``; ``bounded``: its analytic throughput showed it cannot beat
the best, so it was not streamed), ``period_s`` (one copy's stream) and
``analytic_period_s``. :func:`autoplace.reports.analysis.load` reads a pipeline log as it reads a
tuning log; :func:`read_lines` gives each trial's fields (those of ``pipeline`` beside the
record's, ``move`` and ``throughput``) by the tuning log's rules
(:func:`autoplace.records.tuning_log.parse_lines`). Logs of ``kind: pipeline-trial`` lines (before
the records) are still read. :func:`best_plan` reads back the best plan for a graph and mesh
(the tuning log's :func:`~autoplace.records.tuning_log.best` by throughput), which ``autoplace
compile --objective throughput --log`` builds.
"""

from __future__ import annotations

import math
from pathlib import Path

from autoplace.measure.base import MeasureResult
from autoplace.measure.objective import THROUGHPUT
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate
from autoplace.pipeline.plan_search import STATUSES, Trial
from autoplace.records.tuning_log import (
    Record,
    RecordError,
    TuningLog,
    best,
    new_run_id,
    parse_lines,
    strict_json,
)
from autoplace.space import Placement
from autoplace.space.problem import ErrorKind

#: the measurer a pipeline trial's record names: the plan's simulated stream
MEASURER = "stream"
#: the ``kind`` of a line of the logs written before the search logged records
LEGACY_KIND = "pipeline-trial"


class TrialLogError(RecordError):
    """A pipeline log line is malformed, or the log has no trial of this graph and mesh."""


def trial_record(trial: Trial, costs: StageCosts, *, profile_hash: str, seed: int,
                 run: str) -> Record:
    """The record of ``trial``."""
    g = costs.graph
    return Record(graph=g.name, graph_fp=g.fingerprint, profile=costs.machine.name,
                  profile_hash=profile_hash, strategy=trial.move, trial=trial.number,
                  seed=seed, run=run, measurer=MEASURER, placement=Placement(ops={}, copies={}),
                  result=_result(trial, costs),
                  pipeline={"stages": [stage_entry(s) for s in trial.plan.stages],
                            "replicas": trial.plan.replicas,
                            **({"spilled": list(trial.plan.spilled)}
                               if trial.plan.spilled else {}),
                            "status": trial.status,
                            "period_s": _finite(trial.period_s),
                            "analytic_period_s": _finite(trial.analytic_period_s)})


def stage_entry(stage: Stage) -> list:
    """A stage as a log writes it: ``[start, end, pes, splits or null, units or null,
    streamed or null]``."""
    return [stage.start, stage.end, stage.pes, list(stage.splits) if stage.splits else None,
            list(stage.units) if stage.units else None,
            list(stage.streamed) if stage.streamed else None]


def _result(trial: Trial, costs: StageCosts) -> MeasureResult:
    f = evaluate(trial.plan, costs)
    latency = _finite(f.latency_s)
    if trial.status == "no-fit":
        worst = max(range(len(f.stage_memory)), key=f.stage_memory.__getitem__)
        return MeasureResult(error=ErrorKind.OUT_OF_MEMORY, latency_s=latency, detail=(
            f"stage {worst} needs {f.stage_memory[worst]:,.0f} bytes per PE; a PE's local "
            f"scope holds {costs.machine.memory_bytes:,}"))
    period = trial.period_s / trial.plan.replicas if trial.status == "ok" else None
    return MeasureResult(latency_s=latency, period_s=period)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


class TrialLog:
    """Appends the records of trials to ``path`` (the log is read, and refused if
    malformed, before anything is appended; ``lines``: what :func:`read_lines` gave if the
    caller read it). ``run``: the id of the run; by default the last one of this graph and
    mesh in the log (a search run again goes on from its trials), else a new one."""

    def __init__(self, path: str | Path, costs: StageCosts, *, profile_hash: str, seed: int,
                 run: str | None = None, lines: list[dict] | None = None):
        self.path, self.costs = Path(path), costs
        self.profile_hash, self.seed = profile_hash, seed
        if lines is None:
            lines = read_lines(self.path) if self.path.exists() else []
        self.lines = lines
        runs = [x["run"] for x in _mine(self.lines, costs, profile_hash) if x["run"]]
        self.run = run or (runs[-1] if runs else new_run_id())
        self._log = TuningLog(self.path)

    def known(self) -> list[Trial]:
        """The trials already in the log of this graph and mesh, to resume a search."""
        return _trials(self.lines, self.costs, self.profile_hash)

    def __call__(self, trial: Trial) -> None:
        self._log.append(trial_record(trial, self.costs, profile_hash=self.profile_hash,
                                      seed=self.seed, run=self.run))

    def close(self) -> None:
        self._log.close()


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


def plan_of(line: dict) -> PipelinePlan:
    """The plan of a trial's fields."""
    stages = tuple(Stage(int(a), int(b), int(k), tuple(map(int, w)) if w else None,
                         tuple(map(str, rest[0])) if rest and rest[0] else None,
                         tuple(map(int, rest[1])) if len(rest) > 1 and rest[1] else None)
                   for a, b, k, w, *rest in line["stages"])
    spilled = line.get("spilled")
    return PipelinePlan(stages=stages, replicas=int(line["replicas"]),
                        spilled=tuple(map(int, spilled)) if spilled else None)


def known_trials(path: str | Path, costs: StageCosts, profile_hash: str) -> list[Trial]:
    """The trials of a log (if it exists) of this graph and mesh, to resume a search."""
    return _trials(read_lines(path), costs, profile_hash) if Path(path).exists() else []


def _trials(lines: list[dict], costs: StageCosts, profile_hash: str) -> list[Trial]:
    return [trial_of(x) for x in _mine(lines, costs, profile_hash)]


def _mine(lines: list[dict], costs: StageCosts, profile_hash: str) -> list[dict]:
    """The lines of this graph and mesh."""
    return [x for x in lines if x["graph_fp"] == costs.graph.fingerprint
            and x["profile_hash"] == profile_hash]


def trial_of(line: dict) -> Trial:
    """The trial of a trial's fields."""
    return Trial(number=line["trial"], move=line["move"], plan=plan_of(line),
                 status=line["status"],
                 period_s=line["period_s"], analytic_period_s=line["analytic_period_s"],
                 throughput=line["throughput"])


def best_plan(path: str | Path, costs: StageCosts, profile_hash: str) -> tuple[PipelinePlan,
                                                                                dict]:
    """The plan of the highest-throughput trial for this graph and mesh, with its fields."""
    return best_of(read_lines(path), costs, profile_hash, where=path)


def best_of(lines: list[dict], costs: StageCosts, profile_hash: str,
            where: str | Path) -> tuple[PipelinePlan, dict]:
    """:func:`best_plan` of lines already read (from ``where``): the best of their records
    (a line of before the records made one again) by throughput."""
    mine = _mine(lines, costs, profile_hash)
    records = [_record(x, costs, where) for x in mine]
    top = best(records, objective=THROUGHPUT)
    if top is None:
        raise TrialLogError(f"{where}: no fitting pipeline trial of graph {costs.graph.name} "
                            f"({costs.graph.fingerprint}) on this mesh (hash {profile_hash})")
    line = next(x for x, r in zip(mine, records) if r is top)
    return plan_of(line), line


def _record(line: dict, costs: StageCosts, where: str | Path) -> Record:
    """The record of a trial's fields; TrialLogError if its plan does not fit the graph."""
    try:
        return trial_record(trial_of(line), costs, profile_hash=line["profile_hash"],
                            seed=line["seed"], run=line["run"])
    except ValueError as exc:
        raise TrialLogError(f"{where}: trial {line['trial']}: {exc}") from None
