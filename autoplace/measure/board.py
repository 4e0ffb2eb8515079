"""The board side of the runtime over RPC: a job's kernels once, then only placements.

Registered by ``autoplace serve`` (:func:`autoplace.measure.server.register_functions`) in
each session of a board:

- ``autoplace.runtime_load(job_json)``: the job's files have been uploaded into the
  session's work directory (the program and weights, the graph, the profile, a kernel
  library per unit target); builds the runtime from them (nothing is compiled on the board);
- ``autoplace.runtime_time(placement_json, settings_json)``: assembles one placement and
  times it; JSON ``{"times": [...], "busy": {...}}`` or ``{"error": kind, "detail": ...}``.

Every name in ``job_json`` is a file of the session's work directory (confined as every
path of a session is); a file over :data:`MAX_JOB_FILES` is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

#: remote function names (the client in :mod:`autoplace.measure.rpc_runtime` calls them)
RUNTIME_LOAD_FUNC = "autoplace.runtime_load"
RUNTIME_TIME_FUNC = "autoplace.runtime_time"
#: the most files a job names (a library per unit target, and four more)
MAX_JOB_FILES = 64


class RuntimeService:
    """One session's runtime: made by :meth:`load`, used by :meth:`time`."""

    def __init__(self, workpath):
        self.workpath = workpath  # name -> confined path in the session's directory
        self.runtime = None

    def load(self, job_json: str) -> dict:
        from autoplace.graph import OpGraph
        from autoplace.hardware.load import profile_from_toml
        from autoplace.runtime import Runtime
        from autoplace.runtime.program import read_program_files

        job = json.loads(job_json)
        names = [job["program"], job["weights"], job["graph"], job["profile"],
                 *job["libraries"].values()]
        if len(names) > MAX_JOB_FILES:
            raise ValueError(f"a job of {len(names)} files is over the limit of "
                             f"{MAX_JOB_FILES}")
        path = {n: Path(self.workpath(n)) for n in names}
        graph = OpGraph.from_dict(json.loads(path[job["graph"]].read_text()),
                                  source="rpc job")
        profile = profile_from_toml(path[job["profile"]].read_text(), "rpc job profile")
        files = {u: path[n] for u, n in job["libraries"].items()}
        if self.runtime is not None:
            self.runtime.close()
        program = read_program_files(path[job["program"]], path[job["weights"]])
        self.runtime = Runtime(program, graph, profile, cache_dir=path[job["program"]].parent,
                               files=files)
        return {"graph_fp": graph.fingerprint, "profile_hash": profile.hash}

    def time(self, placement_json: str, settings_json: str) -> dict:
        from autoplace.deploy.run import TimeSettings, random_inputs
        from autoplace.runtime import BuildError, PoolError, RunError
        from autoplace.space import Placement

        rt = self.runtime
        if rt is None:
            raise ValueError(f"call {RUNTIME_LOAD_FUNC} first")
        settings = json.loads(settings_json)
        try:
            a = rt.assemble(Placement.from_json(placement_json))
            rt.feed(a, random_inputs({"inputs": [s.to_dict() for s in rt.program.inputs]},
                                     int(settings.pop("seed", 0))))
            times = rt.time(a, TimeSettings(**settings))
        except PoolError as exc:
            return {"error": "out_of_memory", "detail": str(exc)}
        except BuildError as exc:
            return {"error": "build", "detail": str(exc)}
        except RunError as exc:
            return {"error": "run", "detail": str(exc)}
        return {"times": times, "busy": rt.busy_s(a, rt.last_trace)}


def answer(fn, *args) -> str:
    """``fn(*args)`` as JSON, or ``{"error": ...}``: a session must never die (a session
    process that dies stops a TVM 0.27 server from ever serving again)."""
    try:
        return json.dumps(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - see the docstring
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]})


def register_runtime() -> None:
    """Register the runtime's remote functions (in a server's worker process)."""
    import tvm

    service = RuntimeService(lambda name: tvm.get_global_func("tvm.rpc.server.workpath")(name))
    tvm.register_global_func(RUNTIME_LOAD_FUNC, lambda job: answer(service.load, str(job)),
                             override=True)
    tvm.register_global_func(RUNTIME_TIME_FUNC, lambda p, s: answer(service.time, str(p),
                                                                      str(s)), override=True)
