"""A tiny hand-made profile and graphs whose simulated results can be worked out by hand."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import numpy as np

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.profile import CopyPath, Profile, Scope, Unit

CROSS = "aarch64-linux-gnu-g++"  # Debian's g++-aarch64-linux-gnu (.ci/run installs it)
NM = "aarch64-linux-gnu-nm"
TRIPLE = "aarch64-linux-gnu"

GB = 1e9


def tiny_profile(*, sram_mib: float = 1.0, modes=("sync", "async")) -> Profile:
    """cpu (host, 1 GFLOP/s, any kind) + acc (10 GFLOP/s, elementwise only).

    dram (1 GB/s, both units), sram (10 GB/s, acc only); dram<->sram copies at 1 GB/s with
    1 us latency on DMA engine dma0.
    """
    units = (
        Unit(name="cpu", target={"kind": "llvm"}, accepts=frozenset({"*"}),
             gflops={"default": 1.0}, launch_overhead_s=0.0, power_w=1.0),
        Unit(name="acc", target={"kind": "llvm"}, accepts=frozenset({"elementwise"}),
             gflops={"default": 10.0}, launch_overhead_s=1e-6, power_w=2.0),
    )
    scopes = (
        Scope(name="dram", capacity_bytes=1 << 30, bandwidth_bps=1 * GB,
              access=frozenset({"cpu", "acc"})),
        Scope(name="sram", capacity_bytes=int(sram_mib * (1 << 20)), bandwidth_bps=10 * GB,
              access=frozenset({"acc"})),
    )
    copies = tuple(
        CopyPath(src=a, dst=b, bandwidth_bps=1 * GB, latency_s=1e-6, modes=tuple(modes),
                 engine="dma0")
        for a, b in (("dram", "sram"), ("sram", "dram"))
    )
    return Profile(name="tiny", host="cpu", default_scope="dram", units=units,
                   scopes=scopes, copies=copies)


def op(name: str, flops: float, read: int, out: int, ext: int = 0, kind="elementwise") -> Op:
    return Op(name=name, kind=kind, flops=flops, bytes_read=read, output_bytes=out,
              external_bytes=ext)


def random_graph(seed: int, n_ops: int) -> OpGraph:
    """A random DAG of ``n_ops`` ops: each after the first reads the outputs of one or two
    earlier ops; kinds, FLOPs, tensor and weight sizes drawn with ``seed`` (up to 2 MB
    tensors and 3 MB of weights: some placements overflow the small scopes)."""
    rng = np.random.default_rng(seed)
    ops, edges = [], []
    for i in range(n_ops):
        flops, out = float(rng.uniform(1e5, 5e7)), int(rng.integers(1_000, 2_000_000))
        ins = sorted(rng.choice(i, size=min(i, int(rng.integers(1, 3))), replace=False)
                     .tolist()) if i else []
        weights = int(rng.integers(0, 3_000_000))
        ext = weights + (0 if ins else 4000)
        kind = str(rng.choice(["conv2d", "matmul", "elementwise", "pool"]))
        ops.append(Op(name=f"o{i}", kind=kind, flops=flops, output_bytes=out,
                      bytes_read=sum(ops[p].output_bytes for p in ins) + ext,
                      external_bytes=ext, weight_bytes=weights))
        edges += [Edge(src=p, dst=i, nbytes=ops[p].output_bytes) for p in ins]
    return OpGraph(name=f"random{seed}", ops=tuple(ops), edges=tuple(edges))


def chain_graph() -> OpGraph:
    """X -> Y -> Z, 1000 bytes per tensor, X reads 1000 external bytes."""
    ops = (
        op("X", 1e6, 1000, 1000, ext=1000),
        op("Y", 2e6, 1000, 1000),
        op("Z", 1e6, 1000, 1000),
    )
    edges = (Edge(src=0, dst=1, nbytes=1000), Edge(src=1, dst=2, nbytes=1000))
    return OpGraph(name="chain", ops=ops, edges=edges)


def fork_graph() -> OpGraph:
    """S -> (L, R) -> J: a fork/join whose branches can run in parallel."""
    ops = (
        op("S", 1e6, 1000, 1000, ext=1000),
        op("L", 4e6, 1000, 1000),
        op("R", 4e6, 1000, 1000),
        op("J", 1e6, 2000, 1000),
    )
    edges = (Edge(src=0, dst=1, nbytes=1000), Edge(src=0, dst=2, nbytes=1000),
             Edge(src=1, dst=3, nbytes=1000), Edge(src=2, dst=3, nbytes=1000))
    return OpGraph(name="fork", ops=ops, edges=edges)


def resident_and_streamed(space):
    """On ``soc``, for a graph of two ops with weights (tests/measure/conftest.py ``weighted``):
    the first keeps its weights in sram1, the second streams them to sram2."""
    first, second = (op.name for op in space.graph.ops)
    return space.from_user({"ops": {
        first: {"unit": "accelerator1", "scope": "sram1", "weights": "resident"},
        second: {"unit": "accelerator2", "scope": "sram2", "weights": "streamed"}}})


def contiguous_genomes(space, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random genomes whose block units each run one range of consecutive ops in program
    order (a contiguous set), every other op on a parallel unit."""
    choice, mode = space.random_genomes(n, rng)
    block = [u for u, x in enumerate(space.profile.units) if x.execution == "block"]
    for b in range(n):
        cuts = np.sort(rng.choice(space.n_ops + 1, size=2 * len(block)))
        owner = np.full(space.n_ops, -1)
        for u, lo, hi in zip(block, cuts[0::2], cuts[1::2]):
            owner[lo:hi] = u
        for i in range(space.n_ops):
            units = space.c_unit[i, :space.n_choices[i]]
            want = units == owner[i] if owner[i] >= 0 else ~np.isin(units, block)
            if not want[choice[b, i]] and want.any():
                choice[b, i] = rng.choice(np.flatnonzero(want))
    return choice, mode


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need_cross() -> str:
    """The aarch64 cross compiler; a skip without it (a failure in CI, which installs it)."""
    import pytest

    if shutil.which(CROSS) is None or shutil.which(NM) is None:
        if os.environ.get("AUTOPLACE_CI"):
            pytest.fail(f"{CROSS} is not installed (.ci/run installs g++-aarch64-linux-gnu)")
        pytest.skip(f"needs {CROSS} (Debian: g++-aarch64-linux-gnu)")
    return CROSS


