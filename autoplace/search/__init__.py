"""The search: a tuning loop over strategy objects, guided by a cost model.

- :mod:`~autoplace.search.loop` — the tuning loop (baselines, rounds, resume);
  :mod:`~autoplace.search.job` — :func:`tune`, one job (its set-up, Ctrl-C, its result);
- :mod:`~autoplace.search.store` — the log (source of truth) and the Optuna study;
- :mod:`~autoplace.search.strategy` — the strategy interface (propose / observe);
- :mod:`~autoplace.search.evolution_strategy`, :mod:`~autoplace.search.optuna_sampling` — the
  strategies (model-guided evolution; Optuna's TPE and random samplers), built by name in
  :mod:`~autoplace.search.strategies`;
- :mod:`~autoplace.search.guided_proposer`, :mod:`~autoplace.search.genetic_operators` — the
  model-guided proposer and its genetic operators; :mod:`~autoplace.search.params` — placements as
  Optuna parameters; :mod:`~autoplace.search.warm_start` — cost-model rows from old logs;
- :mod:`~autoplace.search.mesh`, :mod:`~autoplace.search.pipeline_moves` — the same loop over
  a mesh's pipeline plans (:func:`tune_mesh`) and the strategy that moves them.

Each name loads its module on first use: subclassing :class:`SearchStrategy`
(``autoplace.search.strategy``) starts neither Optuna nor the cost model.
"""

from __future__ import annotations

from autoplace.lazy import lazy_names

#: public name -> the module that defines it
_HOMES = {
    "SAMPLERS": "autoplace.search.config", "TuneConfig": "autoplace.search.config",
    "TuneResult": "autoplace.search.config", "SearchError": "autoplace.search.strategy",
    "Proposal": "autoplace.search.strategy", "SearchStrategy": "autoplace.search.strategy",
    "Tuner": "autoplace.search.loop", "tune": "autoplace.search.job",
    "baselines": "autoplace.baselines.named", "greedy": "autoplace.baselines.named",
    **{name: "autoplace.search.mesh" for name in ("mesh_config", "plan_space", "tune_mesh")},
    "PipelineMoves": "autoplace.search.pipeline_moves",
    **{name: "autoplace.search.params" for name in (
        "copy_param", "distributions", "op_param", "to_params", "to_placement")},
}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES, globals())
