"""What a search is measured against: baseline placements, the optimum and lower bounds.

- :mod:`~autoplace.baselines.named` — the baselines the tuner measures before it searches,
  by name (every single unit, greedy, fill, the best contiguous splits);
- :mod:`~autoplace.baselines.heft` — HEFT, adapted to memory scopes and copy modes (the
  search measures its placement, made to fit memory, as ``heft``);
- :mod:`~autoplace.baselines.contiguous` — the best contiguous splits for the block model;
- :mod:`~autoplace.baselines.optimum` — the exact optimum over the simulator's model (branch
  and bound) and lower bounds.
"""