def board_toml(extra: str = "", target: str = f'kind = "llvm", mtriple = "{TRIPLE}"') -> str:
    """A board of two units of ``target`` (a CPU, and an elementwise engine with its own
    mcpu); ``extra``: more lines of each unit's table."""
    units = [("cpu", '["*"]', 1.0, ""), ("npu", '["elementwise"]', 50.0, ', mcpu = "cortex-a72"')]
    text = 'name = "board"\nhost = "cpu"\ndefault_scope = "dram"\n'
    for name, accepts, gflops, mcpu in units:
        text += (f"[units.{name}]\ntarget = {{ {target}{mcpu if 'mtriple' in target else ''} }}\n"
                 f"accepts = {accepts}\ngflops = {{ default = {gflops} }}\n{extra}")
    return text + '[scopes.dram]\ncapacity_mib = 64\nbandwidth_gbps = 4.0\naccess = ["*"]\n'


def cli(*args, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """``autoplace ARGS`` in a new process (``env``: its environment, default this one's)."""
    return subprocess.run([sys.executable, "-m", "autoplace", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def started_together(commands: list[list[str]], first: str) -> list[subprocess.Popen]:
    """``autoplace`` processes, one per command (its arguments), let go together: each is
    held (SIGSTOP) once it prints its first line (starting ``first``) until all have. Fast
    workers of one study would otherwise finish it before a slow starter joins (a process
    importing TVM under load takes seconds); their stdout is a pipe (unbuffered)."""
    import signal

    procs = []
    for args in commands:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "autoplace", *map(str, args)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}))
        line = procs[-1].stdout.readline()
        assert line.startswith(first), (line, procs[-1].stderr.read() if not line else "")
        procs[-1].send_signal(signal.SIGSTOP)
    for p in procs:
        p.send_signal(signal.SIGCONT)
    return procs


def one_line_error(proc: subprocess.CompletedProcess, *words: str,
                   start: str = "autoplace: error:") -> None:
    """``proc`` ended with exit code 2 and one line on stderr, beginning ``start`` and
    holding each of ``words``."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def conv_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"W": rng.normal(size=(4, 3, 3, 3)).astype(np.float32),
            "G": rng.normal(size=(4, 10)).astype(np.float32),
            "c": rng.normal(size=10).astype(np.float32)}


def conv_onnx(path) -> None:
    """conv 3x3 (pad 1) -> relu -> global average pool -> flatten -> gemm -> softmax on
    ``data`` of shape [N, 3, 8, 8], N symbolic."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Conv", ["data", "W"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "G", "c"], ["z"]),
             helper.make_node("Softmax", ["z"], ["prob"], axis=1)]
    graph = helper.make_graph(
        nodes, "sym", [helper.make_tensor_value_info("data", TensorProto.FLOAT,
                                                     ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(v, k) for k, v in conv_weights().items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_reference(x: np.ndarray) -> np.ndarray:
    """:func:`conv_onnx` in numpy."""
    w = conv_weights()
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    y = np.maximum(np.einsum("ncijyx,ocyx->noij", patches, w["W"]), 0)
    z = y.mean(axis=(2, 3)) @ w["G"] + w["c"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def with_torch() -> dict[str, str]:
    """This process's environment without tests/conftest.py's torch blocker (for a
    subprocess that needs the real torch)."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p and
                                        not p.endswith("torch_blocker"))
    return env


def legalized_kernel(make, *shapes):
    """The one kernel TVM legalizes and fuses ``make(*params)`` into (as a model's are), its
    params float32 tensors of ``shapes``."""
    from tvm import relax

    from autoplace.frontend.relax import fuse

    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(make(*params))
        bb.emit_func_output(out)
    mod = fuse(bb.finalize())
    (gv,) = [gv for gv in mod.functions if gv.name_hint != "main"]
    return mod[gv]


def block_nests(stmt, around=()) -> list[tuple]:
    """(block, its binding values, the loops around it, outer first) for every block of
    TIR statement ``stmt``."""
    from tvm import s_tir, tirx

    if isinstance(stmt, tirx.For):
        return block_nests(stmt.body, (*around, stmt))
    if isinstance(stmt, s_tir.SBlockRealize):
        inner = block_nests(stmt.block.body, around)
        return [(stmt.block, list(stmt.iter_values), around), *inner]
    if isinstance(stmt, tirx.SeqStmt):
        return [n for s in stmt.seq for n in block_nests(s, around)]
    return block_nests(stmt.body, around) if hasattr(stmt, "body") else []
