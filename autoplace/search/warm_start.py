"""Training rows for the cost model from earlier tuning logs of the same profile.

A log's records are used when their profile hash is the job's; records of other graphs are
used too when the graph can be loaded again (a bundled name, or the job's own graph) with
the recorded fingerprint, since the features do not depend on the graph's size. Each
graph's rows are featurised on that graph, with the same targets as online training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoplace.cost_model import FEATURES, Featurizer
from autoplace.graph import GraphError, OpGraph
from autoplace.measure.objective import LATENCY, Objective
from autoplace.records.tuning_log import Record, read
from autoplace.space import PlacementError, SearchSpace


@dataclass(frozen=True, kw_only=True)
class WarmStart:
    """Rows from earlier logs, and what was left out."""

    X: np.ndarray
    y: np.ndarray
    used: int
    other_profile: int
    unknown_graph: int
    graphs: tuple[str, ...]

    def summary(self) -> str:
        """One line: what was used and what was skipped."""
        return (f"warm start: {self.used} records of {len(self.graphs)} graph(s) "
                f"({', '.join(self.graphs) or '-'}); skipped {self.other_profile} of other "
                f"profiles, {self.unknown_graph} of graphs not found")


def load_rows(paths: Sequence[str], space: SearchSpace,
              objective: Objective = LATENCY) -> WarmStart:
    """Featurised rows of every usable record in the logs ``paths``, with the targets of
    ``objective``."""
    records = [r for p in paths for r in read(p)]
    mine = [r for r in records if r.profile_hash == space.profile.hash and r.pipeline is None]
    groups: dict[str, list[Record]] = {}
    for r in mine:
        groups.setdefault(r.graph_fp, []).append(r)
    X, y, names, unknown = [np.zeros((0, len(FEATURES)))], [np.zeros(0)], [], 0
    for fp, recs in groups.items():
        graph = _graph(recs[0], space.graph)
        if graph is None or graph.fingerprint != fp:
            unknown += len(recs)
            continue
        rows = _rows(SearchSpace(graph, space.profile) if graph is not space.graph else space,
                     recs, objective)
        X.append(rows[0])
        y.append(rows[1])
        names.append(graph.name)
    X_all, y_all = np.concatenate(X), np.concatenate(y)
    return WarmStart(X=X_all, y=y_all, used=len(y_all), other_profile=len(records) - len(mine),
                     unknown_graph=unknown, graphs=tuple(names))


def _graph(record: Record, mine: OpGraph) -> OpGraph | None:
    if record.graph_fp == mine.fingerprint:
        return mine
    from autoplace.models import load_graph

    try:
        return load_graph(record.graph)
    except (GraphError, OSError):
        return None


def _rows(space: SearchSpace, records: list[Record],
          objective: Objective) -> tuple[np.ndarray, np.ndarray]:
    """Features and targets of one graph's records (placements that do not fit: skipped)."""
    feat = Featurizer(space, objective)
    fits = []
    for r in records:
        try:
            fits.append((space.encode([r.placement]), r.result))
        except PlacementError:
            continue
    if not fits:
        return np.zeros((0, len(FEATURES))), np.zeros(0)
    choice = np.concatenate([f[0][0] for f in fits])
    mode = np.concatenate([f[0][1] for f in fits])
    X = feat.transform(choice, mode)
    lat = np.array([np.nan if (v := objective.value(res)) is None else v for _, res in fits],
                   dtype=np.float64)
    return X, feat.targets(lat, X)
