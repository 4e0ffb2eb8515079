"""Toward fitting, when no measured placement fits: squeezenet (4.7 MiB of weights) on soc
with 3 MiB of DRAM beside its two 4 MiB SRAMs overflows in every baseline, though
placements that fit exist; with 0.5 MiB of DRAM and 0.25 MiB SRAMs none does."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.limits import Limits
from autoplace.measure.objective import LATENCY
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, baselines, tune
from autoplace.search.fit_repair import LABEL, OVER, over_capacity
from autoplace.space import SearchSpace


def soc_with(tmp_path: Path, dram_mib: float, sram_mib: float) -> SearchSpace:
    text = Path(load_profile("soc").source).read_text()
    text = text.replace("capacity_mib = 2048", f"capacity_mib = {dram_mib}")
    text = text.replace("capacity_mib = 4\n", f"capacity_mib = {sram_mib}\n")
    path = tmp_path / f"soc_{dram_mib}_{sram_mib}.toml"
    path.write_text(text.replace('name = "soc"', f'name = "{path.stem}"'))
    return SearchSpace(load_graph("squeezenet"), load_profile(path))


def tuned(space: SearchSpace, path: Path, trials: int, **config):
    with warnings.catch_warnings(record=True) as said, TuningLog(path) as log:
        warnings.simplefilter("always")
        result = tune(space, Simulator(space), log, TuneConfig(trials=trials, seed=0,
                                                               **config))
    return result, read(path), [str(w.message) for w in said]


def test_when_no_baseline_fits_the_search_moves_toward_fitting_and_goes_on(tmp_path):
    """It used to measure the baselines and stop: "no unmeasured candidate left to
    propose", "no feasible placement found"."""
    space = soc_with(tmp_path, 3, 4)
    result, records, said = tuned(space, tmp_path / "t.jsonl", 20)
    before = [r for r in records if r.strategy in result.baselines]  # HEFT's too
    assert before and not any(r.result.ok for r in before)
    first = next(r for r in records if r.result.ok)
    assert first.strategy == LABEL and first.trial == len(before)  # the first repair fits
    assert result.best is not None and len(records) == len(baselines(space)) + 20
    assert any("moves toward fitting" in s for s in said)
    assert not any("search stopped" in s for s in said)


def test_over_capacity_ranks_every_fit_first_then_by_the_bytes_over(tmp_path):
    """On the placements a search measured (some fit, some do not): those that fit rank by
    their latency, below every one that does not, and those by the bytes their records
    say they hold over capacity."""
    space = soc_with(tmp_path, 3, 4)
    _, records, _ = tuned(space, tmp_path / "t.jsonl", 40)
    choice, mode = space.encode([r.placement for r in records])
    rank = over_capacity(space, choice, mode, LATENCY)
    fits = np.array([r.result.ok for r in records])
    assert fits.any() and (~fits).any()
    assert rank[fits] == pytest.approx([r.result.latency_s for r in records if r.result.ok])
    assert rank[fits].max() < OVER <= rank[~fits].min()
    capacity = {s.name: s.capacity_bytes for s in space.profile.scopes}
    for r, value in zip(records, rank):
        if not r.result.ok:
            over = sum(max(b - capacity[s], 0) for s, b in r.result.peak_bytes.items())
            assert value - OVER == pytest.approx(over, abs=2 * len(capacity))


def test_where_nothing_can_fit_the_search_says_how_close_it_came(tmp_path):
    space = soc_with(tmp_path, 0.5, 0.25)
    result, records, said = tuned(space, tmp_path / "t.jsonl", 50)
    assert result.best is None and records and not any(r.result.ok for r in records)
    searched = len(records) - len(baselines(space))
    assert searched < 50  # it gave up: no move holds less
    (stop,) = [s for s in said if "search stopped" in s]
    assert f"search stopped after {searched} trials: no placement found that fits" in stop
    assert "MiB over capacity" in stop


def test_for_a_stream_the_bytes_over_are_those_of_its_double_buffers(tmp_path):
    """Throughput: a placement fits when its stream (every buffer but the weights held
    twice) does; the bytes over capacity are the stream's."""
    from autoplace.measure.batch import simulate_batch, streaming_peak
    from autoplace.measure.objective import THROUGHPUT

    space = soc_with(tmp_path, 3, 4)
    _, records, _ = tuned(space, tmp_path / "t.jsonl", 40)
    choice, mode = space.encode([r.placement for r in records])
    rank = over_capacity(space, choice, mode, THROUGHPUT)
    out = simulate_batch(space, choice, mode)
    stream = np.maximum(np.floor(streaming_peak(out)) - space.capacity, 0).sum(axis=1)
    latency = np.maximum(np.floor(out.peak) - space.capacity, 0).sum(axis=1)
    over = rank >= OVER
    assert over.any() and (stream[over] > latency[over]).all()  # more over, as a stream
    assert rank[over] - OVER == pytest.approx(stream[over])
    assert rank[~over] == pytest.approx(out.period[~over])


def test_when_no_baseline_keeps_an_energy_bound_the_search_moves_toward_it(tmp_path):
    """squeezenet on soc within 6.03 mJ (its least energy is about 6.0 mJ; every baseline
    draws more): it used to stop after the baselines, "no feasible placement found"."""
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    bound = Limits(energy_j=6.03e-3)
    result, records, said = tuned(space, tmp_path / "t.jsonl", 64, limits=bound)
    before = [r for r in records if r.strategy in result.baselines]
    assert before and not any(bound.admits(r.result) for r in before)
    assert result.best is not None and bound.admits(result.best.result)
    assert any("within --max-energy 0.00603: the search first moves toward" in s
               for s in said)


@pytest.mark.parametrize("bound_j", [6.02e-3, 6.03e-3, 6.05e-3])
def test_a_job_within_an_energy_bound_it_can_keep_runs_its_whole_budget(tmp_path, bound_j):
    """squeezenet on soc within 6.02, 6.03 or 6.05 mJ (bounds of an epsilon-constraint
    sweep between its fastest and least-energy placements): every trial of the budget is
    searched. Such jobs used to stop after 12-26 trials, "no unmeasured candidate left to
    propose": evolution bred from candidates over the bound (the model ranks them fast),
    until a whole pool held none within it. Within 6.02 mJ the job then still stopped after
    36 (no evolved candidate, move or kick new and within the bound); it now wanders
    (:meth:`LocalSearch.wander`) until evolution finds some again."""
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    bound = Limits(energy_j=bound_j)
    result, records, said = tuned(space, tmp_path / "t.jsonl", 96, limits=bound)
    assert result.measured >= 96  # (the baselines besides)
    assert not any("search stopped" in s for s in said)
    assert result.best is not None and bound.admits(result.best.result)
    assert sum(bound.admits(r.result) for r in records) > len(records) / 2


def test_where_no_placement_keeps_the_bound_the_search_says_how_close_it_came(tmp_path):
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    bound = Limits(energy_j=4.5e-3)
    result, records, said = tuned(space, tmp_path / "t.jsonl", 64, limits=bound)
    assert result.best is None and not any(bound.admits(r.result) for r in records)
    closest = min(r.result.energy_j / 4.5e-3 - 1 for r in records if r.result.ok)
    (stop,) = [s for s in said if "search stopped" in s]
    assert f"fitting ends {closest:.1%} beyond the limits, with no move" in stop
