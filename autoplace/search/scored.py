"""What the model-guided proposer keeps of the genomes it has seen, at a cost per genome
that does not grow with the job: measured rows in arrays that grow in amortised constant
time, and the features of recently scored genomes by genome key, so that none is simulated
twice in a round (a parent carried over, a pick checked for fit, a candidate observed)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: genomes whose features :class:`Scored` keeps at most (then it starts again, empty)
MEMO_LIMIT = 1 << 15


class Growing:
    """An array that grows by rows: appending copies only the new rows, but for a doubling
    of capacity now and then (``np.concatenate`` each round copies all rows so far)."""

    def __init__(self, empty: np.ndarray):
        self._buf, self._n = empty, 0

    def extend(self, rows: np.ndarray) -> None:
        need = self._n + len(rows)
        if need > len(self._buf):
            buf = np.empty((max(need, 2 * len(self._buf), 64), *self._buf.shape[1:]),
                           dtype=self._buf.dtype)
            buf[:self._n] = self._buf[:self._n]
            self._buf = buf
        self._buf[self._n:need] = rows
        self._n = need

    @property
    def rows(self) -> np.ndarray:
        """The rows appended so far (a view: valid until the next :meth:`extend`)."""
        return self._buf[:self._n]

    def __len__(self) -> int:
        return self._n


#: features (``[B, F]``), their duplicate keys, whether each row fits (None: not known)
Featurize = Callable[[np.ndarray, np.ndarray, tuple | None],
                     tuple[np.ndarray, list[bytes], np.ndarray | None]]


class Scored:
    """Features, duplicate key and fit of scored genomes, by genome key (a memo: a row's
    features do not depend on the other rows of its batch)."""

    def __init__(self, keys: Callable[[np.ndarray, np.ndarray], list[bytes]],
                 featurize: Featurize, limit: int = MEMO_LIMIT):
        self.keys, self.featurize, self.limit = keys, featurize, limit
        self._memo: dict[bytes, tuple[np.ndarray, bytes, bool | None]] = {}

    def __call__(self, choice: np.ndarray, mode: np.ndarray, plan: tuple | None = None):
        """``(X, duplicate keys, fits)`` of canonical genomes (``mode`` normalised; ``plan``
        their copy plan, if known); rows not seen lately are featurized."""
        genomes = self.keys(choice, mode)
        known = [self._memo.get(k) for k in genomes]
        miss = [i for i, x in enumerate(known) if x is None]
        if len(miss) == len(genomes):  # (the usual case for children: no copying)
            X, dup, fits = self.featurize(choice, mode, plan)
            self._remember(genomes, X, dup, fits)
            return X, dup, fits
        if miss:
            sub = None if plan is None else tuple(x[miss] for x in plan)
            X, dup, fits = self.featurize(choice[miss], mode[miss], sub)
            new = self._remember([genomes[i] for i in miss], X, dup, fits)
            for i, row in zip(miss, new):
                known[i] = row
        X = np.array([x[0] for x in known]).reshape(len(known), -1)
        fits = None if any(x[2] is None for x in known) else np.array([x[2] for x in known])
        return X, [x[1] for x in known], fits

    def _remember(self, genomes: list[bytes], X: np.ndarray, dup: list[bytes],
                  fits: np.ndarray | None) -> list[tuple]:
        if len(self._memo) + len(genomes) > self.limit:
            self._memo.clear()
        rows = list(zip(X, dup, [None] * len(dup) if fits is None else fits.tolist()))
        self._memo.update(zip(genomes, rows))
        return rows
