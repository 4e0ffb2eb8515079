"""Bounds on a result a user sets: ``--max-latency``, ``--max-energy``, ``--max-memory``.

:class:`Limits` admits a measured result or not (:meth:`Limits.admits`), and a batch of
simulated rows (:meth:`Limits.within`): what ``best`` and ``compile`` choose among
(:mod:`autoplace.records.front`) and what a tuning job searches within
(:meth:`autoplace.measure.objective.Objective.bounded`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from autoplace.measure.base import MeasureResult

if TYPE_CHECKING:
    from autoplace.measure.batch import BatchOutput
    from autoplace.space import SearchSpace

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6,
          "gb": 10**9}


@dataclass(frozen=True)
class Limits:
    """Bounds a result must keep to be chosen or to be a job's best: seconds of latency,
    joules per inference, and bytes at the peak per memory scope (by scope name). None /
    empty: no bound."""

    latency_s: float | None = None
    energy_j: float | None = None
    memory: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bounds = [("--max-latency", self.latency_s), ("--max-energy", self.energy_j),
                  *((f"--max-memory {k}", v) for k, v in self.memory.items())]
        for name, value in bounds:
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: a bound must be a finite number > 0, got {value!r}")

    @classmethod
    def parse(cls, latency_s: float | None = None, energy_j: float | None = None,
              memory: Sequence[str] = ()) -> Limits:
        """Limits from command-line values; ``memory`` items are ``SCOPE=BYTES`` (``4MiB``,
        ``512KiB``, ``4194304``); ValueError in one line naming the bad one."""
        bounds = {}
        for item in memory:
            scope, sep, size = item.partition("=")
            if not sep or not scope:
                raise ValueError(f"--max-memory {item!r}: not SCOPE=BYTES (e.g. sram1=4MiB)")
            bounds[scope] = parse_bytes(size, f"--max-memory {item}")
        return cls(latency_s=latency_s, energy_j=energy_j, memory=bounds)

    def __bool__(self) -> bool:
        return self.latency_s is not None or self.energy_j is not None or bool(self.memory)

    def keeps(self, latency, energy, peak_of: Callable[[str], object]) -> np.ndarray:
        """Per row of figures (arrays or numbers; NaN: the row has none, which keeps no
        bound), whether it keeps every bound: ``latency`` seconds, ``energy`` joules (read
        only with an energy bound), ``peak_of(scope)`` the bytes held in ``scope``."""
        ok = np.ones(np.shape(latency), dtype=bool)
        for bound, value in self._bounded(latency, energy, peak_of):
            ok &= value <= bound
        return ok

    def _bounded(self, latency, energy, peak_of: Callable[[str], object]):
        """``(bound, figures)`` of each bound set, the figures as float arrays (the
        arguments of :meth:`keeps`)."""
        figures = [(self.latency_s, latency), (self.energy_j, energy)]
        figures += [(bound, peak_of(scope)) for scope, bound in self.memory.items()]
        for bound, value in figures:
            if bound is not None:
                yield bound, np.asarray(value, dtype=np.float64)

    def admits(self, result: MeasureResult) -> bool:
        """Whether a valid ``result`` keeps every bound (a bound on a figure the result
        lacks, e.g. energy on a profile without energy figures, is not kept)."""
        if not result.ok:
            return False
        energy = math.nan if result.energy_j is None else result.energy_j
        return bool(self.keeps(result.latency_s, energy,
                               lambda scope: result.peak_bytes.get(scope, math.nan)))

    def unknown_scopes(self, scopes: Iterable[str]) -> list[str]:
        """The scopes bounded that are not among ``scopes`` (a misspelt name)."""
        known = set(scopes)
        return [s for s in self.memory if s not in known]

    @property
    def per_unit(self) -> bool:
        """Whether :meth:`within` needs a batch's figures per unit and scope (energy,
        peaks)."""
        return self.energy_j is not None or bool(self.memory)

    def within(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per simulated row, whether it keeps every bound (``out`` simulated per unit
        where :attr:`per_unit`); its peaks are counted as the capacity check counts them."""
        return self.keeps(*self._of_batch(space, out))

    def excess(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per simulated row, how far it is beyond the bounds: the sum over the bounds of
        the share by which its figure exceeds each (0.25: 25% over one bound; 0 where it
        keeps them all; infinite where it lacks a bounded figure)."""
        return self.beyond(*self._of_batch(space, out))

    def beyond(self, latency, energy, peak_of: Callable[[str], object]) -> np.ndarray:
        """Per row of figures (:meth:`keeps`'s arguments), how far beyond the bounds it is,
        as :meth:`excess` counts it."""
        over = np.zeros(np.shape(latency))
        for bound, value in self._bounded(latency, energy, peak_of):
            share = value / bound - 1.0
            over += np.where(np.isnan(share), np.inf, np.maximum(share, 0.0))
        return over

    @staticmethod
    def _of_batch(space: SearchSpace, out: BatchOutput) -> tuple:
        """:meth:`keeps`'s arguments for a simulated batch (whole bytes per scope)."""
        index = space.profile.scope_index
        return out.latency, out.energy, lambda scope: np.floor(out.peak[:, index[scope]])

    def text(self) -> str:
        """The bounds as the options that set them (empty: none)."""
        parts = [f"--max-latency {self.latency_s!r}" if self.latency_s is not None else "",
                 f"--max-energy {self.energy_j!r}" if self.energy_j is not None else ""]
        parts += [f"--max-memory {k}={v:.0f}" for k, v in sorted(self.memory.items())]
        return " ".join(p for p in parts if p)


def parse_bytes(text: str, where: str) -> float:
    """Bytes of ``4MiB``, ``512 KiB``, ``1e6``, ``4194304``; ValueError naming ``where``."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", text)
    unit = match and _UNITS.get(match.group(2).lower())
    try:
        value = float(match.group(1)) * unit if unit else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: {text!r} is not a size in bytes (e.g. 4MiB, 4194304)")
    return value
