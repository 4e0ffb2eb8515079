"""TVM's tensor intrinsics, imported in seconds rather than minutes.

MetaSchedule's ``TuneContext`` starts with ``import tvm.s_tir.tensor_intrin``, which parses the
TVMScript of every intrinsic TVM ships (CUDA, ROCm, ARM, x86, Hexagon, RISC-V, Metal): some
hundreds of ``T.prim_func``s, each of which calls ``inspect.stack()`` twice (TVM's parser
reads its caller's frames for closure variables and the decorator's line). For every frame
whose file is not on disk (``<frozen importlib._bootstrap>``, ``<ast>``, ``<string>``: most of
an import's stack), ``inspect`` looks its module up by scanning every loaded module again,
and ``import tvm`` alone loads some 2,000: the import took 66 s in a fresh interpreter on a
2-core AMD EPYC, 107 s in ``autoplace tune-kernels`` (3,000 modules), every time a job tuned.

:func:`import_tensor_intrinsics` imports it with ``inspect.stack`` answering what it answered
before, but each such file looked up once: the frames' list is the same (same frames, same
lines), and a file no module was loaded from maps to no module, which is what the scan finds
for it. ``inspect.stack`` is replaced for the import only, then restored. The same 124
intrinsics register, with the same TVMScript, either way (checked once by hand; the test
checks the stack and the restoring).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys


def import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (registering TVM's tensor intrinsics), each frame
    file without a module looked up once (module docstring); a no-op once imported."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    with frames_looked_up_once():
        import tvm.s_tir.tensor_intrin  # noqa: F401


@contextlib.contextmanager
def frames_looked_up_once():
    """Within: ``inspect.stack()`` as it is, but a frame file that is not on disk and from
    which no loaded module came is remembered as such (``inspect.modulesbyfile``), not
    looked up again by scanning every loaded module."""
    original = inspect.stack

    def stack(context: int = 1) -> list[inspect.FrameInfo]:
        caller = sys._getframe(1)
        _remember_fileless(caller)
        return inspect.getouterframes(caller, context)  # (as inspect.stack makes it)

    inspect.stack = stack
    try:
        yield
    finally:
        inspect.stack = original


#: what ``inspect.modulesbyfile`` maps a file no module came from to (no module: None)
NO_MODULE = "<no module>"


def _remember_fileless(frame) -> None:
    """For each file of ``frame`` and its callers that is not on disk: look its module up
    once (the scan also records every loaded module's file); none found, remember so."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name not in inspect.modulesbyfile and not os.path.exists(name):
            if inspect.getmodule(frame, name) is None and name not in inspect.modulesbyfile:
                inspect.modulesbyfile[name] = NO_MODULE
        frame = frame.f_back
