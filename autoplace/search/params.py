"""How placements are written as Optuna parameters: per op and free edge, or as counts.

The Optuna samplers (``tpe``, ``random``) see one categorical parameter per op
(``"unit@scope"``) and one per edge that has a choice of copy mode. The other strategies
store a measured candidate as its genome's text (``SearchSpace.format_genome``), and give
its trial the parameters ``--study-params`` names (:class:`TrialParams`): by default a few
counts (ops per unit and per scope, copies per mode), since per-op parameters cost Optuna
~30 us each per trial and a storage ~100 KB per trial on densenet121 (docs/search.md).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from autoplace.hardware.profile import COPY_MODES
from autoplace.search.config import STUDY_PARAMS
from autoplace.space import Placement, SearchSpace


def op_param(name: str) -> str:
    """The Optuna parameter of op ``name``."""
    return f"op:{name}"


def copy_param(edge: str) -> str:
    """The Optuna parameter of the copy mode of edge ``edge`` ("src->dst")."""
    return f"copy:{edge}"


def choice_label(unit: str, scope: str, weights: str) -> str:
    """An op parameter's value: ``unit@scope``, and ``@resident`` when its weights are."""
    return f"{unit}@{scope}@resident" if weights == "resident" else f"{unit}@{scope}"


def distributions(space: SearchSpace) -> dict[str, CategoricalDistribution]:
    """One categorical per op (:func:`choice_label`), one per edge with a choice of mode."""
    dists = {
        op_param(op.name): CategoricalDistribution([choice_label(*c) for c in choices])
        for op, choices in zip(space.graph.ops, space.op_choices)
    }
    for name, modes in zip(space.edge_names, space.edge_modes):
        if len(modes) > 1:
            dists[copy_param(name)] = CategoricalDistribution(modes)
    return dists


def to_genome(space: SearchSpace, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The genome of Optuna parameters (an edge without a parameter: its first mode)."""
    choice = np.array([space.choice_of(i, *_unlabel(params[op_param(op.name)]))
                       for i, op in enumerate(space.graph.ops)], dtype=np.int64)
    mode = np.array([COPY_MODES.index(params.get(copy_param(n), (modes or ["sync"])[0]))
                     for n, modes in zip(space.edge_names, space.edge_modes)], dtype=np.int64)
    return choice, mode


def _unlabel(label: str) -> tuple[str, str, str]:
    unit, scope, *rest = label.split("@")
    return unit, scope, rest[0] if rest else "streamed"


def to_placement(space: SearchSpace, params: dict) -> Placement:
    """Decode Optuna parameters into a placement (copy modes repaired to fit routes)."""
    return space.decode(*to_genome(space, params))


def to_params(space: SearchSpace, placement: Placement) -> dict:
    """Optuna parameters of a placement (edges without a copy keep no parameter)."""
    params = {op_param(k): choice_label(u, s, placement.weights.get(k, "streamed"))
              for k, (u, s) in placement.ops.items()}
    free = {n for n, m in zip(space.edge_names, space.edge_modes) if len(m) > 1}
    params.update({copy_param(n): m for n, m in placement.copies.items() if n in free})
    return params


class TrialParams:
    """The Optuna parameters of a study's trials, one of :data:`STUDY_PARAMS`: ``ops``, a
    categorical per op and free edge (:func:`to_params`, what the Optuna samplers ask);
    ``counts``, integers: ops per unit (``ops_on:<unit>``) and per scope
    (``ops_in:<scope>``), crossing edges with a choice of mode per mode (``copies:<mode>``),
    ops with resident weights (``resident_weights``), each only where the space has a choice
    of it; or none."""

    def __init__(self, space: SearchSpace, form: str):
        if form not in STUDY_PARAMS:
            raise ValueError(f"study_params must be one of {STUDY_PARAMS}, got {form!r}")
        self.space, self.form = space, form
        self.free = set() if form == "none" else {
            n for n, m in zip(space.edge_names, space.edge_modes) if len(m) > 1}
        self.dists: dict[str, BaseDistribution] = (
            distributions(space) if form == "ops" else
            self._count_distributions() if form == "counts" else {})

    def _count_distributions(self) -> dict[str, IntDistribution]:
        n, choices = len(self.space.op_choices), [c for cs in self.space.op_choices for c in cs]
        names = [f"ops_on:{u}" for u in dict.fromkeys(u for u, _, _ in choices)]
        names += [f"ops_in:{s}" for s in dict.fromkeys(s for _, s, _ in choices)]
        dists = {k: IntDistribution(0, n) for k in names}
        modes = dict.fromkeys(m for e, ms in zip(self.space.edge_names, self.space.edge_modes)
                              if e in self.free for m in ms)
        dists |= {f"copies:{m}": IntDistribution(0, len(self.free)) for m in modes}
        resident = sum(any(w == "resident" for _, _, w in cs) for cs in self.space.op_choices)
        return dists | ({"resident_weights": IntDistribution(0, resident)} if resident else {})

    def of(self, placement: Placement) -> dict:
        """The parameters of a trial that measured ``placement``."""
        if self.form == "ops":
            return to_params(self.space, placement)
        if self.form == "none":
            return {}
        tally = Counter(f"ops_on:{u}" for u, _ in placement.ops.values())
        tally.update(f"ops_in:{s}" for _, s in placement.ops.values())
        tally.update(f"copies:{m}" for e, m in placement.copies.items() if e in self.free)
        tally["resident_weights"] = sum(w == "resident" for w in placement.weights.values())
        return {k: tally[k] for k in self.dists}
