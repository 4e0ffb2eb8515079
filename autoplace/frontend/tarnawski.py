"""Placement instances of Tarnawski et al., "Efficient Algorithms for Device Placement of DNN
Graph Operators" (NeurIPS 2020; github.com/msr-fiddle/dnn-partitioning, MIT), as a profiled
graph and a profile (docs/profiled_graphs.md).

Their format: ``nodes`` with ``id``, ``cpuLatency``, ``fpgaLatency``, ``supportedOnFpga``,
``size`` (bytes on an accelerator) and an optional ``colorClass`` (nodes of one class share a
device); ``edges`` with ``sourceId``, ``destId`` and ``cost`` (the time to move the source's
output between an accelerator and CPU memory, equal on every edge out of a node);
``maxSizePerFPGA``, ``maxFPGAs``, ``maxCPUs``. Their times are read as milliseconds. More
FPGAs than nodes are taken as one per node (a further one could only stay empty).

Their latency model is the block model of docs/simulator.md: the accelerators (``fpga0`` ..,
class ``fpga``) are ``block`` units, each with its own memory of ``maxSizePerFPGA`` bytes
holding its nodes' sizes as resident weights; the CPUs are one ``parallel`` unit reading and
writing ``dram`` (their greedy and their IP both ignore ``maxCPUs``: "as many as the width of
the graph"); its period counts ``maxCPUs`` cores (their throughput instances have one: its
period is then the sum of its nodes' times, their max-load model's CPU load). Node ``id``
becomes op ``n<id>``; edge sizes are not imported (their model counts
only node sizes against memory), edge costs are the ops' measured transfer times.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

from autoplace.graph import Edge, GraphError, Op, OpGraph, topological_order
from autoplace.hardware.profile import CopyPath, Profile, Scope, Unit

#: the instances shipped with autoplace (their latency inputs), by name
INSTANCE_DIR = Path(__file__).resolve().parent.parent / "data" / "instances" / "tarnawski"
MS_TO_US = 1e3
_BIG_MIB = 1 << 20  # dram: 1 TiB, room for any instance


def bundled_instances() -> dict[str, Path]:
    """The bundled instances by name (``layers-bert24``, ``ops-bert_l-3``, ...)."""
    return {p.stem: p for p in sorted(INSTANCE_DIR.glob("*.json"))}


def instance_path(spec: str | Path) -> Path:
    """A bundled instance's file, or ``spec`` as a path."""
    bundled = bundled_instances()
    if str(spec) in bundled:
        return bundled[str(spec)]
    path = Path(spec)
    if not path.is_file():
        raise GraphError(f"{spec}: no such instance file or bundled instance (bundled: "
                         f"{', '.join(bundled)})")
    return path


def load_instance(spec: str | Path) -> tuple[OpGraph, Profile]:
    """The profiled graph and the profile of an instance (a bundled name or a path)."""
    path = instance_path(spec)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphError(f"{path}: cannot read instance: {exc}") from None
    return convert(data, name=path.stem, source=str(path))


def convert(data: object, *, name: str, source: str) -> tuple[OpGraph, Profile]:
    """The graph and profile of an instance's JSON data (errors name ``source`` and key)."""
    reader = _Reader(source)
    nodes, edges = reader.instance(data)
    order = topological_order({n: n for n in nodes},
                              ((e["sourceId"], e["destId"]) for e in edges))
    if order is None:
        raise GraphError(f"{source}: edges: the graph has a cycle")
    graph = _graph(name, nodes, edges, order)
    return graph, _profile(name, reader.fpgas, reader.cpus, reader.max_size, source)


