"""The op graph: one node per kernel, the dataflow edges between them.

This module is pure data (no TVM): the frontends in :mod:`autoplace.frontend` build an
:class:`OpGraph` from a Relax IRModule, an ONNX file or a TE compute graph, and everything
downstream (space, simulator, search) reads only this.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import json
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autoplace.patterns import PATTERNS, known

#: Op kinds used for capability matching (a profile unit's ``accepts`` list).
OP_KINDS = (
    "conv2d",
    "matmul",
    "pool",
    "elementwise",
    "reduce",
    "softmax",
    "norm",
    "injective",
    "other",
)


class GraphError(ValueError):
    """A graph file or graph value is malformed."""


def first_line(exc: BaseException) -> str:
    """``exc`` in one line (its type and its message's first line), for a GraphError that
    names what a third-party importer raised."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _check_count(what: str, field: str, value: object) -> int:
    """``value`` as a plain int >= 0: an integer (numpy ones too), not a bool nor a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise GraphError(f"{what}: {field} must be an integer, got {value!r}")
    if value < 0:
        raise GraphError(f"{what}: {field} >= 0 must hold, got {value}")
    return int(value)


def _check_real(what: str, field: str, value: object) -> float:
    """``value`` as a finite float >= 0 (a real number, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GraphError(f"{what}: {field} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise GraphError(f"{what}: {field} must be finite, got {value}")
    if value < 0:
        raise GraphError(f"{what}: {field} >= 0 must hold, got {value}")
    return float(value)


def _check_latencies(what: str, value: object) -> dict[str, float | None]:
    """A measured-latency table: unit or unit-class name -> microseconds >= 0, or None (the
    op cannot run there)."""
    if not isinstance(value, Mapping):
        raise GraphError(f"{what}: latency_us must map unit names to times, got "
                         f"{value!r}")
    out: dict[str, float | None] = {}
    for key, us in value.items():
        if not isinstance(key, str) or not key:
            raise GraphError(f"{what}: latency_us keys must be unit names, got {key!r}")
        out[key] = None if us is None else _check_real(what, f"latency_us[{key!r}]", us)
    return out


@dataclass(frozen=True, kw_only=True)
class Op:
    """One kernel of the graph (one ``call_tir`` after fusion).

    ``bytes_read`` counts every input tensor (produced by other ops, graph inputs and
    weights); ``external_bytes`` is the part of it that comes from graph inputs and
    weights, i.e. not from another op; ``weight_bytes`` is the part of ``external_bytes``
    that is constants (model weights/parameters), so :attr:`input_bytes` is the rest, read
    from graph inputs. ``output_bytes`` is what the kernel writes.

    Byte counts must be integers >= 0 (numpy integers are turned into ``int``); ``flops``
    a finite number >= 0; bools are refused everywhere. Graph files written before
    ``weight_bytes`` existed load with ``weight_bytes == 0``.

    A *profiled* op carries what a profiler measured (docs/profiled_graphs.md):
    ``latency_us`` maps a unit name or a unit class (a profile unit's ``class``) to the
    op's measured time there in microseconds (kept as given, so files round-trip exactly),
    or to None where the op cannot run; ``group`` names a co-location group (ops of one
    group always share a unit).
    """

    name: str
    kind: str
    flops: float = 0.0
    bytes_read: int = 0
    output_bytes: int = 0
    external_bytes: int = 0
    weight_bytes: int = 0
    func: str = ""
    latency_us: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    group: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise GraphError("op name must be non-empty")
        what = f"op {self.name!r}"
        if self.kind not in OP_KINDS:
            raise GraphError(f"{what}: kind must be one of {OP_KINDS}, got {self.kind!r}")
        _check_real(what, "flops", self.flops)  # kept as given: the fingerprint hashes it
        object.__setattr__(self, "latency_us", _check_latencies(what, self.latency_us))
        if not isinstance(self.group, str):
            raise GraphError(f"{what}: group must be a string, got {self.group!r}")
        for field in ("bytes_read", "output_bytes", "external_bytes", "weight_bytes"):
            object.__setattr__(self, field, _check_count(what, field, getattr(self, field)))
        if self.weight_bytes > self.external_bytes:
            raise GraphError(f"{what}: weight_bytes <= external_bytes must hold, got "
                             f"{self.weight_bytes} > {self.external_bytes}")

    @property
    def input_bytes(self) -> int:
        """Bytes read from graph inputs: ``external_bytes - weight_bytes``."""
        return self.external_bytes - self.weight_bytes

    @property
    def kernel_key(self) -> str:
        """``kind:flops:bytes`` (bytes read + written): ops with the same key are taken to
        run the same kernel (a profile's per-kernel latency table is keyed by it)."""
        return kernel_key(self.kind, self.flops, self.bytes_read + self.output_bytes)


def kernel_key(kind: str, flops: float, nbytes: int) -> str:
    """The key of a kernel in a unit's ``kernel_us`` table (see :attr:`Op.kernel_key`)."""
    return f"{kind}:{flops:.9g}:{int(nbytes)}"


@dataclass(frozen=True, kw_only=True)
class Edge:
    """Data flowing from op ``src`` to op ``dst`` (indices into ``OpGraph.ops``).

    ``transfer_us``, where a profiler measured it, is the time in microseconds to move this
    edge's data between scopes; it replaces the copy's modelled time
    (docs/profiled_graphs.md)."""

    src: int
    dst: int
    nbytes: int
    transfer_us: float | None = None

    def __post_init__(self) -> None:
        what = f"edge {self.src!r}->{self.dst!r}"
        for field in ("src", "dst", "nbytes"):
            object.__setattr__(self, field, _check_count(what, field, getattr(self, field)))
        if self.transfer_us is not None:
            object.__setattr__(self, "transfer_us", _check_real(what, "transfer_us",
                                                                self.transfer_us))
        if self.src >= self.dst:
            raise GraphError(f"edge {self.src}->{self.dst}: src < dst must hold "
                             "(ops are in topological order)")


@dataclass(frozen=True, kw_only=True)
class Match:
    """Ops ``ops`` (indices, ascending) that together are composite ``pattern`` (a name of
    :data:`autoplace.patterns.PATTERNS`, or a unit's own entry point): one op when TVM's
    fusion made the composite one kernel, several when it split it (attention across its
    softmax)."""

    pattern: str
    ops: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not known(self.pattern):
            raise GraphError(f"match {self.pattern!r}: unknown pattern (known: "
                             f"{', '.join(PATTERNS)}, or an entry point module:function)")
        if not isinstance(self.ops, (tuple, list)) or not self.ops:
            raise GraphError(f"match {self.pattern!r}: ops must be a non-empty list of op "
                             f"indices, got {self.ops!r}")
        ops = tuple(_check_count(f"match {self.pattern!r}", "ops", i) for i in self.ops)
        if list(ops) != sorted(set(ops)):
            raise GraphError(f"match {self.pattern!r}: ops must be ascending and distinct, "
                             f"got {list(ops)}")
        object.__setattr__(self, "ops", ops)


def topological_order(priority: Mapping, edges: Iterable[tuple]) -> list | None:
    """The keys of ``priority`` in a topological order of ``edges`` (``(a, b)``: ``a``
    first; repeats and self-loops ignored), the ready key of lowest priority first (so the
    order is deterministic); None if the edges have a cycle."""
    rank = {node: (p, i) for i, (node, p) in enumerate(priority.items())}
    succ: dict = {node: set() for node in rank}
    for a, b in edges:
        if a != b:
            succ[a].add(b)
    indeg = dict.fromkeys(rank, 0)
    for nexts in succ.values():
        for b in nexts:
            indeg[b] += 1
    ready = [(rank[n], n) for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if not indeg[m]:
                heapq.heappush(ready, (rank[m], m))
    return order if len(order) == len(rank) else None


def _op_dict(op: Op) -> dict:
    """An op as JSON data, profiled fields only where set (so a graph without them keeps
    its fingerprint)."""
    d = dataclasses.asdict(op)
    for field in ("latency_us", "group"):
        if not d[field]:
            del d[field]
    return d


def _check_layout(d: object, source: str) -> None:
    """The shape of :meth:`OpGraph.to_dict` data: a name, a non-empty list of op objects,
    a list of ``[src, dst, bytes]`` edges (their values are checked by Op and Edge)."""
    def bad(what: str) -> GraphError:
        return GraphError(f"{source}: not an op graph: {what}")

    if not isinstance(d, dict):
        raise bad(f"expected a JSON object, got {type(d).__name__}")
    for key in ("name", "ops", "edges"):
        if key not in d:
            raise bad(f"no {key!r}")
    if not isinstance(d["name"], str):
        raise bad(f"'name' must be a string, got {d['name']!r}")
    if not isinstance(d["ops"], list) or not d["ops"]:
        raise bad(f"'ops' must be a non-empty list of ops, got {str(d['ops'])[:40]}")
    if not all(isinstance(o, dict) for o in d["ops"]):
        raise bad("each of 'ops' must be an object")
    if not isinstance(d["edges"], list) or not all(
            isinstance(e, list) and len(e) in (3, 4) for e in d["edges"]):
        raise bad("'edges' must be a list of [src, dst, bytes] or [src, dst, bytes, "
                  "transfer_us]")


def _match(item: object) -> Match:
    """A match from its JSON form ``[pattern, [op, ...]]``."""
    if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], list):
        raise GraphError(f"a match must be [pattern, [op, ...]], got {item!r}")
    return Match(pattern=item[0], ops=tuple(item[1]))


@dataclass(frozen=True, kw_only=True)
class OpGraph:
    """Ops in topological order and the edges between them (at most one per pair), and
    where composite patterns match them (``matches``: the frontend finds them; they are
    no part of :attr:`fingerprint`, which a model's graph keeps whatever the table)."""

    name: str
    ops: tuple[Op, ...]
    edges: tuple[Edge, ...]
    matches: tuple[Match, ...] = ()

    def __post_init__(self) -> None:
        names = [op.name for op in self.ops]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise GraphError(f"graph {self.name!r}: duplicate op name {dup!r}")
        seen = set()
        for e in self.edges:
            if not 0 <= e.src < len(self.ops) or not 0 <= e.dst < len(self.ops):
                raise GraphError(f"graph {self.name!r}: edge {e.src}->{e.dst} out of range")
            if (e.src, e.dst) in seen:
                raise GraphError(f"graph {self.name!r}: duplicate edge {e.src}->{e.dst}")
            seen.add((e.src, e.dst))
        for m in self.matches:
            if m.ops[-1] >= len(self.ops):
                raise GraphError(f"graph {self.name!r}: match {m.pattern!r}: op {m.ops[-1]} "
                                 "out of range")

    # -- derived views -----------------------------------------------------------------
    def index(self, name: str) -> int:
        """Index of the op called ``name``."""
        for i, op in enumerate(self.ops):
            if op.name == name:
                return i
        raise KeyError(f"graph {self.name!r} has no op {name!r}")

    def in_edges(self) -> list[list[int]]:
        """For each op, the indices (into ``edges``) of its incoming edges."""
        res: list[list[int]] = [[] for _ in self.ops]
        for k, e in enumerate(self.edges):
            res[e.dst].append(k)
        return res

    def out_edges(self) -> list[list[int]]:
        """For each op, the indices (into ``edges``) of its outgoing edges."""
        res: list[list[int]] = [[] for _ in self.ops]
        for k, e in enumerate(self.edges):
            res[e.src].append(k)
        return res

    def edge_name(self, k: int) -> str:
        """Stable name of edge ``k``: ``"src->dst"`` with op names."""
        e = self.edges[k]
        return f"{self.ops[e.src].name}->{self.ops[e.dst].name}"

    @functools.cached_property
    def total_flops(self) -> float:
        """Sum of the ops' flops."""
        return float(sum(op.flops for op in self.ops))

    # -- serialisation -----------------------------------------------------------------
    @functools.cached_property
    def profiled(self) -> bool:
        """Whether some op or edge carries a measured time (a profiled graph)."""
        return any(op.latency_us for op in self.ops) or any(
            e.transfer_us is not None for e in self.edges)

    def to_dict(self) -> dict:
        """The graph as JSON-ready data (read back by :meth:`from_dict`); an edge with a
        measured transfer cost has it as a fourth item."""
        d = {
            "name": self.name,
            "ops": [_op_dict(op) for op in self.ops],
            "edges": [[e.src, e.dst, e.nbytes] + ([] if e.transfer_us is None
                                                  else [e.transfer_us])
                      for e in self.edges],
        }
        if self.matches:
            d["matches"] = [[m.pattern, list(m.ops)] for m in self.matches]
        return d

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "<dict>") -> OpGraph:
        """The graph of :meth:`to_dict` data; a missing op ``weight_bytes`` means 0."""
        _check_layout(d, source)
        try:
            ops = tuple(Op(**o) for o in d["ops"])
            edges = tuple(Edge(src=e[0], dst=e[1], nbytes=e[2],
                               transfer_us=e[3] if len(e) > 3 else None) for e in d["edges"])
            return cls(name=d["name"], ops=ops, edges=edges,
                       matches=tuple(_match(m) for m in d.get("matches", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise GraphError(f"{source}: not an op graph: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> OpGraph:
        """Read a graph written by :meth:`save`."""
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise GraphError(f"{path}: cannot read op graph: {exc}") from None
        return cls.from_dict(d, source=str(path))

    def save(self, path: str | Path) -> None:
        """Write the graph as indented JSON (read back by :meth:`load`)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @functools.cached_property
    def fingerprint(self) -> str:
        """Stable hash of the structure (names, kinds, costs, edges); the name is excluded."""
        body = self.to_dict()
        body.pop("name")
        body.pop("matches", None)
        blob = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
