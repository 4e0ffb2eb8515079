"""Energy calibration: a unit's ``idle_w`` and ``pj_per_flop`` fitted to what Linux's RAPL
counters measured while its kernels ran (docs/build.md, "Calibration").

RAPL's package domains (``/sys/class/powercap/intel-rapl:<N>``, the sub-domains below them
are parts of a package) count the energy the processor used, in microjoules, in
``energy_uj``; past ``max_energy_range_uj`` a counter starts again from 0. A run of ``s``
seconds computing ``f`` FLOPs is taken to cost ``idle_w * s + j_per_flop * f``: the least
squares over the runs (an idle one, and one per model) give both. Where no counter can be
read (no RAPL, or ``energy_uj`` readable by root only), :func:`open_rapl` says why in one
line and the profile's energy figures stay datasheet estimates.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoplace.hardware.profile import Unit

POWERCAP = Path("/sys/class/powercap")
#: how long the runs of one sample last at least (RAPL updates about every millisecond)
SAMPLE_S = 1.0


@dataclass(frozen=True)
class Rapl:
    """The package domains' counters (directories) and the range each wraps at (µJ)."""

    domains: tuple[Path, ...]
    ranges: tuple[int, ...]

    def read(self) -> tuple[int, ...]:
        """Each domain's counter, in µJ."""
        return tuple(_counter(d / "energy_uj") for d in self.domains)

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float:
        """Joules between two :meth:`read`\\ s; a counter that wrapped went round once."""
        return 1e-6 * sum(a - b if a >= b else a + r - b
                          for b, a, r in zip(before, after, self.ranges))


def _counter(path: Path) -> int:
    """A counter file's integer; ValueError in one line naming the file."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"{path} unreadable ({exc.strerror or exc})") from None
    if not text.isdigit():
        raise ValueError(f"{path}: {text!r} is not a counter")
    return int(text)


def open_rapl(root: Path = POWERCAP) -> Rapl | str:
    """The package domains' counters under ``root``, read once to be sure; or one line
    saying why none can be read."""
    if not root.is_dir():
        return f"{root} absent"
    domains = tuple(sorted((p for p in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", p.name)),
                           key=lambda p: int(p.name.split(":")[1])))
    if not domains:
        return f"no intel-rapl:<N> package domain in {root}"
    try:
        rapl = Rapl(domains, tuple(_counter(d / "max_energy_range_uj") for d in domains))
        rapl.read()
    except ValueError as exc:
        return str(exc)
    return rapl


@dataclass(frozen=True, kw_only=True)
class EnergySample:
    """Runs that took ``seconds``, computed ``flops`` and cost ``joules`` (measured)."""

    seconds: float
    flops: float
    joules: float

    def __post_init__(self) -> None:
        for name in ("seconds", "flops", "joules"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"energy sample: {name} must be a finite number >= 0, got "
                                 f"{value!r}")
        if self.seconds <= 0:
            raise ValueError(f"energy sample: seconds > 0 must hold, got {self.seconds!r}")


def sample(rapl: Rapl, run: Callable[[], object], flops: float, *,
           least_s: float = SAMPLE_S) -> EnergySample:
    """Call ``run`` (which computes ``flops``) until ``least_s`` have passed, between two
    reads of the counters."""
    calls, before, start = 0, rapl.read(), time.perf_counter()
    while calls == 0 or time.perf_counter() - start < least_s:
        run()
        calls += 1
    seconds, after = time.perf_counter() - start, rapl.read()
    return EnergySample(seconds=seconds, flops=calls * flops, joules=rapl.joules(before, after))


def idle_sample(rapl: Rapl, seconds: float = SAMPLE_S) -> EnergySample:
    """The counters over ``seconds`` of sleep: the idle power's run."""
    return sample(rapl, lambda: time.sleep(seconds), 0.0, least_s=0.0)


@dataclass(frozen=True, kw_only=True)
class PowerFit:
    """A unit's fitted ``idle_w`` (W) and ``j_per_flop`` (J), from ``samples`` runs."""

    idle_w: float
    j_per_flop: float
    samples: int

    def __post_init__(self) -> None:
        for name, value in (("idle_w", self.idle_w), ("j_per_flop", self.j_per_flop)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"energy fit: {name} >= 0 must hold, got {value!r} from "
                                 f"{self.samples} runs (the runs do not cost idle power x "
                                 "seconds + energy per FLOP x FLOPs; other load here?)")


def fit_power(samples: Sequence[EnergySample]) -> PowerFit:
    """Least squares of ``joules = idle_w * seconds + j_per_flop * flops``; ValueError in
    one line if the samples cannot tell the two apart or give a value < 0."""
    if len(samples) < 2:
        raise ValueError(f"energy fit: needs 2 runs or more, got {len(samples)}")
    a = np.array([[s.seconds, s.flops] for s in samples], dtype=np.float64)
    b = np.array([s.joules for s in samples], dtype=np.float64)
    scale = np.linalg.norm(a, axis=0)  # seconds and FLOPs are 1e9 apart: solve in units
    scale[scale == 0] = 1.0
    x, _, rank, _ = np.linalg.lstsq(a / scale, b, rcond=None)
    if rank < 2:
        raise ValueError(f"energy fit: the {len(samples)} runs cannot tell idle power from "
                         "energy per FLOP (their FLOPs per second are all alike)")
    idle, per_flop = x / scale
    return PowerFit(idle_w=float(idle), j_per_flop=float(per_flop), samples=len(samples))


def energy_line(unit: Unit, power: PowerFit | None, why_not: str = "") -> str:
    """What calibrate says of ``unit``'s energy: its fitted figures (beside the profile's),
    or ``why_not`` and that they stay datasheet estimates."""
    if power is None:
        return f"energy: {why_not}; the profile's energy figures stay datasheet estimates"
    return (f"energy: unit {unit.name}: idle_w {unit.idle_w:g} -> {power.idle_w:.4g} W, "
            f"pj_per_flop[default] {unit.joules_per_flop('default') * 1e12:g} -> "
            f"{power.j_per_flop * 1e12:.4g} (power_w {unit.power_w:g} -> 0), from the RAPL "
            f"package energy of {power.samples} runs")
