"""A compiled pipeline's stages timed on boards through TVM RPC (docs/pipeline.md).

Each stage's library goes to a server of its key (the key of the unit that runs the stage's
ops); the pipeline's period is then the slowest stage's time. Imports TVM.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autoplace.deploy import BuildError, Loaded, TimeSettings, random_inputs
from autoplace.deploy.run import median
from autoplace.measure.server import parse_addr, registered


def time_stages_rpc(files: Sequence[str | Path], keys: Sequence[str], tracker: str, *,
                    settings: TimeSettings, seed: int = 0) -> list[float]:
    """Median seconds of each stage library on a server of its key.

    One session per key serves all of that key's stages (a server runs one session at a
    time, so a second request for the same key would wait for the first to end)."""
    from tvm import rpc

    host, port = parse_addr(tracker, "--rpc-tracker")
    sessions, times = {}, []
    for f, key in zip(files, keys):
        if key not in sessions:
            if registered(tracker, key) == 0:
                raise BuildError(f"rpc: no server under key {key!r} on tracker {tracker} "
                                 f"(start one: autoplace serve --hw PROFILE --rpc-tracker "
                                 f"{tracker} --rpc-key {key})")
            sessions[key] = rpc.connect_tracker(host, port).request(key, session_timeout=600.0)
        sess = sessions[key]
        sess.upload(str(f))
        loaded = Loaded(sess.load_module(Path(f).name), device=sess.device)
        args = loaded.inputs(random_inputs(loaded.meta, seed))
        times.append(median(loaded.time(args, settings)))
    sessions.clear()
    return times
