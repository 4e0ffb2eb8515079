"""Model-guided evolution (``--sampler evolve``, docs/search.md) as a search strategy.

Each round the cost model ranks ``candidates`` evolved genomes and the best ``n`` are
proposed (:class:`~autoplace.search.guided_proposer.GuidedProposer`); the first round also proposes
HEFT's placement. Per round, how well the model ranked what was measured goes to
:attr:`stats` and, one JSON line per round, to ``stats_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autoplace.search.guided_proposer import GuidedProposer
from autoplace.search.heft_start import heft_start
from autoplace.search.strategy import Proposal, SearchStrategy


class ModelGuidedEvolution(SearchStrategy):
    """Evolve many genomes, rank them with the cost model, propose the best few."""

    def __init__(self, proposer: GuidedProposer, *, rank_stats: bool = True,
                 stats_path: str | Path | None = None):
        super().__init__()
        self.proposer, self.space = proposer, proposer.space
        self.rank_stats, self.stats_path = rank_stats, stats_path
        self._heft_pending = True
        self._rows = 0

    def propose(self, n: int) -> Proposal:
        parts: list[Proposal] = []
        self._rows = self.proposer.fit()
        heft = self._heft() if self._heft_pending else None
        self._heft_pending = False
        if heft is not None:
            parts.append(heft)
        if n > len(heft or ()):
            avoid = None if heft is None else (heft.choice, heft.mode)
            batch = self.proposer.propose(n - len(heft or ()), avoid=avoid)
            parts.append(Proposal(choice=batch.choice, mode=batch.mode, labels=batch.strategy,
                                  predicted=batch.predicted))
        return _concat(parts, self.space)

    def _heft(self) -> Proposal | None:
        """HEFT's placement, made to fit (:func:`heft_start`), if not measured yet (it also
        seeds the population)."""
        choice, mode = heft_start(self.space)
        self.proposer.seed_population(choice, mode)
        key = self.space.keys(choice, mode)
        if key[0] in self.proposer.measured_genomes:
            return None
        return Proposal(choice=choice, mode=mode, labels=("heft",),
                        predicted=self.proposer.score(choice, mode)[0])

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        if not len(proposal):
            return
        self.proposer.observe(proposal.choice, proposal.mode, latency)
        if proposal.predicted is not None and self.rank_stats:
            self._round_stats(proposal.predicted)

    def estimate(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray | None:
        return self.proposer.estimate(choice, mode)

    def state(self) -> dict:
        return {"proposer": self.proposer.state(), "heft_pending": self._heft_pending}

    def restore(self, state: dict) -> None:
        self.proposer.restore(state["proposer"])
        self._heft_pending = bool(state["heft_pending"])

    def _round_stats(self, predicted: np.ndarray) -> None:
        """Ranking quality of the model on the batch it chose (before training on it)."""
        stats = {"round": len(self.stats), "measured": len(self.proposer.latency),
                 "train_rows": self._rows, **self.proposer.batch_quality(predicted)}
        self.stats.append(stats)
        if self.stats_path is not None:
            with open(self.stats_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(stats, sort_keys=True) + "\n")

    def save_model(self, path: str) -> None:
        self.proposer.fit(force=True)
        self.proposer.model.save(path)


def _concat(parts: list[Proposal], space) -> Proposal:
    if not parts:
        return Proposal(choice=np.zeros((0, space.n_ops), dtype=np.int64),
                        mode=np.zeros((0, space.n_edges), dtype=np.int64), labels=(),
                        predicted=np.zeros(0))
    return Proposal(choice=np.concatenate([p.choice for p in parts]),
                    mode=np.concatenate([p.mode for p in parts]),
                    labels=tuple(x for p in parts for x in p.labels),
                    predicted=np.concatenate([p.predicted for p in parts]))
