"""Build placements of one module in parallel worker processes, one exported library each.

Workers are TVM ``PopenWorker`` processes (a fresh interpreter each): the module reaches
them through :mod:`autoplace.deploy.portable` files, each worker loads it once. A build that
raises, crashes its worker or exceeds ``timeout`` is an error string, never an exception.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm.support.popen_pool import PopenPoolExecutor

from autoplace.deploy import portable
from autoplace.deploy.compiler import compile_placed
from autoplace.deploy.place import apply
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.space import Placement

# Per worker process: the module, graph and profile, set once by _init_worker.
_WORKER: dict = {}


def _init_worker(directory: str, graph: dict, profile: Profile, memory_scopes: str,
                 kernels: str | None = None) -> None:
    warnings.simplefilter("ignore")  # the parent process has said it once already
    from autoplace.deploy.kernel_db import KernelDatabase

    _WORKER.update(mod=portable.load(directory), graph=OpGraph.from_dict(graph),
                   profile=profile, memory_scopes=memory_scopes,
                   kernels=KernelDatabase(kernels) if kernels else None)


def first_line(exc: BaseException) -> str:
    """``Type: first non-empty line of the message`` (TVM errors carry long tracebacks)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")
    return f"{type(exc).__name__}: {text}"[:400]


def _build_task(placement_json: str, out_path: str) -> dict:
    t0 = time.perf_counter()
    try:
        placed = apply(_WORKER["mod"], Placement.from_json(placement_json), _WORKER["profile"],
                       graph=_WORKER["graph"], memory_scopes=_WORKER["memory_scopes"],
                       kernels=_WORKER["kernels"])
        compile_placed(placed).export_library(out_path)
    except Exception as exc:  # noqa: BLE001 - any build failure is a result
        return {"error": first_line(exc)}
    return {"path": out_path, "seconds": time.perf_counter() - t0}


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """One built candidate: the library path, or the reason it failed."""

    path: str | None = None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.path is not None


class BuildPool:
    """Builds placements of ``mod`` into libraries under ``workdir`` with ``workers`` processes,
    each kernel scheduled by the database in directory ``kernels`` (else the default
    schedule)."""

    def __init__(self, mod: tvm.IRModule, graph: OpGraph, profile: Profile, workdir: str | Path,
                 *, workers: int = 2, timeout: float | None = None,
                 memory_scopes: str = "global", kernels: str | Path | None = None):
        if workers < 1:
            raise ValueError(f"workers >= 1 must hold, got workers={workers}")
        self.workdir = Path(workdir)
        saved = portable.save(mod, self.workdir / "module")
        self._count = 0
        self._pool = PopenPoolExecutor(
            max_workers=workers, timeout=timeout, initializer=_init_worker,
            initargs=(str(saved), graph.to_dict(), profile, memory_scopes,
                      str(kernels) if kernels else None))

    def build(self, placements: Sequence[Placement]) -> list[Artifact]:
        """Build each placement (in parallel); same order and length as the input."""
        futures = []
        for p in placements:
            self._count += 1
            out = self.workdir / f"cand{self._count}-{os.getpid()}.so"
            futures.append(self._pool.submit(_build_task, p.to_json(), str(out)))
        return [self._collect(f) for f in futures]

    @staticmethod
    def _collect(future) -> Artifact:
        try:
            res = future.result()
        except TimeoutError:
            return Artifact(error="build timed out")
        except Exception as exc:  # noqa: BLE001 - a crashed worker is a failed build
            return Artifact(error=f"build worker failed: {first_line(exc)}")
        if "error" in res:
            return Artifact(error=res["error"])
        return Artifact(path=res["path"], seconds=res["seconds"])

    def close(self) -> None:
        self._pool.shutdown(wait=False)
