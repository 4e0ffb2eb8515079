"""How MetaSchedule's builder workers build a candidate kernel (``LocalBuilder``'s
``f_build``): as its ``default_build`` does, without importing every tensor intrinsic TVM
ships first.

``default_build`` starts with ``import tvm.s_tir.tensor_intrin``, which parses the
TVMScript of TVM's CUDA, ROCm, ARM, x86, Hexagon, RISC-V and Metal intrinsics: 16-19 s on
this 2-core host (the CUDA ones alone 12 s). ``LocalBuilder`` starts a new pool of worker
processes for every batch it builds (TVM's workaround for a leak in long-lived workers), so
every batch paid it: ``tune-kernels`` spent ~20 s per build of one or two candidates, most
of its time (its builder now keeps its workers: :mod:`autoplace.deploy.builder_pool`). A
candidate reaches the builder already scheduled (its trace applied, any tensorized block
replaced by the intrinsic's body in the tuning process), so building it needs no intrinsic
registry. Kept a leaf module: a worker imports it to unpickle the
function.
"""

from __future__ import annotations


def build_candidate(mod, target, params):
    """Build one scheduled candidate for ``target`` as a build compiles its schedule (on a
    CPU, its ``exp``, ``erf`` and ``tanh`` as polynomials:
    :func:`~autoplace.deploy.fast_math.for_target`; ``params`` must be None, as for
    ``default_build``)."""
    import tvm
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    if params:
        raise ValueError("a candidate is built without bound parameters")
    from autoplace.deploy.fast_math import for_target
    from autoplace.deploy.prepack import measurable

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(measurable(mod))
    target = tvm.target.Target(target)
    for gv, func in list(mod.functions.items()):  # (the pass's result: this module's own)
        if isinstance(func, tvm.tirx.PrimFunc):
            mod[gv] = for_target(func, target)
    return tvm_build(mod, target=target)


def build_and_export(f_build, compiler: str | None, mod, target, params: bytes | None) -> str:
    """In a builder worker: ``f_build`` the candidate (``params``: its bound parameters, as
    ``tvm.runtime.save_param_dict`` wrote them), then write it where MetaSchedule's
    runner reads it; its path. With ``compiler`` (a board of another architecture), a shared
    library that compiler links (the board then needs no compiler of its own); else, as
    MetaSchedule's ``default_export``, a tar of objects the runner's side links."""
    import os
    import tempfile

    from tvm.runtime import load_param_dict
    from tvm.support import cc
    from tvm.support.tar import tar

    built = f_build(mod, target, None if params is None else load_param_dict(params))
    fcompile = tar if compiler is None else cc.cross_compiler(compiler)
    suffix = tar.output_format if compiler is None else "so"
    path = os.path.join(tempfile.mkdtemp(), f"tvm_tmp_mod.{suffix}")
    built.export_library(path, fcompile=fcompile)
    return path
