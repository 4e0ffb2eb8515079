"""MetaSchedule's builder workers build candidates without importing every tensor intrinsic
TVM ships (16-19 s per worker process here; LocalBuilder starts new workers for every
batch)."""

from __future__ import annotations

import subprocess
import sys

BUILD = """
import sys
import numpy as np
import tvm
from tvm import te
from autoplace.deploy.candidate_build import build_candidate

A = te.placeholder((64, 64), name="A")
B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
i, j = sch.get_loops(sch.get_sblock("B"))
sch.vectorize(sch.split(j, [None, 8])[1])  # a scheduled candidate, as the tuner sends one
built = build_candidate(sch.mod, tvm.target.Target({"kind": "llvm"}), None)
a = tvm.runtime.tensor(np.arange(4096, dtype="float32").reshape(64, 64))
b = tvm.runtime.tensor(np.zeros((64, 64), dtype="float32"))
built["main"](a, b)
assert (b.numpy() == 2 * a.numpy()).all()
print(any(m.startswith("tvm.s_tir.tensor_intrin") for m in sys.modules))
"""


def test_a_candidate_builds_and_computes_without_tvms_tensor_intrinsics():
    out = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_search_population_follows_the_round_from_64_to_metaschedules_512():
    from autoplace.deploy.kernel_tuning import TRIALS_PER_ROUND, evolutionary

    sizes = [evolutionary(n).population_size for n in (1, 2, 4, 8, 16, TRIALS_PER_ROUND)]
    assert sizes == [64, 64, 128, 256, 512, 512]
    assert evolutionary(2).init_min_unmeasured == 32  # (MetaSchedule's 50: half the 64)
