"""The block model: a profile whose accelerators run their ops as blocks (docs/simulator.md).

It is the latency model of Tarnawski et al. (NeurIPS 2020), for any number of units: a
``block`` unit runs the ops placed on it as one block, which starts once every input from
outside the block is present, reads each such input once, runs its ops one after another,
writes each output read outside once, and makes all its outputs present at its end; every
other unit runs ``parallel`` (its ops start as soon as their inputs are present, as on a
pool of cores as wide as the graph). An edge whose ends' scopes differ costs its measured
transfer time (or its route's unloaded time) at each block boundary it crosses, and once,
as a delay, between two parallel ops. Nothing waits for a resource, so the makespan is a
longest path over the graph with each block contracted to one node. A placement is invalid
(as in their evaluator) when a block unit's ops are not one contiguous block (a path leaves
them and comes back) or when blocks wait for each other (the contraction has a cycle).

:func:`run_blocks` is the compiled kernel over a batch (:func:`autoplace.measure.batch.
simulate_batch` calls it for such profiles); :class:`BlockReference` is the op-by-op
reference written from docs/simulator.md, with timelines. A test checks they agree.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from autoplace.measure.base import Event
from autoplace.space import SearchSpace
from autoplace.space.problem import ErrorKind, Problem


def run_blocks(space: SearchSpace, choice: np.ndarray, cross: np.ndarray, used: np.ndarray,
               rid: np.ndarray, n: int, want_finish: bool) -> tuple:
    """``(latency, busy, copy_bytes, peak, no_route, finish, weights, not_contiguous)`` of
    each row, as :func:`~autoplace.measure.batch.simulate_batch` returns them, for the first
    ``n`` ops (an invalid row's latency and finish times are inf)."""
    block = np.array([u.execution == "block" for u in space.profile.units])
    slot = np.where(block, np.cumsum(block) - 1, -1).astype(np.int64)
    r = space.routes
    return _run(space.c_unit, space.c_scope, space.c_dur, choice, cross, used, rid, space.src,
                space.dst, space.nbytes, space.in_ptr, space.in_idx, _out_csr(space),
                space.transfer_s, r.lat, r.inv, slot, int(block.sum()), space.out_bytes,
                space.has_consumers, space.c_wscope, space.weight_bytes, space.default_scope,
                len(space.units), len(space.scopes), n, want_finish)


def _out_csr(space: SearchSpace) -> tuple[np.ndarray, np.ndarray]:
    """Out-edges of each op in edge order, as CSR."""
    order = np.argsort(space.src, kind="stable")
    return (np.searchsorted(space.src[order], np.arange(space.n_ops + 1)),
            order.astype(np.int64))


@numba.njit(cache=True, nogil=True)
def _run(c_unit, c_scope, c_dur, choice, cross, used, rid, src, dst, nbytes, in_ptr, in_idx,
         out_csr, transfer, r_lat, r_inv, slot, n_blocks, out_bytes, has_consumers, c_wscope,
         weight_bytes, default, n_units, n_scopes, n, want_finish):  # pragma: no cover
    B = choice.shape[0]
    out_ptr, out_idx = out_csr
    latency, no_route = np.zeros(B), np.zeros(B, dtype=np.bool_)
    busy, copy_bytes = np.zeros((B, n_units)), np.zeros((B, 2))
    peak, weights = np.zeros((B, n_scopes)), np.zeros((B, n_scopes))
    ends = np.zeros((B if want_finish else 1, n))
    unit, scope, dur = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n)
    depth = np.zeros((max(n_blocks, 1), n), np.int64)
    key, not_contiguous = np.zeros(n, np.int64), np.zeros(B, dtype=np.bool_)
    node, head, nxt = np.zeros(n, np.int64), np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    indeg, end, order = np.zeros(n, np.int64), np.zeros(n), np.zeros(n, np.int64)
    stamp, worst, members = np.full(n, -1, np.int64), np.zeros(n), np.zeros(n, np.int64)
    secs = np.zeros(len(src))
    for b in range(B):
        _tally(b, choice, c_unit, c_scope, c_dur, c_wscope, weight_bytes, out_bytes,
               has_consumers, default, cross, used, rid, src, dst, nbytes, transfer, r_lat,
               r_inv, n, unit, scope, dur, secs, busy, peak, weights, copy_bytes, no_route)
        pieces = _depths(unit, slot, n_blocks, in_ptr, in_idx, src, n, depth)
        n_nodes = _label(unit, slot, depth, n, key, node)
        done = _order(node, n_nodes, src, dst, n, head, nxt, indeg, out_ptr, out_idx, order)
        if pieces > 1 or done < n_nodes:  # not one block per unit, or blocks in a cycle
            not_contiguous[b], latency[b] = True, np.inf
            if want_finish:
                ends[b] = np.inf
            continue
        stamp[:] = -1
        for q in range(n_nodes):
            x, m = order[q], 0
            i = head[x]
            while i >= 0:
                members[m] = i
                m += 1
                i = nxt[i]
            end[x] = _node_end(x, members[:m], slot, unit, dur, node, end, secs, src, dst,
                               in_ptr, in_idx, out_ptr, out_idx, n, stamp, worst, busy[b])
        makespan = 0.0
        for i in range(n):
            makespan = max(makespan, end[node[i]])
            if want_finish:
                ends[b, i] = end[node[i]]
        latency[b] = makespan
    return latency, busy, copy_bytes, peak, no_route, ends, weights, not_contiguous


