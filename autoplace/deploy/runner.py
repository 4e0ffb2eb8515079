"""Stage libraries run as a pipeline on this host.

:class:`PipelineRunner` runs a thread per stage with a bounded queue (``depth`` items: 2 is a
double buffer) between consecutive stages; an item carries every value a later stage still
reads (a skip connection is forwarded stage to stage, as on a mesh). Imports TVM.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from autoplace.deploy.artefact import (
    PIPELINE_FORMAT,
    PIPELINE_VERSION,
    field,
    loadable,
    member,
    read_manifest,
)
from autoplace.deploy.compiler import META_FUNC
from autoplace.deploy.run import to_numpy
from autoplace.deploy.stages import OUTPUT, STAGE_FORMAT
from autoplace.deploy.targets import BuildError

_STOP = object()


def stage_meta(lib) -> dict:
    """The metadata a stage library carries; BuildError if it is not a stage library."""
    return _meta_of(relax.VirtualMachine(lib, tvm.cpu()))


def _meta_of(vm) -> dict:
    try:
        meta = json.loads(str(vm[META_FUNC]()))
    except Exception as exc:  # noqa: BLE001 - TVM raises many kinds here
        raise BuildError(f"not an autoplace library: {str(exc).splitlines()[0]}") from None
    if meta.get("format") != STAGE_FORMAT:
        raise BuildError("not a stage library (autoplace compile --objective throughput "
                         "writes them)")
    return meta


def carried(metas: Sequence[dict]) -> list[list[str]]:
    """Per stage, the values the item leaving it holds: those a later stage reads, produced
    by it or before it (or graph inputs), and for the last stage the output."""
    out = []
    for s in range(len(metas)):
        later = {i["name"] for m in metas[s + 1:] for i in m["inputs"]}
        here = {i["name"] for m in metas[:s + 1] for i in m["inputs"]}
        made = {o for m in metas[:s + 1] for o in m["outputs"]}
        out.append(sorted(later & (here | made)) if s < len(metas) - 1 else [OUTPUT])
    return out


@dataclass(frozen=True)
class StreamRun:
    """Outputs of a stream of inferences (in order) and the wall time it took."""

    outputs: list[list[np.ndarray]]
    seconds: float

    @property
    def throughput(self) -> float:
        """Inferences per second."""
        return len(self.outputs) / self.seconds


class PipelineRunner:
    """The stage libraries (in stage order) as a pipeline on this host's CPU."""

    def __init__(self, libs: Sequence, *, depth: int = 2):
        if depth < 1:
            raise ValueError(f"depth >= 1 must hold, got depth={depth}")
        self.vms = [relax.VirtualMachine(lib, tvm.cpu()) for lib in libs]
        self.metas = [_meta_of(vm) for vm in self.vms]
        if not libs:
            raise BuildError("a pipeline needs at least one stage library, got none")
        if [m["stage"] for m in self.metas] != list(range(len(libs))):
            raise BuildError(f"stage libraries out of order: stages "
                             f"{[m['stage'] for m in self.metas]}")
        self.depth, self.carry = depth, carried(self.metas)
        made = {o for m in self.metas for o in m["outputs"]}
        self.inputs = sorted({i["name"] for m in self.metas for i in m["inputs"]} - made)

    def input_specs(self) -> list[dict]:
        """Name, shape and dtype of each graph input the pipeline reads."""
        specs = {i["name"]: i for m in self.metas for i in m["inputs"]}
        return [specs[name] for name in self.inputs]

    def _call(self, s: int, item: dict) -> dict:
        meta = self.metas[s]
        out = self.vms[s]["main"](*[item[i["name"]] for i in meta["inputs"]])
        values = {**item, **dict(zip(meta["outputs"], out))}
        return {k: values[k] for k in self.carry[s]}

    def _feed(self, feed: dict) -> dict:
        missing = [k for k in self.inputs if k not in feed]
        if missing:
            raise ValueError(f"inputs {missing} missing (the pipeline reads {self.inputs})")
        return {k: tvm.runtime.tensor(np.asarray(feed[k])) for k in self.inputs}

    def run_sequential(self, feeds: Sequence[dict]) -> StreamRun:
        """The same stages, one inference at a time (the unpipelined yardstick)."""
        t0, outputs = time.perf_counter(), []
        for feed in feeds:
            item = self._feed(feed)
            for s in range(len(self.vms)):
                item = self._call(s, item)
            outputs.append(to_numpy(item[OUTPUT]))
        return StreamRun(outputs, time.perf_counter() - t0)

    def run(self, feeds: Sequence[dict]) -> StreamRun:
        """The stream through the pipeline: a thread per stage, bounded queues."""
        items = [self._feed(f) for f in feeds]
        queues = [queue.Queue(maxsize=self.depth) for _ in range(len(self.vms) + 1)]
        errors: list = []
        threads = [threading.Thread(target=self._loop, args=(s, queues[s], queues[s + 1],
                                                               errors), daemon=True)
                   for s in range(len(self.vms))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        feeder = threading.Thread(target=_put_all, args=(queues[0], items), daemon=True)
        feeder.start()
        outputs = []
        while (item := queues[-1].get()) is not _STOP:
            outputs.append(to_numpy(item[OUTPUT]))
        seconds = time.perf_counter() - t0
        for t in [feeder, *threads]:
            t.join()
        if errors:
            s, exc = errors[0]
            raise BuildError(f"stage {s} failed: {str(exc).splitlines()[0]}")
        return StreamRun(outputs, seconds)

    def _loop(self, s: int, q_in: queue.Queue, q_out: queue.Queue, errors: list) -> None:
        """Stage ``s``: take an item, run, pass it on; after a failure, drain and stop."""
        while (item := q_in.get()) is not _STOP:
            if errors:
                continue
            try:
                q_out.put(self._call(s, item))
            except Exception as exc:  # noqa: BLE001 - reported by run()
                errors.append((s, exc))
        q_out.put(_STOP)


def _put_all(q: queue.Queue, items: list) -> None:
    for item in items:
        q.put(item)
    q.put(_STOP)


def load_stage_libraries(manifest_path: str | Path) -> tuple[dict, list]:
    """A compiled pipeline's manifest and its stage libraries, each checked (inside the
    manifest's directory, of its recorded SHA-256) before it is loaded."""
    path = Path(manifest_path)
    manifest = read_manifest(path, PIPELINE_FORMAT, (PIPELINE_VERSION,))
    stages = field(manifest, "stages", list, path)
    files = []
    for n, stage in enumerate(stages):
        entry = stage.get("library") if isinstance(stage, dict) else None
        files.append(loadable(path.parent, member(path.parent, entry, f"stages[{n}].library"),
                              f"stages[{n}].library"))
    libs = []
    for f in files:
        try:
            libs.append(tvm.runtime.load_module(str(f)))
        except Exception as exc:  # noqa: BLE001 - TVM raises many kinds here
            raise BuildError(f"{f}: cannot load stage library: "
                             f"{str(exc).splitlines()[0]}") from None
    return manifest, libs
