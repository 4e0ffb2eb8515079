"""TVM's tensor intrinsics imported with each fileless frame looked up once
(autoplace.deploy.intrinsics): ``inspect.stack`` answers as it does without it."""

from __future__ import annotations

import inspect
import sys

from autoplace.deploy.intrinsics import NO_MODULE, frames_looked_up_once, import_tensor_intrinsics

#: a caller whose file is not on disk, as an import's frozen frames and TVM's ``<ast>`` are
FILELESS = "<autoplace-test-fileless>"


def stacks() -> tuple[list, list]:
    """``inspect.stack()`` from a fileless caller, as inspect makes it and inside
    :func:`frames_looked_up_once`."""
    code = compile("got = stack()", FILELESS, "exec")
    plain: dict = {"stack": inspect.stack}
    exec(code, plain)
    with frames_looked_up_once():
        ours: dict = {"stack": inspect.stack}
        exec(code, ours)
    return plain["got"], ours["got"]


def test_the_stack_is_inspects_and_a_fileless_frame_is_looked_up_once():
    inspect.modulesbyfile.pop(FILELESS, None)
    plain, ours = stacks()
    assert len(ours) == len(plain) > 2
    assert [f.filename for f in ours] == [f.filename for f in plain]
    assert ours[0].filename == FILELESS and ours[1].function == "stacks"
    assert [(f.lineno, f.function, f.code_context) for f in ours[2:]] == \
        [(f.lineno, f.function, f.code_context) for f in plain[2:]]
    assert ours[0].code_context is None and plain[0].code_context is None  # (no source)
    assert ours[1].code_context == ["        exec(code, ours)\n"]  # (a file on disk: its line)
    assert inspect.modulesbyfile[FILELESS] == NO_MODULE and sys.modules.get(NO_MODULE) is None
    assert inspect.stack is inspect.getouterframes.__globals__["stack"]  # restored


def test_the_intrinsics_register():
    import_tensor_intrinsics()
    from tvm.s_tir._tensor_intrin import TensorIntrin

    assert "tvm.s_tir.tensor_intrin" in sys.modules
    assert TensorIntrin.get("dot_16x4_vnni") is not None  # (x86's VNNI, one of 124)
    assert inspect.stack is inspect.getouterframes.__globals__["stack"]