@numba.njit(cache=True, nogil=True)
def _tally(b, choice, c_unit, c_scope, c_dur, c_wscope, weight_bytes, out_bytes,
           has_consumers, default, cross, used, rid, src, dst, nbytes, transfer, r_lat, r_inv,
           n, unit, scope, dur, secs, busy, peak, weights, copy_bytes,
           no_route):  # pragma: no cover - compiled
    """Row ``b``'s ops (unit, scope, time), each edge's transfer time (``secs``; 0 where
    its ends share a scope), and what does not depend on the schedule: busy op time,
    weights, copy bytes, activations and transfer buffers (held all run), missing routes."""
    for i in range(n):
        j = choice[b, i]
        unit[i], scope[i], dur[i] = c_unit[i, j], c_scope[i, j], c_dur[i, j]
        weights[b, c_wscope[i, j]] += weight_bytes[i]
        busy[b, unit[i]] += dur[i]
        if scope[i] != default or has_consumers[i]:
            peak[b, scope[i]] += out_bytes[i]
    for k in range(len(src)):
        secs[k] = 0.0
        if dst[k] < n and cross[b, k]:
            r = rid[b, k]
            if np.isnan(transfer[k]):
                no_route[b] |= r == 0
                secs[k] = r_lat[r] + nbytes[k] * r_inv[r]
            else:
                secs[k] = transfer[k]
            copy_bytes[b, used[b, k]] += nbytes[k]
            peak[b, scope[dst[k]]] += nbytes[k]


@numba.njit(cache=True, nogil=True)
def _depths(unit, slot, n_blocks, in_ptr, in_idx, src, n, depth):  # pragma: no cover
    """``depth[k, v]``: for block unit ``k``, 1 + the most times a path into ``v`` left
    that unit's ops and came back (0 for ops before any of them). Returns the largest
    depth of a block unit's op (more than 1: its ops are not one contiguous block)."""
    most = 0
    for k in range(n_blocks):
        for i in range(n):
            mine = slot[unit[i]] == k
            d = 1 if mine else 0
            for q in range(in_ptr[i], in_ptr[i + 1]):
                p = src[in_idx[q]]
                d = max(d, depth[k, p] + (1 if mine and slot[unit[p]] != k else 0))
            depth[k, i] = d
            if mine:
                most = max(most, d)
    return most


@numba.njit(cache=True, nogil=True)
def _label(unit, slot, depth, n, key, node):  # pragma: no cover - compiled
    """Node ids ``0 ..`` of each op: its own for a parallel unit's op; one per depth of a
    block unit's ops (a single one, the unit's block, unless its ops are not contiguous).
    Returns the number of nodes."""
    width = n + 2
    for i in range(n):
        k = slot[unit[i]]
        key[i] = -1 - i if k < 0 else k * width + depth[k, i]
    idx = np.argsort(key, kind="mergesort")
    count = 0
    for r in range(n):
        if r > 0 and key[idx[r]] != key[idx[r - 1]]:
            count += 1
        node[idx[r]] = count
    return count + 1 if n else 0


