"""The pipeline search run as the tests read it: the tuning loop over a plan space
(:func:`autoplace.search.mesh.tune_mesh`), its trials read back from its log's records."""

from __future__ import annotations

import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from autoplace.hardware.load import load_profile
from autoplace.pipeline import PipelinePlan, best_pipelines
from autoplace.pipeline.moves import MOVES
from autoplace.pipeline.plan_space import PlanSpace, plan_of
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search.mesh import mesh_config, tune_mesh
from autoplace.search.pipeline_moves import PipelineMoves


def mesh_with_energy(tmp_path: Path, idle: bool = False) -> Path:
    """The bundled mesh with its DRAM at 100/120 pJ per byte read/written, its PEs' SRAM
    at 1/2, links at 5 and uplinks at 20 pJ per byte (its units' power as bundled); with
    ``idle``, its PEs' ARM cores draw 0.02 W and NPUs 0.05 W idle (a slower stream then
    costs more: throughput and energy trade)."""
    text = Path(load_profile("mesh").source).read_text()
    text = re.sub(r"(\[scopes\.dram\]\n)", r"\1read_pj_per_byte = 100.0\n"
                  r"write_pj_per_byte = 120.0\n", text)
    text = re.sub(r"(\[mesh\.scopes\.mem\]\n)", r"\1read_pj_per_byte = 1.0\n"
                  r"write_pj_per_byte = 2.0\n", text)
    text = text.replace("[mesh.link]\n", "[mesh.link]\npj_per_byte = 5.0\n")
    text = text.replace("[mesh.uplink]\n", "[mesh.uplink]\npj_per_byte = 20.0\n")
    if idle:
        text = text.replace("[mesh.units.arm]\n", "[mesh.units.arm]\nidle_w = 0.02\n")
        text = text.replace("[mesh.units.npu]\n", "[mesh.units.npu]\nidle_w = 0.05\n")
    name = "mesh_energy_idle.toml" if idle else "mesh_energy.toml"
    (tmp_path / name).write_text(text)
    return tmp_path / name


@dataclass(frozen=True)
class Trial:
    """One logged plan: its figures as its record holds them."""

    number: int
    move: str
    plan: PipelinePlan
    status: str
    period_s: float | None  # one copy's stream
    analytic_period_s: float
    throughput: float | None  # over every copy


def trial_of(record) -> Trial:
    p = record.pipeline
    return Trial(number=record.trial, move=record.strategy, plan=plan_of(p), status=p["status"],
                 period_s=p["period_s"], analytic_period_s=p["analytic_period_s"],
                 throughput=1 / record.result.period_s if record.result.period_s else None)


def space_of(costs, pes: int | None = None, starts=None, profile=None) -> PlanSpace:
    pes = pes or costs.machine.size
    starts = best_pipelines(costs, pes) if starts is None else list(starts)
    return PlanSpace(costs, profile or load_profile("mesh"), pes, starts)


def search(costs, trials: int, *, seed: int = 0, ranking: str = "xgb", moves=MOVES,
           pes: int | None = None, starts=None, log: str | Path | None = None,
           resume: bool = False, profile=None) -> tuple[Trial | None, list[Trial]]:
    """(best trial or None, every trial of the log in order) of a search of ``trials`` plans in all,
    the start plans (default: the DP's) first."""
    space = space_of(costs, pes, starts, profile)
    space = PlanSpace(space.costs, space.profile, space.pes, space.starts[:trials])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(log or Path(scratch) / "trials.jsonl")
        strategy = PipelineMoves(space, seed=seed, ranking=ranking, moves=moves)
        config = mesh_config(trials=trials - len(space.starts), seed=seed, resume=resume)
        with TuningLog(path) as tuning_log, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "search stopped after")  # a dry neighbourhood
            result = tune_mesh(space, tuning_log, config, strategy=strategy)
        done = [trial_of(r) for r in read(path)]
    best = next((t for t in done if result.best and t.number == result.best.trial), None)
    return best, done


def line_of(costs, plan: PipelinePlan, result=None) -> dict:
    """The log line (as JSON reads it back) of ``plan`` measured as ``result`` (default:
    by its stream)."""
    import json

    from autoplace.pipeline.stream_measurer import StreamMeasurer
    from autoplace.records.tuning_log import Record

    space = space_of(costs, starts=[plan])
    result = result or StreamMeasurer(costs).measure([plan])[0]
    g, p = costs.graph, space.profile
    rec = Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name, profile_hash=p.hash,
                 strategy="test", trial=0, seed=0, run="r", measurer="stream", result=result,
                 **space.record_fields(plan, result))
    return json.loads(json.dumps(rec.to_dict()))
