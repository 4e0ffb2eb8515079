"""autoplace: search-based auto-placement tuner for heterogeneous systems, on Apache TVM.

The public API, one import away (each name loads its module on first use, so ``import
autoplace`` stays cheap and the tuning path never loads TVM)::

    import autoplace as ap
    space = ap.SearchSpace(ap.load_graph("squeezenet"), ap.load_profile("soc"))
    with ap.TuningLog("tune.jsonl") as log:
        result = ap.tune(space, ap.Simulator(space), log, ap.TuneConfig(trials=100))
    df = ap.load("tune.jsonl")
"""

from __future__ import annotations

from autoplace import tvm_import
from autoplace.lazy import lazy_names

tvm_import.install()  # TVM without PyTorch's import (autoplace/tvm_import.py)

__version__ = "0.1.0"

#: public name -> the module that defines it
_API = {
    "load_graph": "autoplace.models",
    "OpGraph": "autoplace.graph",
    "load_profile": "autoplace.hardware.load",
    "Profile": "autoplace.hardware.profile",
    "SearchSpace": "autoplace.space",
    "Placement": "autoplace.space",
    "Simulator": "autoplace.measure.simulator",
    "Measurer": "autoplace.measure.base",
    "MeasureResult": "autoplace.measure.base",
    "TuningLog": "autoplace.records.tuning_log",
    "Record": "autoplace.records.tuning_log",
    "read": "autoplace.records.tuning_log",
    "load": "autoplace.records.tuning_log",
    "TuneConfig": "autoplace.search",
    "TuneResult": "autoplace.search",
    "tune": "autoplace.search",
    "SearchStrategy": "autoplace.search",
}

__all__ = sorted(_API)


__getattr__ = lazy_names(__name__, _API, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