@numba.njit(cache=True, nogil=True)
def _order(node, n_nodes, src, dst, n, head, nxt, indeg, out_ptr, out_idx,
           order):  # pragma: no cover - compiled
    """``order[:done]``: the nodes in a topological order of the graph with each node's ops
    contracted (Kahn's algorithm); ``head``/``nxt``: each node's ops in program order.
    Returns how many nodes it ordered (fewer than ``n_nodes``: a cycle)."""
    head[:n_nodes] = -1
    indeg[:n_nodes] = 0
    for i in range(n - 1, -1, -1):
        nxt[i], head[node[i]] = head[node[i]], i
    for k in range(len(src)):
        if dst[k] < n and node[src[k]] != node[dst[k]]:
            indeg[node[dst[k]]] += 1
    tail = 0
    for x in range(n_nodes):
        if indeg[x] == 0:
            order[tail] = x
            tail += 1
    q = 0
    while q < tail:
        x = order[q]
        q += 1
        i = head[x]
        while i >= 0:
            for e in range(out_ptr[i], out_ptr[i + 1]):
                k = out_idx[e]
                if dst[k] < n and node[dst[k]] != x:
                    c = node[dst[k]]
                    indeg[c] -= 1
                    if indeg[c] == 0:
                        order[tail] = c
                        tail += 1
            i = nxt[i]
    return tail


@numba.njit(cache=True, nogil=True)
def _node_end(x, members, slot, unit, dur, node, end, secs, src, dst, in_ptr, in_idx, out_ptr,
              out_idx, n, stamp, worst, busy):  # pragma: no cover - compiled
    """End of node ``x`` (an op on a parallel unit, or a block), its inputs' nodes done."""
    if slot[unit[members[0]]] < 0:  # a parallel op: inputs arrive at their node's end,
        i = members[0]  # plus their transfer from another parallel op
        start = 0.0
        for q in range(in_ptr[i], in_ptr[i + 1]):
            k = in_idx[q]
            p = src[k]
            start = max(start, end[node[p]] + (secs[k] if slot[unit[p]] < 0 else 0.0))
        return start + dur[i]
    start, inputs, work, outputs = 0.0, 0.0, 0.0, 0.0
    for y in range(len(members)):  # inputs from outside: once per producer, the dearest edge
        i = members[y]
        work += dur[i]
        for q in range(in_ptr[i], in_ptr[i + 1]):
            k = in_idx[q]
            p = src[k]
            if node[p] == x:
                continue
            start = max(start, end[node[p]])
            if stamp[p] != x:
                stamp[p], worst[p] = x, 0.0
            inputs += max(secs[k] - worst[p], 0.0)
            worst[p] = max(worst[p], secs[k])
    for y in range(len(members)):  # outputs read outside: once per producer
        i = members[y]
        most = 0.0
        for q in range(out_ptr[i], out_ptr[i + 1]):
            k = out_idx[q]
            if dst[k] < n and node[dst[k]] != x:
                most = max(most, secs[k])
        outputs += most
    busy[unit[members[0]]] += inputs + outputs
    return start + inputs + work + outputs



