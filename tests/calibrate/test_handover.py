"""The runtime's hand-over fitted to timed placements (autoplace.calibrate.handover)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autoplace.calibrate.handover import (
    MixedRun,
    fit_handover,
    handover_errors,
    random_placements,
    with_handover,
)
from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.space import SearchSpace

UNITS = ("cpu", "core0", "core1")


def runs_timed_as(profile, model: str, n: int) -> list[MixedRun]:
    """``n`` random placements of ``model``, each "measured" as ``profile`` simulates it."""
    space = SearchSpace(load_graph(model), profile)
    sim = Simulator(space)
    return [MixedRun(model=model, placement=p.to_json(), seconds=sim.simulate(p).latency_s)
            for p in random_placements(space, n, seed=0)]


def test_the_fit_finds_the_handover_the_times_were_made_with():
    host = load_profile("host")
    truth = with_handover(host, 7e-6, UNITS)
    runs = runs_timed_as(truth, "squeezenet", 12) + runs_timed_as(truth, "shufflenet", 12)
    seconds, units = fit_handover(with_handover(host, 0.0, UNITS), runs)
    assert units == UNITS
    assert seconds == pytest.approx(7e-6, abs=2e-8)
    assert abs(handover_errors(truth, runs)).max() < 1e-12  # the runs as made
    assert abs(handover_errors(with_handover(host, 0.0, UNITS), runs)).max() > 0.01


def test_runs_that_wait_for_no_handover_fit_none():
    """At the bound, where Brent's search does not land: times made without a hand-over
    are fitted exactly, not by the nearest point the search tried."""
    host = with_handover(load_profile("host"), 0.0, UNITS)
    runs = runs_timed_as(host, "squeezenet", 12)
    seconds, _ = fit_handover(host, runs)
    assert seconds == 0.0
    assert abs(handover_errors(with_handover(host, seconds, UNITS), runs)).max() < 1e-12


def test_random_placements_fit_and_are_drawn_apart_from_the_benchmarks():
    space = SearchSpace(load_graph("squeezenet"), load_profile("host"))
    chosen = random_placements(space, 8, seed=0)
    assert len({p.to_json() for p in chosen}) == 8
    assert all(Simulator(space).simulate(p).ok for p in chosen)
    assert random_placements(space, 8, seed=0) == chosen  # deterministic with the seed
    assert random_placements(space, 8, seed=1) != chosen


def test_a_fit_needs_two_units():
    host = load_profile("host")
    space = SearchSpace(load_graph("seed_te"), host)
    run = MixedRun(model="seed_te", placement=space.uniform("cpu").to_json(), seconds=1e-3)
    with pytest.raises(ValueError, match="two units or more"):
        fit_handover(host, [run])


def cli(*args):
    return subprocess.run([sys.executable, "-m", "autoplace", *args], capture_output=True,
                          text=True, timeout=900)


def test_calibrate_handover_on_this_host(tmp_path):
    out = tmp_path / "host-h.toml"
    proc = cli("calibrate", "--hw", "host", "--handover", "--model", "seed_te",
               "--placements", "6", "--rounds", "2", "--repeat", "3",
               "--cache-dir", str(tmp_path / "cache"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    table = json.loads(out.with_suffix(".handover.json").read_text())
    assert table["units"] == list(UNITS) and 0 < len(table["runs"]) <= 6
    written = load_profile(out)
    assert [written.unit(u).handover_s for u in UNITS] == \
        pytest.approx([table["handover_s"]] * 3, rel=1e-9)
    runs = [MixedRun(**r) for r in table["runs"]]
    # the written hand-over fits the runs at least as well as none
    fitted = sum(handover_errors(written, runs) ** 2)
    assert fitted <= sum(handover_errors(with_handover(written, 0.0, UNITS), runs) ** 2)
    assert "hand-over of cpu, core0, core1" in proc.stdout


@pytest.mark.parametrize("extra", [["--unit", "cpu"], ["--rpc-tracker", "127.0.0.1:9",
                                                        "--rpc-key", "k"]])
def test_handover_is_fitted_here_for_every_unit(extra, tmp_path):
    proc = cli("calibrate", "--hw", "host", "--handover", *extra, "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "--handover fits the runtime's units" in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "x").exists()
