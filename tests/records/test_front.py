"""The front of a log: non-dominated records within limits, the knee, the hypervolume, and the
command line and pandas views of them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from factories import cli, one_line_error

from autoplace.measure import ErrorKind, MeasureResult
from autoplace.measure.objective import ENERGY, LATENCY, PEAK_MEMORY
from autoplace.records.front import (
    Limits,
    figures,
    front,
    hypervolume,
    knee,
    nondominated,
    parse_bytes,
    pick,
)
from autoplace.records.tuning_log import Record
from autoplace.space import Placement


def record(trial: int, latency: float | None, energy: float | None = None,
           sram: int = 0, dram: int = 0) -> Record:
    result = MeasureResult(latency_s=latency, energy_j=energy,
                           peak_bytes={"sram": sram, "dram": dram}) if latency is not None \
        else MeasureResult.failure(ErrorKind.OUT_OF_MEMORY, "over")
    return Record(graph="g", graph_fp="fp", profile="p", profile_hash="h", strategy="evolve",
                  trial=trial, seed=0, measurer="simulator", placement=Placement(ops={}, copies={}),
                  result=result)


def dominated_by_another(F: np.ndarray, i: int) -> bool:
    return any((F[j] <= F[i]).all() and (F[j] < F[i]).any() for j in range(len(F)) if j != i)


@pytest.mark.parametrize("seed", range(6))
def test_the_front_is_every_record_no_other_dominates(seed):
    """Against the definition, on random figures with ties (a grid of few values)."""
    rng = np.random.default_rng(seed)
    records = [record(t, *(rng.integers(1, 6, 2) / 1000.0)) for t in rng.permutation(40)]
    records += [record(99, None)]  # a failure is never on the front
    points = front(records, (LATENCY, ENERGY))
    F = figures(points, (LATENCY, ENERGY))
    ok = [r for r in records if r.result.ok]
    all_F = figures(ok, (LATENCY, ENERGY))
    want = {tuple(f) for i, f in enumerate(all_F) if not dominated_by_another(all_F, i)}
    assert {tuple(f) for f in F} == want and len(F) == len(want)  # one record per point
    for r, f in zip(points, F):  # of equal figures, the lowest trial
        assert r.trial == min(q.trial for q, g in zip(ok, all_F) if (g == f).all())
    assert (np.diff(F[:, 0]) >= 0).all()  # best latency first


def test_equal_rows_keep_the_first_and_dominated_ones_none():
    F = np.array([[1.0, 3.0], [2.0, 2.0], [1.0, 3.0], [2.5, 2.5], [3.0, 1.0]])
    assert nondominated(F).tolist() == [True, True, False, False, True]


def test_figures_equal_but_for_their_summation_order_are_equal_on_the_front():
    """seed_te on soc: trial 29's energy, 1.7568000000000002e-05 J, and trial 6's,
    1.7567999999999998e-05 J, are one energy: trial 6, slower, is not on the front."""
    records = [record(5, 1.1119999999999999e-05, 2.1599999999999996e-05),
               record(29, 1.1712000000000001e-05, 1.7568000000000002e-05),
               record(6, 1.6528000000000002e-05, 1.7567999999999998e-05)]
    assert [r.trial for r in front(records, (LATENCY, ENERGY))] == [5, 29]


def test_limits_leave_out_records_and_pick_chooses_within_them():
    records = [record(0, 0.010, 0.050, sram=3 << 20), record(1, 0.020, 0.030, sram=1 << 20),
               record(2, 0.040, 0.010, sram=1 << 20), record(3, 0.015, 0.060, sram=5 << 20)]
    assert [r.trial for r in front(records, (LATENCY, ENERGY))] == [0, 1, 2]
    assert pick(records, "energy", (), Limits(latency_s=0.025)).trial == 1
    assert pick(records, "latency", (), Limits(energy_j=0.035)).trial == 1
    assert pick(records, "latency", (), Limits(memory={"sram": 2 << 20})).trial == 1
    assert pick(records, "latency", (), Limits(latency_s=0.005)) is None
    three = (LATENCY, ENERGY, PEAK_MEMORY)
    assert [r.trial for r in front(records, three)] == [0, 1, 2]  # 3 holds more, slower
    assert pick(records, "knee", (LATENCY, ENERGY)).trial == 1  # (0.33, 0.5) from the ideal


def test_the_knee_is_the_point_nearest_the_ideal_once_scaled():
    F = np.array([[0.0, 10.0], [2.0, 2.0], [10.0, 0.0]])
    assert knee(F) == 1
    assert knee(F * [1.0, 100.0]) == 1  # units do not matter
    assert knee(np.array([[0.0, 10.0], [10.0, 0.0]])) == 0  # ties: the first
    assert knee(np.array([[0.0, 10.0], [9.0, 1.0], [10.0, 0.0]])) == 1  # 0.906 < 1


def test_the_hypervolume_of_hand_computed_fronts():
    F = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]])
    assert hypervolume(F, [4.0, 4.0]) == pytest.approx(3 + 2 + 1)
    assert hypervolume(np.vstack([F, [[5.0, 0.5]]]), [4.0, 4.0]) == pytest.approx(6)  # outside
    cube = np.array(list(itertools.product([0.0, 1.0], repeat=3)))[[3, 5, 6]]  # two 1s each
    assert hypervolume(cube, [2.0, 2.0, 2.0]) == pytest.approx(8 - 1 - 3 * 1)  # 8 - the rest
    assert hypervolume(np.zeros((0, 2)), [1.0, 1.0]) == 0.0


@pytest.mark.parametrize("text, want", [("4MiB", 4 << 20), ("512 KiB", 512 << 10),
                                        ("4194304", 4194304), ("1e6", 1e6), ("2GB", 2e9)])
def test_sizes_in_bytes(text, want):
    assert parse_bytes(text, "x") == want


@pytest.mark.parametrize("bad", ["", "4 parsecs", "-1", "nan", "inf", "0", "MiB"])
def test_a_bad_size_is_a_one_line_error_naming_the_option(bad):
    with pytest.raises(ValueError, match=r"^--max-memory sram=.*: .* is not a size in bytes"):
        Limits.parse(memory=[f"sram={bad}"])


def test_bounds_must_be_finite_and_positive():
    for kwargs in ({"latency_s": 0.0}, {"energy_j": float("nan")}, {"memory": {"s": -1.0}}):
        with pytest.raises(ValueError, match="a bound must be a finite number > 0"):
            Limits(**kwargs)
    with pytest.raises(ValueError, match="not SCOPE=BYTES"):
        Limits.parse(memory=["4MiB"])


@pytest.fixture(scope="module")
def biglittle_log(tmp_path_factory):
    """A tuning log of a profile that prices energy (big and little cores' power)."""
    path = tmp_path_factory.mktemp("front") / "bl.jsonl"
    proc = cli("tune", "squeezenet", "--hw", "biglittle", "--trials", "60", "--log",
               str(path), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return path


def test_best_pareto_prints_the_front_that_analysis_gives(biglittle_log):
    from autoplace.reports import analysis

    proc = cli("best", str(biglittle_log), "--pareto")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[2:] if line.startswith("  ")]
    table = analysis.front(analysis.load(biglittle_log))
    assert [int(r[0]) for r in rows] == table["trial"].tolist() and len(rows) >= 2
    knee_trial = int(table.loc[table["knee"], "trial"].iloc[0])
    assert [int(r[0]) for r in rows if "knee" in " ".join(r)] == [knee_trial]
    energy = [float(r[3]) for r in rows]
    assert energy == sorted(energy, reverse=True)  # a front: slower is leaner
    picked = cli("best", str(biglittle_log), "--pick", "knee")
    assert f"trial {knee_trial}," in picked.stdout.splitlines()[0]


def test_best_with_bad_limits_is_a_one_line_error(biglittle_log):
    for args, words in ((("--max-memory", "l3=1MiB"), ("no record", "'l3'", "they hold")),
                        (("--criteria", "latency"), ("--criteria", "two or more")),
                        (("--max-latency", "1e-9"), ("no valid record within the limits",))):
        one_line_error(cli("best", str(biglittle_log), *args), *words)
    one_line_error(cli("best", str(biglittle_log), "--max-energy", "nan"), "--max-energy",
                   "finite", start="autoplace best: error:")  # (argparse's)


def test_a_front_of_a_profile_that_prices_no_energy_says_so(tmp_path):
    """soc without its units' power: every record costs 0 J, the front over latency and
    energy is the fastest record alone, and best --pareto says why; over latency and peak
    memory, no such note."""
    from autoplace.hardware.load import bundled_profiles

    soc = bundled_profiles()["soc"].read_text()
    unpriced = "\n".join(x for x in soc.splitlines() if not x.startswith("power_w"))
    assert unpriced != soc
    (tmp_path / "free.toml").write_text(unpriced)
    log = tmp_path / "free.jsonl"
    assert cli("tune", "seed_te", "--hw", tmp_path / "free.toml", "--trials", "8", "--log",
               log, "--no-progress").returncode == 0
    out = cli("best", log, "--pareto").stdout.splitlines()
    assert "the front of 1 of" in out[0] and "least latency" in out[2]
    assert out[-1].startswith("note: every energy figure is 0: profile soc prices no energy")
    memory = cli("best", log, "--pareto", "--criteria", "latency,peak_memory").stdout
    assert "note:" not in memory and "least peak_memory" in memory
