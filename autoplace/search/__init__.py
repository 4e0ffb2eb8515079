"""The search: a tuning loop over strategy objects, guided by a cost model.

- :mod:`~autoplace.search.loop` — the tuning loop (baselines, rounds, resume) and :func:`tune`;
- :mod:`~autoplace.search.store` — the log (source of truth) and the Optuna study;
- :mod:`~autoplace.search.strategy` — the strategy interface (propose / observe);
- :mod:`~autoplace.search.evolution`, :mod:`~autoplace.search.optuna_sampling` — the
  strategies (model-guided evolution; Optuna's TPE and random samplers), built by name in
  :mod:`~autoplace.search.strategies`;
- :mod:`~autoplace.search.guided`, :mod:`~autoplace.search.evolve` — the model-guided
  proposer and its genetic operators; :mod:`~autoplace.search.params` — placements as
  Optuna parameters; :mod:`~autoplace.search.warm_start` — cost-model rows from old logs.
"""

from autoplace.baselines import baselines, greedy
from autoplace.search.config import SAMPLERS, SearchError, TuneConfig, TuneResult
from autoplace.search.loop import Tuner, tune
from autoplace.search.params import copy_param, distributions, op_param, to_params, to_placement
from autoplace.search.strategy import Proposal, SearchStrategy

__all__ = ["SAMPLERS", "Proposal", "SearchError", "SearchStrategy", "TuneConfig", "TuneResult",
           "Tuner", "baselines", "copy_param", "distributions", "greedy", "op_param",
           "to_params", "to_placement", "tune"]
