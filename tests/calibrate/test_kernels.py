"""Calibration: the fit on hand-made timings, the TOML it writes, the real command."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib

import pytest

from autoplace.calibrate.kernels import KernelTime, Measurements, calibrated, fit, simulated
from autoplace.graph import Op, OpGraph
from autoplace.hardware.load import load_profile
from autoplace.hardware.write import to_toml
from autoplace.measure.server import LocalCluster
from autoplace.models import load_graph
from autoplace.space import SearchSpace


def k(model, kind, flops, nbytes, seconds, op="op"):
    return KernelTime(model=model, op=op, func=op, kind=kind, flops=flops, nbytes=nbytes,
                      seconds=seconds)


def synthetic() -> Measurements:
    """conv2d at 50 GFLOP/s, data movement at 10 GB/s, 5 us per op beyond the kernels."""
    kernels = (
        k("a", "conv2d", 1e9, 1e6, 1e9 / 50e9),
        k("a", "conv2d", 4e9, 1e6, 4e9 / 50e9),
        k("a", "injective", 0.0, 1e8, 1e8 / 10e9),
        # elementwise at 2 GFLOP/s, but its second kernel is memory bound at 10 GB/s
        k("a", "elementwise", 2e6, 1e3, 2e6 / 2e9),
        k("a", "elementwise", 1e3, 2e7, 2e7 / 10e9),
    )
    total = sum(x.seconds for x in kernels) + 5 * 5e-6
    return Measurements(unit="cpu", kernels=kernels, models={"a": total}, ops={"a": 5})


def test_fit_recovers_known_numbers():
    f = fit(synthetic(), load_profile("host"))
    assert f.bandwidth_bps == pytest.approx(10e9)
    assert f.gflops["conv2d"] == pytest.approx(50.0, rel=1e-3)
    assert f.gflops["elementwise"] == pytest.approx(2.0, rel=1e-3)
    assert f.launch_overhead_s == pytest.approx(5e-6)
    assert (f.unit, f.scope) == ("cpu", "dram")


def test_the_kernel_table_keeps_the_fastest_time_of_each_kernel():
    m = synthetic()
    slower = k("b", "conv2d", 4e9, 1e6, 0.5)  # the same kernel again, in another model
    m = Measurements(unit="cpu", kernels=(*m.kernels, slower), models={**m.models, "b": 0.6},
                     ops={**m.ops, "b": 1})
    f = fit(m, load_profile("host"))
    assert f.kernel_s == {"conv2d:1e+09:1000000": 1e9 / 50e9, "conv2d:4e+09:1000000": 0.08,
                          "elementwise:1000:20000000": 2e-3,
                          "elementwise:2000000:1000": 1e-3, "injective:0:100000000": 1e-2}
    assert fit(m, load_profile("host"), kernel_table=False).kernel_s == {}


def test_a_known_kernel_takes_its_measured_time_the_rest_the_roofline():
    host = load_profile("host")
    cpu = host.unit("cpu")
    known = Op(name="c", kind="conv2d", flops=4e9, bytes_read=600_000, output_bytes=400_000)
    other = Op(name="d", kind="conv2d", flops=3e9, bytes_read=600_000, output_bytes=400_000)
    timed = dataclasses.replace(cpu, kernel_s={known.kernel_key: 1e-3})
    assert known.kernel_key == "conv2d:4e+09:1000000"
    graph = OpGraph(name="two", ops=(known, other), edges=())

    def seconds(unit):
        prof = dataclasses.replace(host, units=(unit,))
        return SearchSpace(graph, prof).c_dur[:, 0]

    (k_timed, o_timed), (k_roof, o_roof) = seconds(timed), seconds(cpu)
    assert k_timed == pytest.approx(cpu.launch_overhead_s + 1e-3)
    assert o_timed == o_roof
    assert k_roof > 10 * k_timed


def test_calibrated_profile_reads_back_the_same(tmp_path):
    host = load_profile("host")
    cal = calibrated(host, fit(synthetic(), host))
    path = tmp_path / "cal.toml"
    path.write_text(to_toml(cal, "a header\nof two lines"))
    again = load_profile(path)
    assert again.hash == cal.hash and again.name == "host-calibrated"
    assert again.unit("cpu").gflops["conv2d"] == pytest.approx(50.0, rel=1e-3)
    assert again.unit("cpu").kernel_s == pytest.approx(fit(synthetic(), host).kernel_s)
    assert again.scope("dram").capacity_bytes == host.scope("dram").capacity_bytes


def test_a_mesh_pe_units_fit_is_every_pes_and_the_profile_stays_a_mesh(tmp_path):
    """Calibrating PE 5's NPU calibrates the NPU of every PE (they are one design); what is
    written is still a ``[mesh]`` profile, with the same hash."""
    mesh = load_profile("mesh")
    m = dataclasses.replace(synthetic(), unit="pe5.npu")
    f = fit(m, mesh)
    assert (f.unit, f.scope) == ("pe5.npu", "dram")  # its home scope: the shared one
    cal = calibrated(mesh, f)
    npus = [u for u in cal.units if u.name.endswith(".npu")]
    assert len(npus) == 16 and all(u.gflops == npus[0].gflops for u in npus)
    assert npus[0].gflops["conv2d"] == pytest.approx(50.0, rel=1e-3)
    assert npus[0].gflops != mesh.unit("pe0.npu").gflops
    assert cal.unit("pe0.arm") == mesh.unit("pe0.arm")  # the other unit as it was
    assert cal.scope("dram").bandwidth_bps == pytest.approx(10e9)
    assert cal.scope("pe5.mem") == mesh.scope("pe5.mem")
    path = tmp_path / "cal.toml"
    path.write_text(to_toml(cal))
    again = load_profile(path)
    assert again.hash == cal.hash and again.mesh == mesh.mesh
    tables = tomllib.loads(path.read_text())  # not PE by PE
    assert "npu" in tables["mesh"]["units"] and not any(k.startswith("pe") for k in tables["units"])


def cli(*args):
    return subprocess.run([sys.executable, "-m", "autoplace", *args], capture_output=True,
                          text=True, timeout=900)


def _check_written(out, proc):
    assert proc.returncode == 0, proc.stderr
    cal = load_profile(out)
    table = json.loads(out.with_suffix(".kernels.json").read_text())
    assert {x["op"] for x in table["kernels"]} == {"C", "D", "E", "F"}
    assert all(x["seconds"] > 0 for x in table["kernels"])
    assert cal.unit("cpu").gflops["default"] > 0
    keys = {op.kernel_key for op in load_graph("seed_te").ops}  # C and F share a key
    assert set(cal.unit("cpu").kernel_s) == keys and len(keys) == 3
    measured = table["models"]["seed_te"]
    kernels = sum(x["seconds"] for x in table["kernels"])
    # the overhead explains what the kernels do not (none when the kernels alone took
    # longer, as with noise), and the simulator runs each op for its kernel's measured time
    cpu = cal.unit("cpu")
    assert cpu.launch_overhead_s == pytest.approx(max(0.0, measured - kernels) / 4, rel=1e-3,
                                                  abs=1e-11)
    fastest = {}
    for x in table["kernels"]:
        key = f'{x["kind"]}:{x["flops"]:.9g}:{x["nbytes"]}'
        fastest[key] = min(x["seconds"], fastest.get(key, x["seconds"]))
    assert cpu.kernel_s == pytest.approx(fastest, rel=1e-9)
    expected = sum(fastest[op.kernel_key] for op in load_graph("seed_te").ops) + 4 * (
        cpu.launch_overhead_s)
    assert simulated(cal, load_graph("seed_te"), "cpu") == pytest.approx(expected, rel=1e-6)
    assert "seed_te" in proc.stdout and "gflops[elementwise]" in proc.stdout


def test_calibrate_on_this_host(tmp_path):
    out = tmp_path / "host-cal.toml"
    _check_written(out, cli("calibrate", "--hw", "host", "--model", "seed_te", "-o", str(out),
                            "--repeat", "3"))


def test_calibrate_through_rpc(tmp_path):
    out = tmp_path / "host-rpc.toml"
    with LocalCluster(load_profile("host"), "cal") as cluster:
        proc = cli("calibrate", "--hw", "host", "--model", "seed_te", "-o", str(out),
                   "--rpc-tracker", cluster.tracker, "--rpc-key", "cal", "--repeat", "3")
    _check_written(out, proc)
    assert f"on {cluster.tracker} key cal" in proc.stdout


def test_rpc_options_go_together():
    proc = cli("calibrate", "--hw", "host", "--rpc-tracker", "127.0.0.1:9")
    assert proc.returncode == 2 and "go together" in proc.stderr
