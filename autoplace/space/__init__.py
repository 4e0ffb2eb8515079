"""The search space, compiled once per (graph, profile): see :mod:`autoplace.space.compiled`.

- :class:`SearchSpace`: choice tables, edges, routes, unit classes; genomes (encode, decode,
  normalize, text); named placements (``from_user``, ``check``, ``uniform``).
- :class:`Placement`: a placement by name, for the user API, the log and the build.
- :class:`Problem`: what ``SearchSpace.check`` finds wrong, an :class:`ErrorKind` and a detail.
- :mod:`autoplace.space.routes`: copy routes found on demand (Dijkstra, or a mesh's grid).
"""

from autoplace.space.compiled import ASYNC, SYNC, SearchSpace, check_graph
from autoplace.space.placement import Placement, PlacementError
from autoplace.space.problem import ErrorKind, Problem
from autoplace.space.routes import Route

__all__ = ["ASYNC", "SYNC", "ErrorKind", "Placement", "PlacementError", "Problem", "Route",
           "SearchSpace", "check_graph"]
