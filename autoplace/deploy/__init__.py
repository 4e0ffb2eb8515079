"""Placement -> TVM build: VDevices, copies, compile, run (docs/build.md).

``apply(mod, placement, profile)`` gives the placed Relax module; ``build`` compiles it;
``apply_best`` picks the best placement of a tuning log; ``build_te`` is the first seed
thread's ``s[C].map_to = cpu1`` for a TE graph. The parts that build import TVM, when
first used; :mod:`autoplace.deploy.artefact` (reading manifests safely) does not.
"""

from __future__ import annotations

from autoplace.lazy import lazy_names

#: public name -> the module that defines it; loaded on first use, so that importing a
#: light part (``autoplace.deploy.artefact``) does not load TVM
_HOMES = {
    "BuildError": ".targets", "Built": ".vm_build", "Loaded": ".run", "TimeSettings": ".run",
    "apply": ".place", "apply_best": ".vm_build",
    "build": ".vm_build", "build_te": ".vm_build", "check_placement": ".place",
    "compile_placed": ".compiler", "compile_unplaced": ".compiler", "metadata": ".compiler",
    "random_inputs": ".run",
}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES, globals())
