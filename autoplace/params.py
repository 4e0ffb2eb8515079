"""How placements are written for Optuna and in the study: parameters and genomes.

The Optuna samplers (``tpe``, ``random``) see one categorical parameter per op
(``"unit@scope"``) and one per edge that has a choice of copy mode. The ``evolve`` search
stores a measured candidate as a *genome* instead: its choice index per op and preferred
copy mode per edge, as one short text attribute (per-op parameters cost Optuna ~30 us each
per trial, which is most of the search's time on a 300-op graph).
"""

from __future__ import annotations

import numpy as np
from optuna.distributions import CategoricalDistribution

from autoplace.space import Placement, SearchSpace


def op_param(name: str) -> str:
    """The Optuna parameter of op ``name``."""
    return f"op:{name}"


def copy_param(edge: str) -> str:
    """The Optuna parameter of the copy mode of edge ``edge`` ("src->dst")."""
    return f"copy:{edge}"


def distributions(space: SearchSpace) -> dict[str, CategoricalDistribution]:
    """One categorical per op ("unit@scope"), one per edge with a choice of copy mode."""
    dists = {
        op_param(op.name): CategoricalDistribution([f"{u}@{s}" for u, s in choices])
        for op, choices in zip(space.graph.ops, space.op_choices)
    }
    for name, modes in zip(space.edge_names, space.edge_modes):
        if len(modes) > 1:
            dists[copy_param(name)] = CategoricalDistribution(modes)
    return dists


def to_placement(space: SearchSpace, params: dict) -> Placement:
    """Decode Optuna parameters into a placement (copy modes repaired to fit routes)."""
    choice = []
    for op, choices in zip(space.graph.ops, space.op_choices):
        unit, scope = params[op_param(op.name)].split("@", 1)
        choice.append(choices.index((unit, scope)))
    prefs = {k: params[copy_param(n)] for k, n in enumerate(space.edge_names)
             if copy_param(n) in params}
    return space.decode(choice, prefs)


def to_params(space: SearchSpace, placement: Placement) -> dict:
    """Optuna parameters of a placement (edges without a copy keep no parameter)."""
    params = {op_param(k): f"{u}@{s}" for k, (u, s) in placement.ops.items()}
    free = {n for n, m in zip(space.edge_names, space.edge_modes) if len(m) > 1}
    params.update({copy_param(n): m for n, m in placement.copies.items() if n in free})
    return params


def format_genome(choice: np.ndarray, mode: np.ndarray) -> str:
    """Compact text of an encoded placement: choice indices, then copy-mode bits."""
    return ".".join(map(str, choice.tolist())) + "|" + "".join(map(str, mode.tolist()))


def parse_genome(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`format_genome`."""
    ops, _, modes = text.partition("|")
    return (np.array([int(x) for x in ops.split(".")], dtype=np.int64),
            np.array([int(x) for x in modes], dtype=np.int64))


def decode_args(genome: tuple[np.ndarray, np.ndarray]) -> tuple[list[int], dict[int, str]]:
    """:meth:`SearchSpace.decode` arguments of a genome."""
    choice, mode = genome
    return [int(c) for c in choice], {k: ("sync", "async")[int(m)] for k, m in enumerate(mode)}
