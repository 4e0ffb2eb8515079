"""The figures a measurer that times placements does not measure: the profile's estimates.

The local and RPC measurers time an inference; they read no energy counters and no
allocator's peak. So that a job for energy or peak memory, or within limits on them, runs
on real hardware, a valid result without ``energy_j`` or ``peak_bytes`` gets the
simulator's for the same placement (the profile's datasheet figures, docs/simulator.md,
"Energy"): its latency stays the measured one. ``autoplace tune`` says so
(:func:`estimate_note`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from autoplace.measure.base import MeasureResult
from autoplace.measure.batch import simulate_batch
from autoplace.space import SearchSpace

#: the result fields filled with estimates where a measurer leaves them out
ESTIMATED = ("energy_j", "peak_bytes")


def with_estimates(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
                   results: Sequence[MeasureResult | None]) -> list[MeasureResult | None]:
    """``results`` (of the genome rows ``choice``, ``mode``), each valid one without an
    energy or peak bytes given the simulator's."""
    results = list(results)
    need = [b for b, r in enumerate(results)
            if r is not None and r.ok and (r.energy_j is None or not r.peak_bytes)]
    if not need:
        return results
    out = simulate_batch(space, choice[need], mode[need])
    for j, b in enumerate(need):
        r = results[b]
        peaks = {space.scopes[s]: int(out.peak[j, s]) for s in np.flatnonzero(out.peak[j])}
        results[b] = dataclasses.replace(
            r, energy_j=float(out.energy[j]) if r.energy_j is None else r.energy_j,
            peak_bytes=r.peak_bytes or peaks)
    return results


def estimate_note(measurer: str) -> str | None:
    """What a job's output says of its records' energy and peak bytes: None with the
    simulator (they are its own figures), else that they are the profile's estimates."""
    if measurer == "simulator":
        return None
    return (f"energy and peak memory are the profile's estimates for each placement (the "
            f"{measurer} measurer times inferences; it reads no energy counters)")
