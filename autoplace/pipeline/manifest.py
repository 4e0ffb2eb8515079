"""The plan a custom runtime loads: one versioned JSON manifest (docs/pipeline.md, "Manifest").

It says, in order of stages: which ops each stage runs, on which PE unit and where their
weights are (``local``: held in the PEs' local scope; ``shared``: streamed from the shared
memory each inference), how many PEs and where they are on the grid (per replica), the
buffers each PE holds in its local scope (a cut through the shared memory held once), and
the copies (between stages over a link, or over the uplinks through the shared memory;
within a stage the rotations of a split op's input, graph inputs and outputs and streamed
weights over the uplink) with their modes. :func:`read_manifest` reads it
back into the plan it came from, checking it against the graph and the mesh.
"""

from __future__ import annotations

import json
from pathlib import Path

from autoplace.deploy.artefact import PIPELINE_FORMAT, PIPELINE_VERSION
from autoplace.pipeline.costs import CHANNELWISE, StageCosts
from autoplace.pipeline.layout import layout
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate

FORMAT, VERSION = PIPELINE_FORMAT, PIPELINE_VERSION


class ManifestError(ValueError):
    """A manifest file is malformed, of another version, or not of this graph and mesh."""


def manifest(plan: PipelinePlan, costs: StageCosts, *, profile_hash: str = "",
             model: str | None = None, input_shapes: dict | None = None,
             libraries: list[dict] | None = None) -> dict:
    """The manifest of ``plan`` (JSON-ready; :func:`write_manifest` writes it). ``model``:
    how the model was named and ``input_shapes`` its inputs' given shapes (to rebuild it);
    ``libraries``: per stage, its compiled library
    (``autoplace.deploy.stages.export_stages``)."""
    m, g = costs.machine, costs.graph
    figures = evaluate(plan, costs)
    grid = layout(plan, m.rows, m.cols)
    stages = [_stage(costs, s, n, plan.spilled_at(n)) for n, s in enumerate(plan.stages)]
    for stage, library in zip(stages, libraries or ()):
        stage["library"] = library
    return {
        "format": FORMAT, "version": VERSION,
        "graph": {"name": g.name, "fingerprint": g.fingerprint, "ops": len(g.ops),
                  **({"model": model} if model else {}),
                  **({"input_shapes": _shapes(input_shapes)} if input_shapes else {})},
        "mesh": {"profile": m.name, "profile_hash": profile_hash, "rows": m.rows,
                 "cols": m.cols, "memory_bytes": m.memory_bytes},
        "figures": {"period_s": figures.period_s, "latency_s": figures.latency_s,
                    "throughput": figures.throughput, "pes_used": figures.pes_used},
        "stages": stages,
        "replicas": [[[list(pe) for pe in stage] for stage in rep] for rep in grid],
    }


def _shapes(given: dict) -> dict[str, list[int]]:
    return {name: [int(d) for d in dims] for name, dims in given.items()}


def _stage(costs: StageCosts, stage: Stage, index: int, spilled: tuple[bool, bool]) -> dict:
    g, m = costs.graph, costs.machine
    ops = range(stage.start, stage.end)
    row = dict(zip(ops, (w - 1 for w in stage.ways())))  # op -> its row in the tables
    unit = dict(zip(ops, costs.op_units(stage).tolist()))
    f = costs.of(stage, spilled)
    scope = ["shared" if s else "local" for s in spilled]  # of its input, of its output
    rotating = [g.ops[i].name for i in ops if costs.rotation[row[i], i] > 0]
    busiest = max(ops, key=lambda i: costs.unit_secs[unit[i], row[i], i])  # the longest op
    streamed = set(stage.streamed or ())
    return {
        "index": index, "pes": stage.pes, "split": max(stage.ways()),
        "rpc_key": m.units[unit[busiest]].rpc_key,
        "ops": [{"name": g.ops[i].name, "kind": g.ops[i].kind, "split": row[i] + 1,
                 "unit": m.units[unit[i]].name,
                 "weights": "shared" if i in streamed else "local"} for i in ops],
        "period_s": f["period"], "compute_s": f["compute"], "comm_s": f["comm"],
        "buffers": {"scope": "local", "bytes_per_pe": f["memory"],
                    "input_bytes": float(costs.cut[stage.start]),
                    "output_bytes": float(costs.cut[stage.end]), "double_buffered": True,
                    "input_scope": scope[0], "output_scope": scope[1]},
        "copies": [
            *([{"kind": "from_previous_stage", "bytes": float(costs.cut[stage.start]),
                "path": "uplink" if spilled[0] else "link", "mode": "async"}]
              if costs.cut[stage.start] else []),
            *([{"kind": "to_shared", "bytes": float(costs.cut[stage.end]), "path": "uplink",
                "mode": "async"}] if spilled[1] and costs.cut[stage.end] else []),
            *({"kind": "rotate_input", "op": name, "path": "link", "mode": "async"}
              for name in rotating),
            *({"kind": "stream_weights", "op": g.ops[i].name,
               "bytes": float(costs.weights[i] / (row[i] + 1)), "path": "uplink",
               "mode": "async"} for i in sorted(streamed)),
            *([{"kind": "graph_io", "bytes": float(costs.S_io[stage.end]
                                                   - costs.S_io[stage.start]),
                "path": "uplink", "mode": "async"}]
              if costs.S_io[stage.end] > costs.S_io[stage.start] else []),
        ],
        "channelwise_ops": [g.ops[i].name for i in ops if g.ops[i].kind in CHANNELWISE],
    }


