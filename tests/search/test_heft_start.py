"""HEFT's placement as the search starts from it, made to fit memory (search/heft_start.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autoplace.baselines.heft import heft_genome
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import fitting, simulate_batch
from autoplace.models import load_graph
from autoplace.search.heft_start import fit_memory, heft_start
from autoplace.space import SearchSpace


def simulated(space, choice, mode):
    return simulate_batch(space, choice.reshape(1, -1), mode.reshape(1, -1))


@pytest.mark.parametrize("model, hw", [("inception_v1", "soc"), ("densenet121", "soc"),
                                       ("shufflenet", "mesh")])
def test_an_overflowing_heft_placement_is_made_to_fit_by_a_few_moves(model, hw):
    space = SearchSpace(load_graph(model), load_profile(hw))
    c, m = heft_genome(space)
    raw = simulated(space, c, m)
    assert not fitting(space, raw)[0]  # HEFT's own placement overflows a scope
    over = np.flatnonzero(np.floor(raw.peak[0]) > space.capacity)
    fitted = fit_memory(space, c, m)
    assert fitting(space, simulated(space, fitted, m))[0]
    moved = np.flatnonzero(fitted != c)
    assert 1 <= len(moved) <= 20
    # only ops that held an output or weights in an overflowing scope were moved
    held = np.isin(space.c_scope[moved, c[moved]], over) \
        | np.isin(space.c_wscope[moved, c[moved]], over)
    assert held.all()


def test_a_fitting_heft_placement_is_left_as_it_is():
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    c, m = heft_genome(space)
    assert fitting(space, simulated(space, c, m))[0]
    choice, mode = heft_start(space)
    want = space.canonical(c[None, :], m[None, :])
    assert (choice == want[0]).all() and (mode == want[1]).all()
    choice[0, 0] = -5  # a copy: the next caller gets HEFT's again
    assert (heft_start(space)[0] == want[0]).all()


def test_the_tuner_measures_the_fitted_heft(tmp_path):
    from autoplace.measure.simulator import Simulator
    from autoplace.records.tuning_log import TuningLog, read
    from autoplace.search import TuneConfig, tune

    space = SearchSpace(load_graph("inception_v1"), load_profile("soc"))
    with TuningLog(tmp_path / "t.jsonl") as log:
        tune(space, Simulator(space), log, TuneConfig(trials=40, seed=0))
    heft = [r for r in read(tmp_path / "t.jsonl") if r.strategy == "heft"]
    assert len(heft) == 1 and heft[0].result.ok
    assert heft[0].placement == space.decode(*(x[0] for x in heft_start(space)))