class _Reader:
    """Typed access to an instance's JSON, with one-line errors naming the key."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, what: str) -> GraphError:
        return GraphError(f"{self.source}: {key}: {what}")

    def number(self, d: dict, key: str, where: str, default: float | None = None) -> float:
        value = d.get(key, default)
        if value is None:
            raise self.error(f"{where}.{key}", "missing required key")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or value < 0:
            raise self.error(f"{where}.{key}", f"must be a finite number >= 0, got {value!r}")
        return float(value)

    def instance(self, data: object) -> tuple[dict[int, dict], list[dict]]:
        if not isinstance(data, dict):
            raise self.error("(top)", f"an instance is a JSON object, got {type(data).__name__}")
        self.max_size = self.number(data, "maxSizePerFPGA", "(top)")
        fpgas = self.number(data, "maxFPGAs", "(top)")
        cpus = self.number(data, "maxCPUs", "(top)")
        if cpus != int(cpus) or cpus < 1:
            raise self.error("maxCPUs", f"must be a positive integer, got {cpus!r}")
        self.cpus = int(cpus)
        if fpgas != int(fpgas):
            raise self.error("maxFPGAs", f"must be an integer, got {fpgas!r}")
        self.fpgas = int(fpgas)
        for key in ("nodes", "edges"):
            if not isinstance(data.get(key), list):
                raise self.error(key, "missing, or not an array")
        nodes: dict[int, dict] = {}
        for n, node in enumerate(data["nodes"]):
            nid = self._node(node, f"nodes[{n}]")
            if nid in nodes:
                raise self.error(f"nodes[{n}].id", f"duplicate node id {nid}")
            nodes[nid] = node
        self.fpgas = min(self.fpgas, max(1, len(nodes)))  # one more could only stay empty
        return nodes, [self._edge(e, f"edges[{k}]", nodes) for k, e in enumerate(data["edges"])]

    def _node(self, node: object, where: str) -> int:
        if not isinstance(node, dict):
            raise self.error(where, "a node is a JSON object")
        nid = node.get("id")
        if isinstance(nid, bool) or not isinstance(nid, int):
            raise self.error(f"{where}.id", f"must be an integer, got {nid!r}")
        for key in ("cpuLatency", "fpgaLatency"):
            self.number(node, key, where)
        self.number(node, "size", where, 0.0)
        if node.get("isBackwardNode"):
            raise self.error(f"{where}.isBackwardNode", "a training instance; only inference "
                             "(latency) instances are imported")
        if not isinstance(node.get("supportedOnFpga"), (bool, int)):
            raise self.error(f"{where}.supportedOnFpga", "must be a boolean or 0/1")
        color = node.get("colorClass")
        if color is not None and (isinstance(color, bool) or not isinstance(color, int)):
            raise self.error(f"{where}.colorClass", f"must be an integer, got {color!r}")
        return nid

    def _edge(self, e: object, where: str, nodes: dict) -> dict:
        if not isinstance(e, dict):
            raise self.error(where, "an edge is a JSON object")
        for key in ("sourceId", "destId"):
            if e.get(key) not in nodes:
                raise self.error(f"{where}.{key}", f"no node with id {e.get(key)!r}")
        if e["sourceId"] == e["destId"]:
            raise self.error(where, f"an edge from node {e['sourceId']} to itself")
        self.number(e, "cost", where)
        return e


def _graph(name: str, nodes: dict[int, dict], edges: list[dict], order: list[int]) -> OpGraph:
    color_size: dict[int, int] = {}
    for node in nodes.values():
        if node.get("colorClass") is not None:
            color_size[node["colorClass"]] = color_size.get(node["colorClass"], 0) + 1
    ops = [_op(nodes[n], color_size) for n in order]
    index = {n: i for i, n in enumerate(order)}
    out, seen = [], set()
    for e in edges:
        pair = (index[e["sourceId"]], index[e["destId"]])
        if pair not in seen:
            seen.add(pair)
            out.append(Edge(src=pair[0], dst=pair[1], nbytes=0,
                            transfer_us=float(e["cost"]) * MS_TO_US))
    out.sort(key=lambda e: (e.dst, e.src))
    return OpGraph(name=name, ops=tuple(ops), edges=tuple(out))


def _op(node: dict, color_size: dict[int, int]) -> Op:
    size = math.ceil(float(node.get("size", 0.0)))
    fpga = float(node["fpgaLatency"]) * MS_TO_US if node["supportedOnFpga"] else None
    color = node.get("colorClass")
    return Op(name=f"n{node['id']}", kind="other", weight_bytes=size, external_bytes=size,
              bytes_read=size, latency_us={"cpu": float(node["cpuLatency"]) * MS_TO_US,
                                           "fpga": fpga},
              group=f"color{color}" if color is not None and color_size[color] > 1 else "")


def _profile(name: str, fpgas: int, cpus: int, max_size: float, source: str) -> Profile:
    llvm = {"kind": "llvm"}
    cpu = Unit(name="cpu", target=llvm, accepts=frozenset({"*"}), gflops={"default": 1.0},
               execution="parallel", cores=cpus)
    accel = [Unit(name=f"fpga{i}", target=llvm, accepts=frozenset({"*"}),
                  gflops={"default": 1.0}, weights=frozenset({"resident"}), class_name="fpga",
                  execution="block") for i in range(fpgas)]
    scopes = [Scope(name="dram", capacity_bytes=_BIG_MIB << 20, bandwidth_bps=1e12,
                    access=frozenset({"cpu"}))]
    scopes += [Scope(name=f"mem{i}", capacity_bytes=int(max_size), bandwidth_bps=1e12,
                     access=frozenset({f"fpga{i}"})) for i in range(fpgas)]
    copies = [CopyPath(src=a, dst=b, bandwidth_bps=1e12, latency_s=0.0, modes=("sync",),
                       engine=f"link{i}")
              for i in range(fpgas) for a, b in (("dram", f"mem{i}"), (f"mem{i}", "dram"))]
    return Profile(name=f"tarnawski-{name}", host="cpu", default_scope="dram",
                   units=(cpu, *accel), scopes=tuple(scopes), copies=tuple(copies),
                   description=f"{fpgas} accelerators (block) + {cpus} CPUs (parallel), from "
                               f"{source}",
                   source=source)


def profile_toml(profile: Profile) -> str:
    """TOML text of an imported profile (:func:`autoplace.hardware.load.load_profile` reads it
    back equal)."""
    lines = [f"# imported by autoplace from {profile.source}", f'name = "{profile.name}"',
             f'description = "{profile.description}"', f'host = "{profile.host}"',
             f'default_scope = "{profile.default_scope}"', ""]
    for u in profile.units:
        lines += [f"[units.{u.name}]", 'target = { kind = "llvm" }', 'accepts = ["*"]',
                  "gflops = { default = 1.0 }", f'execution = "{u.execution}"']
        if u.cores:
            lines.append(f"cores = {u.cores}")
        if u.class_name:
            lines.append(f'class = "{u.class_name}"')
        if u.weights != {"streamed", "resident"}:
            lines.append(f"weights = {json.dumps(sorted(u.weights))}")
        lines.append("")
    for s in profile.scopes:
        lines += [f"[scopes.{s.name}]", f"capacity_mib = {s.capacity_bytes / (1 << 20)!r}",
                  f"bandwidth_gbps = {s.bandwidth_bps / 1e9!r}",
                  f"access = {json.dumps(sorted(s.access))}", ""]
    for c in profile.copies:
        lines += ["[[copies]]", f'src = "{c.src}"', f'dst = "{c.dst}"',
                  f"bandwidth_gbps = {c.bandwidth_bps / 1e9!r}", 'modes = ["sync"]',
                  f'dma = "{c.engine}"', ""]
    return "\n".join(lines)


def split_placement(graph: OpGraph, split: dict) -> dict:
    """A placement spec (:meth:`autoplace.space.SearchSpace.from_user`) of a split in their
    output format: ``{"cpus": [{"nodes": [ids]}], "fpgas": [{"nodes": [ids]}, ...]}``."""
    ops: dict[str, object] = {op.name: "cpu" for op in graph.ops}
    sized = {op.name for op in graph.ops if op.weight_bytes}
    for i, fpga in enumerate(split.get("fpgas", [])):
        for nid in fpga["nodes"]:
            name = f"n{nid}"
            ops[name] = {"unit": f"fpga{i}", "scope": f"mem{i}",
                         **({"weights": "resident"} if name in sized else {})}
    return {"ops": ops}


def placement_split(placement) -> dict:
    """The split, in their format, of a placement of an imported instance (the inverse of
    :func:`split_placement`): accelerators in name order, the rest on the CPUs."""
    fpgas: dict[str, list[int]] = {}
    cpus: list[int] = []
    for op, (unit, _) in placement.ops.items():
        (cpus if unit == "cpu" else fpgas.setdefault(unit, [])).append(int(op[1:]))
    return {"cpus": [{"nodes": cpus}], "fpgas": [{"nodes": fpgas[u]} for u in sorted(fpgas)]}
