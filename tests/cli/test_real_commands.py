"""The real-side commands through the CLI, in subprocesses: tune -> compile -> run, errors."""

from __future__ import annotations

import json
import subprocess
import sys

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.records.front import pick
from autoplace.records.tuning_log import best, read


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoplace", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def test_log_compile_run(tmp_path):
    log, out = tmp_path / "tune.jsonl", tmp_path / "out" / "seed"
    cache = ["--cache-dir", str(tmp_path / "kernels")]
    tuned = cli("tune", "seed_te", "--hw", "soc", "--trials", "6", "--log", str(log),
                "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    built = cli("compile", "seed_te", "--hw", "soc", "--log", str(log), "-o", str(out), *cache)
    assert built.returncode == 0, built.stderr
    rec = best(read(log), graph_fp=load_graph("seed_te").fingerprint,
               profile_hash=load_profile("soc").hash)
    assert f"trial {rec.trial} " in built.stdout and str(out) in built.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["placement"] == rec.placement.to_dict()
    ran = cli("run", str(out), "--repeat", "2")
    assert ran.returncode == 0, ran.stderr
    assert "median" in ran.stdout and "over 2 repeats" in ran.stdout
    assert "outputs (64, 32)" in ran.stdout
    direct = cli("run", "seed_te", "--hw", "soc", "--log", str(log), "--repeat", "1", *cache)
    assert direct.returncode == 0 and "over 1 repeats" in direct.stdout, direct.stderr
    lean = pick(read(log), "peak_memory", ())  # --pick builds the record it chooses
    picked = cli("compile", "seed_te", "--hw", "soc", "--log", str(log), "-o",
                 str(tmp_path / "lean"), "--pick", "peak_memory", *cache)
    assert picked.returncode == 0, picked.stderr
    assert json.loads((tmp_path / "lean" / "manifest.json").read_text())["placement"] == \
        lean.placement.to_dict() and f"trial {lean.trial} " in picked.stdout


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoplace: error:"), proc.stderr
    for w in words:
        assert w in lines[0]


def test_compile_with_no_record_for_the_profile(tmp_path):
    log = tmp_path / "tune.jsonl"
    assert cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--log", str(log),
               "--no-progress").returncode == 0
    proc = cli("compile", "seed_te", "--hw", "host", "--log", str(log), "-o",
               str(tmp_path / "x.so"))
    _one_line_error(proc, str(log), "no valid record", "profile host")
    assert not (tmp_path / "x.so").exists()
    out = str(tmp_path / "y")
    _one_line_error(cli("compile", "seed_te", "--hw", "soc", "--log", str(log), "-o", out,
                        "--max-memory", "l3=1MiB"), "--max-memory", "no scope 'l3'", "dram")
    _one_line_error(cli("compile", "seed_te", "--hw", "soc", "--log", str(log), "-o", out,
                        "--max-latency", "1e-12"), "no valid record", "within the limits")
    assert not (tmp_path / "y").exists()


def test_bad_inputs_are_one_line_errors(tmp_path):
    _one_line_error(cli("run", str(tmp_path / "missing.so")),
                    "not a build of `autoplace compile`")
    _one_line_error(cli("run", "seed_te"), "needs --log LOG and --hw PROFILE")
    _one_line_error(cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--measurer", "rpc",
                        "--log", str(tmp_path / "l.jsonl"), "--no-progress"),
                    "--rpc-tracker HOST:PORT")
    _one_line_error(cli("serve", "--hw", "soc", "--rpc-tracker", "nowhere", "--rpc-key", "k"),
                    "--rpc-tracker", "'nowhere'")


def test_tune_with_the_local_measurer(tmp_path):
    log = tmp_path / "tune.jsonl"
    proc = cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--measurer", "local",
               "--log", str(log), "--no-progress", "--cache-dir", str(tmp_path / "kernels"))
    assert proc.returncode == 0, proc.stderr
    records = read(log)
    assert records and {r.measurer for r in records} == {"local"}
    assert all(r.result.ok and r.result.latency_s < 0.1 for r in records)


def test_compile_reports_what_a_code_generator_offloads(tmp_path):
    """On a profile whose npu has a code generator, compile says what its BYOC build of the
    best placement offloads: the matches placed on the npu, in regions; the build runs each
    region as one piece of work on the npu (no npu kernel library), and run --check holds;
    a code generator nobody registered is a one-line error."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "hwprofiles" / "npu.toml").read_text()
    hw = tmp_path / "npu_byoc.toml"
    hw.write_text(text.replace("[units.npu]\n", '[units.npu]\ncodegen = "autoplace_ref"\n'))
    log, out = tmp_path / "tune.jsonl", tmp_path / "out"
    cache = ["--cache-dir", str(tmp_path / "kernels")]
    tuned = cli("tune", "bert_tiny", "--hw", str(hw), "--trials", "24", "--log", str(log),
                "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    built = cli("compile", "bert_tiny", "--hw", str(hw), "--log", str(log), "-o", str(out),
                *cache)
    assert built.returncode == 0, built.stderr
    graph, profile = load_graph("bert_tiny"), load_profile(hw)
    rec = best(read(log), graph_fp=graph.fingerprint, profile_hash=profile.hash)
    on_npu = {graph.index(op) for op, (unit, _) in rec.placement.ops.items() if unit == "npu"}
    placed = {m.ops for m in graph.matches if m.pattern in profile.unit("npu").patterns
              and set(m.ops) <= on_npu}
    assert placed  # the best offloads something
    assert f"npu (autoplace_ref): {len(placed)} matches offloaded in " in built.stdout
    simulated = rec.result.unit_busy_s["npu"] * 1e3
    assert f"ms on npu (the simulator's: {simulated:.4f} ms)" in built.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    regions = manifest["regions"]
    assert {i for r in regions for i in r["ops"]} == on_npu and "npu" not in manifest["libraries"]
    assert sorted(w["ops"] for w in manifest["schedule"]["work"] if w["kind"] == "region") == \
        sorted(r["ops"] for r in regions)
    ran = cli("run", str(out), "--repeat", "1", "--check")
    assert ran.returncode == 0, ran.stderr
    bad = tmp_path / "npu_vendor.toml"
    bad.write_text(hw.read_text().replace('codegen = "autoplace_ref"', 'codegen = "my_npu"'))
    assert cli("tune", "bert_tiny", "--hw", str(bad), "--trials", "4", "--log",
               str(tmp_path / "vendor.jsonl"), "--no-progress").returncode == 0
    _one_line_error(cli("compile", "bert_tiny", "--hw", str(bad), "--log",
                        str(tmp_path / "vendor.jsonl"), "-o", str(tmp_path / "v"), *cache),
                    "units.npu.codegen: no code generator relax.ext.my_npu is registered")
