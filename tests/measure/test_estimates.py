"""The figures a timing measurer leaves out (autoplace/measure/estimates.py): the profile's
estimates, so that a job for energy runs on a measurer that reads no energy counters."""

from __future__ import annotations

import dataclasses

from autoplace.hardware.load import load_profile
from autoplace.measure.base import Measurer
from autoplace.measure.estimates import estimate_note, with_estimates
from autoplace.measure.objective import objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.front import front
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, baselines, tune
from autoplace.space import SearchSpace


class Timer(Measurer):
    """Times as the simulator does, half again as slow, and measures nothing else (as the
    local and RPC measurers)."""

    name = "timer"

    def __init__(self, space: SearchSpace):
        self.simulator = Simulator(space)

    def measure(self, placements):
        return [dataclasses.replace(r, latency_s=1.5 * r.latency_s, energy_j=None,
                                    peak_bytes={}) if r.ok else r
                for r in self.simulator.measure(placements)]


def space():
    return SearchSpace(load_graph("squeezenet"), load_profile("biglittle"))


def test_a_timed_result_gets_the_simulators_energy_and_peaks_and_keeps_its_latency():
    sp = space()
    placements = [p for _, p in baselines(sp)]
    choice, mode = sp.encode(placements)
    timed = Timer(sp).measure(placements)
    simulated = Simulator(sp).measure(placements)
    filled = with_estimates(sp, choice, mode, timed + [None])
    assert filled[-1] is None and len(filled) == len(timed) + 1
    for got, t, s in zip(filled, timed, simulated):
        assert got.latency_s == t.latency_s != s.latency_s
        assert got.energy_j == s.energy_j > 0 and got.peak_bytes == s.peak_bytes
    assert with_estimates(sp, choice, mode, simulated) == simulated  # (nothing left out)


def test_a_front_of_latency_and_energy_on_a_timing_measurer(tmp_path):
    """A job of latency and energy on a measurer without energy used to fail every record
    ("no feasible placement found"); its records now carry the estimates, and its front
    has several points."""
    sp = space()
    with TuningLog(tmp_path / "t.jsonl") as log:
        result = tune(sp, Timer(sp), log, TuneConfig(trials=24, seed=0,
                                                     objective="latency,energy"))
    records = read(tmp_path / "t.jsonl")
    assert all(r.result.energy_j > 0 and r.result.peak_bytes for r in records)
    criteria = objective_named("latency,energy").criteria
    assert len(result.front) >= 2 and \
        [r.trial for r in result.front] == [r.trial for r in front(records, criteria)]


def test_the_output_says_the_figures_are_estimates():
    assert estimate_note("simulator") is None
    assert "the profile's estimates" in estimate_note("local") and "local" in \
        estimate_note("local")
