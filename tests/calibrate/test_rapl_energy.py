"""Energy calibration: the fit on noisy synthetic runs, RAPL's counters read from a
directory laid out as /sys/class/powercap (wraparound, absence, unreadable files), bad
values in one line, the fitted keys in the written profile, and the command on this host."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from factories import cli

from autoplace.calibrate.energy import (
    EnergySample,
    PowerFit,
    energy_line,
    fit_power,
    open_rapl,
    sample,
)
from autoplace.calibrate.kernels import calibrated, fit
from autoplace.hardware.load import load_profile
from autoplace.hardware.write import to_toml

PJ = 1e-12


def noisy_runs(idle_w: float, j_per_flop: float, *, noise: float, seed: int = 0):
    """An idle second and 12 runs of 0.2 to 3 s at 1 to 40 GFLOP/s, each measured with a
    relative error of ``noise`` (normal)."""
    rng = np.random.default_rng(seed)
    runs = [EnergySample(seconds=1.0, flops=0.0, joules=idle_w * (1 + noise * rng.normal()))]
    for _ in range(12):
        seconds, rate = rng.uniform(0.2, 3.0), rng.uniform(1e9, 40e9)
        joules = idle_w * seconds + j_per_flop * rate * seconds
        runs.append(EnergySample(seconds=seconds, flops=rate * seconds,
                                 joules=joules * (1 + noise * rng.normal())))
    return runs


@pytest.mark.parametrize("seed", range(3))
def test_the_fit_recovers_idle_power_and_energy_per_flop_through_noise(seed):
    f = fit_power(noisy_runs(4.0, 150 * PJ, noise=0.01, seed=seed))
    assert f.idle_w == pytest.approx(4.0, rel=0.03)
    assert f.j_per_flop == pytest.approx(150 * PJ, rel=0.03)
    exact = fit_power(noisy_runs(4.0, 150 * PJ, noise=0.0, seed=seed))
    assert (exact.idle_w, exact.j_per_flop) == pytest.approx((4.0, 150 * PJ), rel=1e-9)
    assert f.samples == 13


def powercap(tmp_path: Path, counters: dict[str, tuple[int, int]]) -> Path:
    """A directory laid out as /sys/class/powercap: per domain ``(energy_uj,
    max_energy_range_uj)``; a package's sub-domain and the control type's own entry too."""
    root = tmp_path / "powercap"
    (root / "intel-rapl").mkdir(parents=True)  # the control type, not a domain
    for name, (energy, top) in counters.items():
        (root / name).mkdir()
        (root / name / "energy_uj").write_text(f"{energy}\n")
        (root / name / "max_energy_range_uj").write_text(f"{top}\n")
    return root


def set_counter(root: Path, name: str, uj: int) -> None:
    (root / name / "energy_uj").write_text(f"{uj}\n")


def test_the_counters_sum_the_packages_and_go_round_once_when_they_wrap(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": (1_000, 10_000_000),
                               "intel-rapl:1": (9_999_000, 10_000_000),
                               "intel-rapl:0:0": (500, 10_000_000)})  # the core: in :0
    rapl = open_rapl(root)
    assert [d.name for d in rapl.domains] == ["intel-rapl:0", "intel-rapl:1"]
    before = rapl.read()
    set_counter(root, "intel-rapl:0", 3_001_000)   # +3 J
    set_counter(root, "intel-rapl:1", 1_000)       # wrapped: +2,000 uJ
    assert rapl.joules(before, rapl.read()) == pytest.approx(3.0 + 0.002, rel=1e-12)


def test_a_sample_reads_the_counters_around_its_runs(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": (0, 10**12)})
    rapl, calls = open_rapl(root), []

    def run():  # each run costs 2 J, as the counter says
        calls.append(1)
        set_counter(root, "intel-rapl:0", 2_000_000 * len(calls))

    s = sample(rapl, run, 1e9, least_s=0.05)
    assert s.joules == pytest.approx(2.0 * len(calls)) and s.flops == 1e9 * len(calls)
    assert s.seconds >= 0.05


def test_without_counters_it_says_why_in_one_line(tmp_path):
    assert open_rapl(tmp_path / "none") == f"{tmp_path / 'none'} absent"
    (tmp_path / "empty").mkdir()
    assert "no intel-rapl:<N> package domain" in open_rapl(tmp_path / "empty")
    root = powercap(tmp_path, {"intel-rapl:0": (5, 100)})
    (root / "intel-rapl:0" / "energy_uj").write_text("n/a\n")
    assert open_rapl(root) == f"{root / 'intel-rapl:0' / 'energy_uj'}: 'n/a' is not a counter"
    (root / "intel-rapl:0" / "energy_uj").unlink()
    (root / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable, even by root
    assert open_rapl(root) == f"{root / 'intel-rapl:0' / 'energy_uj'} unreadable (Is a directory)"
    if os.geteuid() != 0:  # (root reads a file of mode 0 anyway)
        (root / "intel-rapl:0" / "energy_uj").rmdir()
        set_counter(root, "intel-rapl:0", 7)
        (root / "intel-rapl:0" / "energy_uj").chmod(0)
        assert open_rapl(root) == (f"{root / 'intel-rapl:0' / 'energy_uj'} unreadable "
                                   "(Permission denied)")


@pytest.mark.parametrize("runs, says", [
    ([EnergySample(seconds=1.0, flops=0.0, joules=4.0)], "needs 2 runs or more, got 1"),
    ([EnergySample(seconds=1.0, flops=1e9, joules=4.0),
      EnergySample(seconds=2.0, flops=2e9, joules=8.0)], "cannot tell idle power"),
    ([EnergySample(seconds=1.0, flops=0.0, joules=4.0),  # more FLOPs, less energy
      EnergySample(seconds=1.0, flops=1e10, joules=1.0)], "j_per_flop >= 0 must hold"),
    ([EnergySample(seconds=1.0, flops=0.0, joules=0.0),
      EnergySample(seconds=1.0, flops=1e10, joules=1.0),
      EnergySample(seconds=3.0, flops=1e10, joules=0.5)], "idle_w >= 0 must hold"),
])
def test_a_fit_that_cannot_be_made_or_is_negative_is_one_line(runs, says):
    with pytest.raises(ValueError, match=says) as err:
        fit_power(runs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("field, value", [("joules", float("nan")), ("seconds", 0.0),
                                          ("flops", -1.0), ("joules", float("inf"))])
def test_a_bad_sample_is_one_line_naming_the_field(field, value):
    good = {"seconds": 1.0, "flops": 1.0, "joules": 1.0}
    with pytest.raises(ValueError, match=f"energy sample: {field}") as err:
        EnergySample(**{**good, field: value})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="idle_w >= 0 must hold, got nan"):
        PowerFit(idle_w=float("nan"), j_per_flop=0.0, samples=2)


def test_the_fitted_keys_are_written_in_place_of_power_w(tmp_path):
    from test_kernels import synthetic

    host = load_profile("host")
    assert host.unit("cpu").power_w > 0
    power = fit_power(noisy_runs(4.0, 150 * PJ, noise=0.0))
    cal = calibrated(host, fit(synthetic(), host), power=power)
    (tmp_path / "cal.toml").write_text(to_toml(cal))
    cpu = load_profile(tmp_path / "cal.toml").unit("cpu")
    assert cpu.idle_w == pytest.approx(4.0) and cpu.power_w == 0.0
    assert cpu.j_per_flop == {"default": pytest.approx(150 * PJ)}
    assert load_profile(tmp_path / "cal.toml").hash == cal.hash
    assert energy_line(host.unit("cpu"), power).startswith(
        "energy: unit cpu: idle_w 0 -> 4 W, pj_per_flop[default] 0 -> 150 (power_w ")


def test_calibrate_here_measures_energy_where_rapl_reads_and_else_says_so(tmp_path):
    """On this host (no RAPL here: /sys/class/powercap absent) the estimate line; with a
    directory of counters (which stand still: every run costs 0 J), the fitted keys."""
    here = open_rapl()
    out = tmp_path / "host-cal.toml"
    proc = cli("calibrate", "--hw", "host", "--model", "seed_te", "-o", str(out),
               "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    if isinstance(here, str):
        assert (f"energy: no RAPL counters readable here ({here}); the profile's energy "
                "figures stay datasheet estimates") in proc.stdout.splitlines()
        assert load_profile(out).unit("cpu").j_per_flop == {}
    root = powercap(tmp_path, {"intel-rapl:0": (123, 10**12)})
    proc = cli("calibrate", "--hw", "host", "--model", "seed_te", "-o", str(out),
               "--repeat", "1", "--powercap", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "energy: unit cpu: idle_w 0 -> 0 W, pj_per_flop[default] 0 -> 0" in proc.stdout
    cpu = load_profile(out).unit("cpu")
    assert cpu.j_per_flop == {"default": 0.0} and cpu.power_w == 0.0
