"""Run and time a built module, here or on an RPC server, from the metadata it carries."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from autoplace.deploy.compiler import META_FUNC


@dataclass(frozen=True, kw_only=True)
class TimeSettings:
    """How a module is timed with TVM's time evaluator.

    ``warmup`` untimed runs, then ``repeat`` measurements of ``number`` runs each (their
    mean); the result is the median of the repeats. ``min_repeat_ms`` raises ``number``
    until one repeat takes at least that long (0: never).
    """

    number: int = 1
    repeat: int = 5
    warmup: int = 1
    min_repeat_ms: int = 0

    def __post_init__(self) -> None:
        for name in ("number", "repeat"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} >= 1 must hold, got {name}={getattr(self, name)}")
        for name in ("warmup", "min_repeat_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} >= 0 must hold, got {name}={getattr(self, name)}")


#: The default: one warm-up, the median of five single runs.
DEFAULT_TIMING = TimeSettings()


def random_inputs(meta: dict, seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays for the module's inputs: floats in [0, 1), integers in [0, 10)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in meta["inputs"]:
        dtype = np.dtype(spec["dtype"])
        if np.issubdtype(dtype, np.floating):
            out.append(rng.random(spec["shape"]).astype(dtype))
        else:
            out.append(rng.integers(0, 10, size=spec["shape"]).astype(dtype))
    return out


def to_numpy(value) -> list[np.ndarray]:
    """The output(s) of a VM call as a flat list of numpy arrays."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [a for v in value for a in to_numpy(v)]


class Loaded:
    """A built module in a Relax VM on its devices (local, or remote with ``device``).

    ``lib`` is an Executable or a loaded runtime Module; ``device(type, id)`` makes a
    device (``tvm.device`` here, ``session.device`` through RPC). If the module has a load
    function (``meta["load"]``: the build's ``place_weights``), it runs once here and its
    result, ``weights`` (resident weights on their devices), is passed to every ``main`` call.
    """

    def __init__(self, lib, device: Callable = tvm.device):
        probe = relax.VirtualMachine(lib, device(1, 0))
        self.meta = json.loads(str(probe[META_FUNC]()))
        self.devices = [device(t, i) for t, i in self.meta["devices"]]
        self.vm = relax.VirtualMachine(lib, self.devices)
        load = self.meta.get("load")
        self.weights = self.vm[load]() if load else None

    def _main_args(self, args: Sequence) -> list:
        """The inputs plus, if the module has one, the load function's result.

        It goes through ``set_input`` unchanged because it is a map: the VM moves every
        tensor (and array of tensors) given to ``set_input`` onto its first device.
        """
        return [*args, self.weights] if self.weights is not None else list(args)

    def inputs(self, arrays: Sequence[np.ndarray]) -> list:
        """``arrays`` as tensors on the input device (vdevice 0)."""
        return [tvm.runtime.tensor(a, device=self.devices[0]) for a in arrays]

    def run(self, args: Sequence) -> list[np.ndarray]:
        """One call of ``main``; the outputs as numpy arrays."""
        self.vm.set_input("main", *self._main_args(args))
        self.vm.invoke_stateful("main")
        return to_numpy(self.vm.get_outputs("main"))

    def time(self, args: Sequence, settings: TimeSettings) -> list[float]:
        """Seconds per run of ``main``, one value per repeat (after the warm-up runs).

        Uses the VM's stateful API: ``set_input`` copies the inputs into VM-owned tensors,
        which is what makes ``to_vdevice`` of an input work through RPC (a remote argument
        reaches the VM as a bare ``DLTensor*`` that ``vm.builtin.to_device`` refuses).
        """
        self.vm.set_input("main", *self._main_args(args))
        for _ in range(settings.warmup):
            self.vm.invoke_stateful("main")
        timer = self.vm.time_evaluator("invoke_stateful", self.devices[0],
                                       number=settings.number, repeat=settings.repeat,
                                       min_repeat_ms=settings.min_repeat_ms)
        return [float(x) for x in timer("main").results]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))
