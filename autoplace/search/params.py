"""How placements are written for Optuna's samplers: one parameter per op and free edge.

The Optuna samplers (``tpe``, ``random``) see one categorical parameter per op
(``"unit@scope"``) and one per edge that has a choice of copy mode. The ``evolve`` search
stores a measured candidate as its genome's text instead (``SearchSpace.format_genome``):
per-op parameters cost Optuna ~30 us each per trial, most of the search's time on a 300-op
graph.
"""

from __future__ import annotations

import numpy as np
from optuna.distributions import CategoricalDistribution

from autoplace.hardware.profile import COPY_MODES
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
