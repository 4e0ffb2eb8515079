"""Importing TVM's tensor intrinsics: as MetaSchedule's ``TuneContext`` does, against
``autoplace.deploy.intrinsics.import_tensor_intrinsics`` (each fileless frame looked up once).

    python experiments/bench_intrinsics.py [--rounds 2]

Each import runs in a fresh interpreter that first imports what ``autoplace tune-kernels``
has loaded by then (the CLI, the kernel tuner, the ONNX frontend: ~3,000 modules), the two
kinds alternating, ``--rounds`` each; prints the 1-minute load, the median seconds of each,
their ratio and the modules loaded before.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

BEFORE = ("import sys, time, autoplace.cli.main, autoplace.deploy.kernel_tuning, "
          "tvm.relax.frontend.onnx; n = len(sys.modules); t = time.perf_counter(); ")
HOW = {
    "TVM's import (TuneContext)": "import tvm.s_tir.tensor_intrin",
    "import_tensor_intrinsics": ("from autoplace.deploy.intrinsics import "
                                 "import_tensor_intrinsics; import_tensor_intrinsics()"),
}
AFTER = "; print(time.perf_counter() - t, n)"


def once(code: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", BEFORE + code + AFTER], capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    secs: dict[str, list[float]] = {k: [] for k in HOW}
    modules = 0
    for _ in range(args.rounds):
        for name, code in HOW.items():
            s, modules = once(code)
            secs[name].append(s)
    base = statistics.median(secs["TVM's import (TuneContext)"])
    print(f"\n| import of tvm.s_tir.tensor_intrin ({modules:,} modules loaded before) "
          "| median s | ratio |\n|---|---|---|")
    for name, values in secs.items():
        m = statistics.median(values)
        print(f"| {name} | {m:.1f} | {m / base:.3f} |")
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
