"""Canonical genomes: one genome per placement, whatever relabelling or split group it came as.

Split from :mod:`autoplace.space.compiled` to keep each part small; only
:class:`~autoplace.space.compiled.SearchSpace` uses :class:`CanonicalForms` (as a base), on
its choice tables, unit classes and :meth:`normalize`.
"""

from __future__ import annotations

import functools

import numpy as np

from autoplace.space.capability import Composites, composites
from autoplace.space.classes import Symmetry, relabel, symmetries


class CanonicalForms:
    """Co-location groups and interchangeable units of a space, and the canonical genome."""

    @functools.cached_property
    def symmetries(self) -> list[Symmetry]:
        """The unit classes whose units are interchangeable (any renaming of them changes no
        cost): relabellings of a placement over them are one placement."""
        return symmetries(self.profile, self.unit_class)

    @functools.cached_property
    def colocated(self) -> tuple[np.ndarray, np.ndarray]:
        """``(followers, leaders)``: each op of a co-location group but its first, and that
        first op (the group's leader, whose unit the group takes)."""
        first: dict[str, int] = {}
        pairs = [(i, first.setdefault(op.group, i)) for i, op in enumerate(self.graph.ops)
                 if op.group]
        pairs = [(f, lead) for f, lead in pairs if f != lead]
        return tuple(np.array(x, dtype=np.int64).reshape(-1) for x in zip(*pairs)) if pairs \
            else (np.zeros(0, dtype=np.int64),) * 2

    @functools.cached_property
    def composites(self) -> Composites:
        """Op pairs of the multi-op matches a pattern unit runs only whole."""
        return composites(self.graph, self.profile)

    def canonical(self, choice: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The genomes (``[B, ops]``, ``[B, edges]``) as measured: co-location groups moved
        onto their leader's unit (:meth:`colocate`), interchangeable units named in order of
        first use (:meth:`relabel`), modes normalised. Genomes of one placement, and of its
        relabellings over identical units, have one canonical form; the search measures
        and keys only these."""
        choice = self.canonical_choice(choice)
        return choice, self.normalize(choice, mode)

    def canonical_choice(self, choice: np.ndarray) -> np.ndarray:
        """The op choices of :meth:`canonical` (the same array where nothing moves)."""
        return self.relabel(self.keep_composites(self.colocate(choice)))

    def relabel(self, choice: np.ndarray) -> np.ndarray:
        """``choice`` with each class of interchangeable units (:attr:`symmetries`) renamed in
        order of first use: the first op on any of them takes the first, and so on (a new
        array where anything changes)."""
        choice = np.asarray(choice, dtype=np.int64)
        if not self.symmetries or not len(choice):
            return choice
        ops = np.broadcast_to(np.arange(self.n_ops), choice.shape)
        unit, scope = self.c_unit[ops, choice], self.c_scope[ops, choice]
        new_unit, new_scope = unit, scope
        for sym in self.symmetries:
            new_unit, new_scope = relabel(sym, new_unit, new_scope)
        if (new_unit == unit).all():
            return choice
        out = self.choice_index(ops, new_unit, new_scope, self.c_resident[ops, choice])
        return np.where(out >= 0, out, choice)

    def keep_composites(self, choice: np.ndarray) -> np.ndarray:
        """``choice`` with each composite a pattern unit runs only whole (:attr:`composites`)
        whole: where its first op or another of its ops is on such a unit, the others
        join the first op's unit (in their own scope where that unit has it)."""
        c = self.composites
        choice = np.asarray(choice, dtype=np.int64)
        if not len(c.followers):
            return choice
        for k, (f, lead) in enumerate(zip(c.followers, c.leaders)):
            unit = self.c_unit[lead, choice[:, lead]]
            mine = self.c_unit[f, choice[:, f]]
            move = (mine != unit) & (c.units[k, unit] | c.units[k, mine])
            if move.any():
                choice = self._move(choice, f, lead, unit, move)
        return choice

    def _move(self, choice, f: int, lead: int, unit, move) -> np.ndarray:
        """``choice`` with op ``f`` on ``unit`` (per row) where ``move``: in its own scope
        and weight placement where that unit has them, else in op ``lead``'s."""
        ops = np.full(len(choice), f)
        same = self.choice_index(ops, unit, self.c_scope[f, choice[:, f]],
                                 self.c_resident[f, choice[:, f]])
        theirs = self.choice_index(ops, unit, self.c_scope[lead, choice[:, lead]],
                                   self.c_resident[lead, choice[:, lead]])
        out = choice.copy()
        out[:, f] = np.where(move & (same >= 0), same, np.where(move & (theirs >= 0), theirs,
                                                                 choice[:, f]))
        return out

    def colocate(self, choice: np.ndarray) -> np.ndarray:
        """``choice`` with every op of a co-location group on its leader's unit: in its own
        scope and weight placement where that unit has them, else the leader's (a new
        array where anything moves)."""
        followers, leaders = self.colocated
        choice = np.asarray(choice, dtype=np.int64)
        if not len(followers):
            return choice
        lead = choice[:, leaders]
        unit = self.c_unit[leaders, lead]
        mine = choice[:, followers]
        moved = self.c_unit[followers, mine] != unit
        if not moved.any():
            return choice
        ops = np.broadcast_to(followers, mine.shape)
        same = self.choice_index(ops, unit, self.c_scope[followers, mine],
                                 self.c_resident[followers, mine])
        theirs = self.choice_index(ops, unit, self.c_scope[leaders, lead],
                                   self.c_resident[leaders, lead])
        out = choice.copy()
        out[:, followers] = np.where(moved, np.where(same >= 0, same, theirs), mine)
        return out

