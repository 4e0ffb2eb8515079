"""Calibration: the simulator's numbers fitted to what real hardware does.

- :mod:`~autoplace.calibrate.kernels` — a unit's throughputs, launch overhead, home-scope
  bandwidth and kernel latency table, from its kernels timed here or on a board;
- :mod:`~autoplace.calibrate.energy` — a unit's idle power and energy per FLOP, from the
  RAPL counters' energy of its runs here (where they are readable);
- :mod:`~autoplace.calibrate.handover` — the hand-over of the runtime's units, from random
  placements over them timed here.

``autoplace calibrate`` (:mod:`autoplace.cli.calibrate_command`) runs them.
"""
