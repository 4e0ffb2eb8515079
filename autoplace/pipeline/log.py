"""The pipeline search's log: one strict JSON line per trial, appended and flushed.

A line names the graph (fingerprint) and mesh profile (hash) it was measured on, the move
that made it and the plan (stages as ``[start, end, pes, splits]``, ``splits`` null when
every op uses all the stage's PEs; replicas), with its stream period, analytic period and
throughput (null unless ``status`` is ``ok``: ``no-fit`` when the plan does not fit,
``bounded`` when its analytic throughput showed it cannot beat the best, unstreamed).
:func:`best_plan` reads back the best plan for a graph and mesh, which ``autoplace compile
--objective throughput --log`` builds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage
from autoplace.pipeline.search import STATUSES, Trial

KIND = "pipeline-trial"


class TrialLogError(ValueError):
    """A pipeline log line is malformed, or the log has no trial of this graph and mesh."""


def trial_line(trial: Trial, costs: StageCosts, *, profile_hash: str, seed: int) -> dict:
    """The log line of ``trial`` (JSON-ready)."""
    def finite(x):
        return x if x is not None and math.isfinite(x) else None

    return {"kind": KIND, "graph": costs.graph.name, "graph_fp": costs.graph.fingerprint,
            "profile": costs.machine.name, "profile_hash": profile_hash, "seed": seed,
            "trial": trial.number, "move": trial.move, "status": trial.status,
            "stages": [[s.start, s.end, s.pes, list(s.splits) if s.splits else None]
                       for s in trial.plan.stages],
            "replicas": trial.plan.replicas, "period_s": finite(trial.period_s),
            "analytic_period_s": finite(trial.analytic_period_s),
            "throughput": finite(trial.throughput)}


class TrialLog:
    """Appends trial lines to ``path``, one flushed line each."""

    def __init__(self, path: str | Path, costs: StageCosts, *, profile_hash: str, seed: int):
        self.path, self.costs = Path(path), costs
        self.profile_hash, self.seed = profile_hash, seed
        # read (and refused if malformed) before anything is appended
        self.lines = read_lines(self.path) if self.path.exists() else []
        self._file = self.path.open("a", encoding="utf-8")

    def known(self) -> list[Trial]:
        """The trials already in the log of this graph and mesh, to resume a search."""
        return _trials(self.lines, self.costs, self.profile_hash)

    def __call__(self, trial: Trial) -> None:
        line = trial_line(trial, self.costs, profile_hash=self.profile_hash, seed=self.seed)
        self._file.write(json.dumps(line, allow_nan=False, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_lines(path: str | Path) -> list[dict]:
    """Every line of a pipeline log; TrialLogError naming the file and line if one is not
    a pipeline trial."""
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text, parse_constant=_no_constant)
                if not isinstance(line, dict) or line.get("kind") != KIND:
                    raise ValueError(f"not a {KIND} line")
                if line["status"] not in STATUSES:
                    raise ValueError(f"status {line['status']!r} is not one of {STATUSES}")
                plan_of(line)
            except (ValueError, TypeError, KeyError) as exc:
                raise TrialLogError(f"{path}:{n}: {exc}") from None
            out.append(line)
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not strict JSON")


def plan_of(line: dict) -> PipelinePlan:
    """The plan of a log line."""
    stages = tuple(Stage(int(a), int(b), int(k), tuple(map(int, w)) if w else None)
                   for a, b, k, w in line["stages"])
    return PipelinePlan(stages=stages, replicas=int(line["replicas"]))


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
    """The trial a log line holds."""
    return Trial(number=line["trial"], move=line["move"], plan=plan_of(line),
                 status=line["status"],
                 period_s=line["period_s"], analytic_period_s=line["analytic_period_s"],
                 throughput=line["throughput"])


def best_plan(path: str | Path, costs: StageCosts, profile_hash: str) -> tuple[PipelinePlan,
                                                                                dict]:
    """The plan of the highest-throughput line for this graph and mesh, with its line."""
    return best_of(read_lines(path), costs, profile_hash, where=path)


def best_of(lines: list[dict], costs: StageCosts, profile_hash: str,
            where: str | Path) -> tuple[PipelinePlan, dict]:
    """:func:`best_plan` of lines already read (from ``where``)."""
    lines = [x for x in _mine(lines, costs, profile_hash) if x["throughput"] is not None]
    if not lines:
        raise TrialLogError(f"{where}: no fitting pipeline trial of graph {costs.graph.name} "
                            f"({costs.graph.fingerprint}) on this mesh (hash {profile_hash})")
    best = max(lines, key=lambda x: (x["throughput"], -x["trial"]))
    plan = plan_of(best)
    if plan.stages[-1].end != costs.n:
        raise TrialLogError(f"{where}: trial {best['trial']} does not cover the graph's "
                            f"{costs.n} ops")
    return plan, best