def write_manifest(path: str | Path, plan: PipelinePlan, costs: StageCosts,
                   **kwargs) -> None:
    """Write the manifest (:func:`manifest` takes the keywords) as indented, strict JSON."""
    text = json.dumps(manifest(plan, costs, **kwargs), indent=1, allow_nan=False)
    Path(path).write_text(text + "\n")


def read_manifest(path: str | Path, costs: StageCosts) -> PipelinePlan:
    """The plan of a manifest written for this graph and mesh; ManifestError naming the
    file and what is wrong otherwise."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read manifest: {exc}") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ManifestError(f"{path}: not an {FORMAT} manifest")
    if d.get("version") != VERSION:
        raise ManifestError(f"{path}: manifest version {d.get('version')!r}, this autoplace "
                            f"reads {VERSION}")
    g, m = costs.graph, costs.machine
    if _section(d, "graph").get("fingerprint") != g.fingerprint:
        raise ManifestError(f"{path}: written for another graph than {g.name} "
                            f"({g.fingerprint})")
    if [_section(d, "mesh").get(k) for k in ("rows", "cols")] != [m.rows, m.cols]:
        raise ManifestError(f"{path}: written for another mesh than {m.rows}x{m.cols}")
    try:
        stages = tuple(_read_stage(s, costs) for s in d["stages"])
        spilled = tuple(st.start for st, s in zip(stages, d["stages"])
                        if _input_scope(s) == "shared")
        plan = PipelinePlan(stages=stages, replicas=len(d["replicas"]),
                            spilled=spilled or None)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ManifestError(f"{path}: malformed stages: {exc}") from None
    if layout(plan, m.rows, m.cols) != [[[tuple(pe) for pe in st] for st in rep]
                                        for rep in d["replicas"]]:
        raise ManifestError(f"{path}: PE coordinates are not the plan's snake layout")
    return plan


def _input_scope(s: dict) -> str:
    """Where a stage's input buffers are: ``local`` (default) or ``shared``."""
    scope = s["buffers"].get("input_scope", "local") if "buffers" in s else "local"
    if scope not in ("local", "shared"):
        raise ValueError(f"stage {s['index']}: input_scope {scope!r} is not 'local' or "
                         "'shared'")
    return scope


def _section(d: dict, name: str) -> dict:
    """``d[name]`` if it is an object, else an empty one (the checks then fail by name)."""
    value = d.get(name)
    return value if isinstance(value, dict) else {}


def _read_stage(s: dict, costs: StageCosts) -> Stage:
    names = [op["name"] for op in s["ops"]]
    start = costs.graph.index(names[0])
    if names != [op.name for op in costs.graph.ops[start:start + len(names)]]:
        raise ValueError(f"stage {s['index']}: ops are not consecutive in the graph")
    pes = int(s["pes"])
    ways = tuple(int(op.get("split", pes)) for op in s["ops"])
    stage = Stage(start, start + len(names), pes, None if set(ways) == {pes} else ways)
    units = [costs.unit_index(str(op["unit"])) for op in s["ops"]]
    stage = costs.with_units(stage, units)
    costs.op_units(stage)  # each unit runs its op
    where = [op.get("weights", "local") for op in s["ops"]]
    bad = [w for w in where if w not in ("local", "shared")]
    if bad:
        raise ValueError(f"stage {s['index']}: an op's weights are {bad[0]!r}, not 'local' "
                         "or 'shared'")
    stage = costs.with_streamed(stage, [o for o, w in enumerate(where, start) if w == "shared"])
    costs.streamed_mask(stage)  # each op streamed has weights
    return stage