class BlockReference:
    """The block model op by op, from the rules of docs/simulator.md (no arrays): fills a
    simulator run's busy times, copy bytes, buffers (each held for the whole run) and
    timeline, and returns the makespan."""

    def __init__(self, space: SearchSpace):
        self.space, self.g = space, space.graph
        self.block = {u.name for u in space.profile.units if u.execution == "block"}

    def check(self, placement) -> Problem | None:
        """What makes ``placement`` impossible in the block model (``INVALID``), or None: a
        block unit whose ops are not one contiguous block, or blocks that wait for each
        other."""
        g = self.g
        unit = [placement.ops[op.name][0] for op in g.ops]
        node = self._nodes(unit)
        for i, x in enumerate(node):
            if x[0] != "op" and x[1] > 1:
                first = next(j for j in range(i) if node[j] == (x[0], 1))
                return Problem(kind=ErrorKind.INVALID, detail=(
                    f"block unit {x[0]!r}: its ops are not one contiguous block "
                    f"({g.ops[first].name!r} reaches {g.ops[i].name!r} through other units)"))
        if self._order(node) is None:
            return Problem(kind=ErrorKind.INVALID, detail="blocks of different units wait "
                           "for each other (each feeds the other)")
        return None

    def schedule(self, run) -> float:
        """Fill ``run`` (a placement :meth:`check` accepts) and return the makespan."""
        p, g = run.p, self.g
        unit = [p.ops[op.name][0] for op in g.ops]
        scope = [p.ops[op.name][1] for op in g.ops]
        cost = {k: self._cost(run, k, scope) for k in range(len(g.edges))
                if scope[g.edges[k].src] != scope[g.edges[k].dst]}
        node = self._nodes(unit)
        order = self._order(node)
        members: dict = {}
        for i, x in enumerate(node):
            members.setdefault(x, []).append(i)
        end: dict = {}
        for x in order:
            ops = members[x]
            preds = [e for i in ops for e in self.space.in_edges[i] if node[g.edges[e].src] != x]
            end[x] = self._end(run, x, ops, preds, node, end, cost, unit)
        for i, op in enumerate(g.ops):  # every output held for the whole run
            if scope[i] != self.space.profile.default_scope or self.space.out_edges[i]:
                run.buffers.append([scope[i], op.output_bytes, 0.0, math.inf])
        return max(end.values(), default=0.0)

    def _nodes(self, unit: list[str]) -> list:
        """Each op's node: ``("op", i)`` on a parallel unit, else ``(unit, depth)``: 1 + the
        most times a path into the op left its unit's ops and came back."""
        g, node = self.g, []
        depth = {u: [0] * len(g.ops) for u in self.block}
        for i in range(len(g.ops)):
            preds = [g.edges[e].src for e in self.space.in_edges[i]]
            for u, d in depth.items():
                if unit[i] == u:
                    d[i] = max([1] + [d[q] + (unit[q] != u) for q in preds])
                else:
                    d[i] = max([0] + [d[q] for q in preds])
            if unit[i] not in self.block:
                node.append(("op", i))
            else:
                node.append((unit[i], depth[unit[i]][i]))
        return node

    def _order(self, node: list) -> list | None:
        """The nodes in an order where each comes after every node it reads from, or None
        if they reach each other (depth-first, by the graph's edges between nodes)."""
        after: dict = {x: set() for x in node}
        for e in self.g.edges:
            if node[e.src] != node[e.dst]:
                after[node[e.dst]].add(node[e.src])
        order, state = [], {}
        for root in dict.fromkeys(node):
            stack = [(root, iter(sorted(after[root], key=str)))]
            if state.get(root):
                continue
            state[root] = 1
            while stack:
                x, it = stack[-1]
                y = next(it, None)
                if y is None:
                    stack.pop()
                    state[x] = 2
                    order.append(x)
                elif state.get(y) == 1:
                    return None
                elif not state.get(y):
                    state[y] = 1
                    stack.append((y, iter(sorted(after[y], key=str))))
        return order

    def _cost(self, run, k: int, scope: list[str]) -> float:
        """Edge ``k``'s transfer time (its ends' scopes differ): measured, else its route's."""
        e = self.g.edges[k]
        name = self.space.edge_names[k]
        mode = run.p.copies[name]
        run.copy_bytes[mode] += e.nbytes
        run.buffers.append([scope[e.dst], e.nbytes, 0.0, math.inf])
        if e.transfer_us is not None:
            return e.transfer_us * 1e-6
        return sum(h.seconds(e.nbytes) for h in self.space.route(scope[e.src], scope[e.dst], mode))

    def _end(self, run, x, ops, preds, node, end, cost, unit) -> float:
        g, space = self.g, self.space
        if x[0] == "op":
            i = ops[0]
            start = max([end[node[g.edges[e].src]] + (cost.get(e, 0.0) if node[g.edges[e].src][0]
                                                       == "op" else 0.0) for e in preds] or [0.0])
            return self._op(run, i, unit[i], start)
        start = max([end[node[g.edges[e].src]] for e in preds] or [0.0])
        reads: dict[int, float] = {}
        for e in preds:
            reads[g.edges[e].src] = max(reads.get(g.edges[e].src, 0.0), cost.get(e, 0.0))
        writes = [max([cost.get(e, 0.0) for e in space.out_edges[i]
                       if node[g.edges[e].dst] != x] or [0.0]) for i in ops]
        t = self._transfer(run, x[0], "inputs", start, sum(reads.values()))
        for i in ops:
            t = self._op(run, i, x[0], t)
        return self._transfer(run, x[0], "outputs", t, sum(writes))

    def _op(self, run, i: int, unit: str, start: float) -> float:
        op = self.g.ops[i]
        scope = run.p.ops[op.name][1]
        end = start + self.space.seconds_of(i, unit, scope,
                                            run.p.weights.get(op.name, "streamed"))
        run.tally(unit, end - start)
        if run.record:
            run.events.append(Event(kind="op", name=op.name, resource=unit, start=start, end=end,
                                    src=scope, dst=scope))
        return end

    def _transfer(self, run, unit: str, what: str, start: float, secs: float) -> float:
        if secs > 0:
            run.tally(unit, secs)
            if run.record:
                run.events.append(Event(kind="copy", name=f"{unit} {what}", resource=unit,
                                        start=start, end=start + secs, mode="sync"))
        return start + secs
