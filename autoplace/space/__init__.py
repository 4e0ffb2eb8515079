"""The search space, compiled once per (graph, profile): see :mod:`autoplace.space.compiled`.

- :class:`SearchSpace`: choice tables, edges, routes, unit classes; genomes (encode, decode,
  normalize, text); named placements (``from_user``, ``check``, ``uniform``).
- :class:`Placement`: a placement by name, for the user API, the log and the build.
- :class:`Problem`: what ``SearchSpace.check`` finds wrong, an :class:`ErrorKind` and a detail.
- :mod:`autoplace.space.routes`: copy routes found on demand (Dijkstra, or a mesh's grid).

Each name loads its module on first use: reading a log needs :class:`Placement`, not the
compiled space's numba kernels.
"""

from __future__ import annotations

from autoplace.lazy import lazy_names

#: public name -> the module that defines it
_HOMES = {
    "ASYNC": ".compiled", "SYNC": ".compiled", "SearchSpace": ".compiled",
    "check_graph": ".compiled", "Placement": ".placement", "PlacementError": ".placement",
    "ErrorKind": ".problem", "Problem": ".problem", "Route": ".routes",
}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES, globals())
