"""The command line end to end, in subprocesses: results, one-line errors, Ctrl-C."""

from __future__ import annotations

import json
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoplace.records.tuning_log import read


def cli(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "autoplace", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_tune_best_graph_profiles(tmp_path):
    log = tmp_path / "seed.jsonl"
    p = cli("tune", "seed_te", "--hw", "soc", "--trials", 24, "--log", log, "--seed", 3,
            "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "tuning seed_te (4 ops) on soc (4 units)" in p.stdout
    assert "baseline greedy" in p.stdout and "baseline single:cpu1" in p.stdout
    records = read(log)
    # single:cpu1, single:cpu2 (cpu1 is the host, so not cpu2's twin), two accelerators, greedy
    assert len(records) == 24 + 5
    best_ms = min(r.result.latency_s for r in records if r.result.ok) * 1e3
    assert f"best (latency): latency {best_ms:.4f} ms" in p.stdout

    b = cli("best", log)
    assert b.returncode == 0, b.stderr
    lines = b.stdout.splitlines()
    assert lines[1].split()[:2] == ["op", "kind"]
    assert [ln.split()[0] for ln in lines[2:]] == ["C", "D", "E", "F"]
    assert all(ln.split()[1] == "elementwise" for ln in lines[2:])

    g = cli("graph", "seed_te")
    assert g.returncode == 0 and "seed_te: 4 ops, 4 edges" in g.stdout
    prof = cli("profiles")
    assert prof.returncode == 0
    names = [ln.split()[0] for ln in prof.stdout.splitlines()]
    assert names == ["biglittle", "host", "mesh", "npu", "soc"]


def test_best_of_a_glob_reads_the_logs_not_their_side_files(tmp_path):
    """``best runs/*.jsonl`` (the README's multi-worker example) also matches each log's
    cost-model statistics and checkpoint; it reads the logs only. A side file named alone
    is read as a log, and refused as one."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for worker in (1, 2):
        p = cli("tune", "seed_te", "--hw", "soc", "--trials", 40, "--seed", worker,
                "--log", runs / f"w{worker}.jsonl", "--no-progress")
        assert p.returncode == 0, p.stderr
    paths = sorted(runs.glob("*.jsonl"))
    assert {x.name for x in paths} >= {"w1.model.jsonl", "w1.state.jsonl", "w2.state.jsonl"}
    b = cli("best", *paths)
    assert b.returncode == 0, b.stderr
    both = [r for w in (1, 2) for r in read(runs / f"w{w}.jsonl")]
    best_ms = min(r.result.latency_s for r in both if r.result.ok) * 1e3
    assert f"latency {best_ms:.4f} ms" in b.stdout.splitlines()[0]
    assert_one_line_error(cli("best", runs / "w1.model.jsonl"), "w1.model.jsonl:1")


def test_tune_for_throughput_ranks_by_the_stream_period(tmp_path):
    log = tmp_path / "stream.jsonl"
    p = cli("tune", "squeezenet", "--hw", "soc", "--trials", 24, "--log", log,
            "--objective", "throughput", "--no-progress")
    assert p.returncode == 0, p.stderr
    records = read(log)
    streaming = [r for r in records if r.result.period_s is not None]
    best = min(streaming, key=lambda r: (r.result.period_s, r.trial))
    # HEFT fills the SRAMs for one inference: its double-buffered stream does not fit
    assert "baseline heft" in p.stdout and "(its stream does not fit)" in p.stdout
    assert (f"best (throughput): latency {best.result.latency_s * 1e3:.4f} ms, period "
            f"{best.result.period_s * 1e3:.4f} ms") in p.stdout
    assert f"autoplace best {log} --objective throughput" in p.stdout
    b = cli("best", log, "--objective", "throughput")
    assert b.returncode == 0, b.stderr
    assert f"period {best.result.period_s * 1e3:.4f} ms" in b.stdout.splitlines()[0]
    by_latency = cli("best", log)
    fastest = min((r for r in records if r.result.ok),
                  key=lambda r: (r.result.latency_s, r.trial))
    assert f"latency {fastest.result.latency_s * 1e3:.4f} ms" in by_latency.stdout


def test_throughput_needs_a_measurer_that_models_a_stream(tmp_path):
    log = tmp_path / "t.jsonl"
    p = cli("tune", "squeezenet", "--hw", "host", "--measurer", "local", "--objective",
            "throughput", "--log", log)
    assert_one_line_error(p, "--objective throughput", "local measurer")
    assert not log.exists()


def test_tune_from_an_onnx_path(tmp_path):
    from autoplace.models import bundled_onnx_path, load_graph

    p = cli("tune", bundled_onnx_path("alexnet"), "--hw", "biglittle", "--trials", 8,
            "--log", tmp_path / "a.jsonl", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert {r.graph_fp for r in read(tmp_path / "a.jsonl")} == {
        load_graph("alexnet").fingerprint}


BAD_PROFILE = """
name = "bad"
host = "cpu"
default_scope = "dram"
[units.cpu]
target = { kind = "llvm" }
accepts = ["*"]
[units.cpu.gflops]
default = -1.0
[scopes.dram]
capacity_mib = 10
bandwidth_gbps = 1.0
access = ["*"]
"""


def test_user_errors_are_one_line_exit_2(tmp_path):
    assert_one_line_error(cli("tune", "nosuchmodel"), "nosuchmodel", "squeezenet")
    assert_one_line_error(cli("tune", tmp_path / "missing.onnx"), "missing.onnx")
    (tmp_path / "corrupt.onnx").write_bytes(b"\x00not an onnx file")
    assert_one_line_error(cli("tune", tmp_path / "corrupt.onnx"), "corrupt.onnx")
    (tmp_path / "bad.toml").write_text(BAD_PROFILE)
    assert_one_line_error(cli("tune", "seed_te", "--hw", tmp_path / "bad.toml"),
                          "bad.toml", "units.cpu.gflops.default")
    conv_only = BAD_PROFILE.replace('["*"]\n[units', '["conv2d"]\n[units', 1)
    (tmp_path / "conv.toml").write_text(conv_only.replace("-1.0", "1.0"))
    assert_one_line_error(cli("tune", "seed_te", "--hw", tmp_path / "conv.toml"),
                          "conv.toml", "no unit accepts op 'C' of kind 'elementwise'")
    assert_one_line_error(cli("tune", "--trials", "0"), "--trials", "got 0")
    assert_one_line_error(cli("tune", "--seed", "x"), "--seed")
    assert_one_line_error(cli("best", tmp_path / "none.jsonl"), "none.jsonl")


def test_corrupt_log_line_is_named(tmp_path):
    log = tmp_path / "log.jsonl"
    assert cli("tune", "seed_te", "--trials", 8, "--log", log, "--no-progress").returncode == 0
    lines = log.read_text().splitlines()
    lines[2] = "{broken"
    log.write_text("\n".join(lines) + "\n")
    assert_one_line_error(cli("best", log), "log.jsonl:3", "corrupt record")


def test_ctrl_c_stops_cleanly_with_the_log_intact(tmp_path):
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoplace", "tune", "squeezenet", "--trials", "100000",
         "--log", str(log), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    deadline = time.time() + 300  # a loaded machine (CI, the suite on every core) is slow
    while time.time() < deadline and (not log.exists() or log.stat().st_size < 20000):
        time.sleep(0.2)
    assert log.stat().st_size >= 20000, "the search never got going"  # not in the set-up
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted" in out and "Traceback" not in err
    text = log.read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == len(read(log)) > 3
    assert [r["trial"] for r in records] == sorted({r["trial"] for r in records})


def test_a_ctrl_c_while_the_command_line_imports_is_one_line():
    """The Ctrl-C lands while ``autoplace.cli.main`` is being imported (simulated by an
    import hook raising it there): one line and exit 130, not an import traceback."""
    code = ("import sys\n"
            "class CtrlC:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'autoplace.cli.main':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, CtrlC())\n"
            "from autoplace.cli.entry import main\n"
            "sys.exit(main())\n")
    proc = subprocess.run([sys.executable, "-c", code, "best", "x"], capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (130, "autoplace: interrupted\n")


def test_a_tuning_job_whose_reader_left_before_it_began_still_tunes(tmp_path):
    """``tune ... | head -1`` where head has gone before the first line: the job runs to the
    end (its log is its record), quietly, exit 0; it measures what a job with a reader
    measures."""
    args = ["tune", "seed_te", "--hw", "soc", "--trials", "8", "--no-progress", "--log"]
    p = subprocess.Popen([sys.executable, "-m", "autoplace", *args, str(tmp_path / "a.jsonl")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the command writes anything
    assert p.wait(timeout=300) == 0
    assert p.stderr.read() == b""
    read_on = cli(*args, tmp_path / "b.jsonl")
    assert read_on.returncode == 0, read_on.stderr
    def trials(log):
        return [(r.trial, r.strategy, r.placement.to_dict()) for r in read(log)]

    mine = trials(tmp_path / "a.jsonl")
    assert len(mine) > 8 and mine == trials(tmp_path / "b.jsonl")


@pytest.mark.parametrize("argv", [["tune", "--help"], ["--help"]])
def test_help(argv):
    p = cli(*argv)
    assert p.returncode == 0 and "usage: autoplace" in p.stdout


def test_the_top_help_lists_every_command_and_its_examples_parse():
    """Every subcommand with its help line; each example a command the parser takes (issue
    31: the description named 4 of 11 commands, and no examples)."""
    import argparse
    import shlex

    from autoplace.cli.main import EXAMPLES, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = cli("--help").stdout
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert set(helps) == set(sub.choices) and len(helps) >= 12
    assert all(h and f"    {name}" in text for name, h in helps.items())
    examples = [line.split("   ")[0].strip() for line in EXAMPLES.splitlines()[1:]]
    assert len(examples) >= 6 and all(e in text for e in examples)
    for example in examples[:-1]:
        args = shlex.split(example)[1:]
        assert parser.parse_args(args).command == args[0]


def test_every_options_help_says_its_default_once_and_never_none():
    """--help of every subcommand: a default shown once, none shown as None (issue 31: 15
    defaults twice, some contradicting each other, "(default 64) (default: None)")."""
    import argparse

    from autoplace.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, command in sub.choices.items():
        formatter = command._get_formatter()
        for action in command._actions:
            text = formatter._expand_help(action) if action.help else ""
            assert text.count("default") <= 1, (name, action.dest, text)
            assert "(default: None)" not in text and "(default: False)" not in text, name
            checked += bool(text)
    assert checked > 100


@pytest.mark.parametrize("names", [("--rpc-tracker", "--rpc-key"), ("--tracker", "--key")])
def test_serve_takes_the_rpc_flags_of_the_other_commands_and_its_old_names(names):
    """Issue 31: serve had --tracker/--key where tune, run, calibrate... have --rpc-*."""
    from autoplace.cli.main import build_parser

    args = build_parser().parse_args(["serve", "--hw", "soc", names[0], "h:1", names[1], "k"])
    assert (args.rpc_tracker, args.rpc_key) == ("h:1", "k")
    usage = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    assert "--rpc-tracker HOST:PORT, --tracker HOST:PORT" in usage


def test_report_takes_o_as_compile_does(tmp_path):
    log = tmp_path / "t.jsonl"
    assert cli("tune", "seed_te", "--hw", "soc", "--trials", 2, "--log", log,
               "--no-progress").returncode == 0
    r = cli("report", log, "-o", tmp_path / "here")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "here" / "report.html").is_file()


def test_a_log_on_dev_null_is_taken_and_nothing_is_written_beside_it():
    """fsync of /dev/null raises EINVAL, no error of the log's (records/tuning_log.py); its
    side files (checkpoint, cost-model statistics) once went to /dev."""
    side = [Path("/dev/null.state.jsonl"), Path("/dev/null.model.jsonl")]

    def seen():
        return [p.stat().st_mtime_ns if p.exists() else None for p in side]

    before = seen()
    t = cli("tune", "seed_te", "--trials", 2, "--log", "/dev/null", "--no-progress")
    assert t.returncode == 0 and not t.stderr, t.stderr
    assert "best (latency)" in t.stdout and seen() == before


def test_best_and_report_of_ones_own_model_without_model_say_to_pass_it(tmp_path):
    """A log names its graph, not where it is: best printed kind ? for every op with no hint,
    report failed without naming --model (issue 31)."""
    from autoplace.models import GRAPH_DIR

    model, log = tmp_path / "mine.json", tmp_path / "t.jsonl"
    model.write_text(json.dumps({**json.loads((GRAPH_DIR / "seed_te.json").read_text()),
                                 "name": "mine"}))
    assert cli("tune", model, "--trials", 2, "--log", log, "--no-progress").returncode == 0
    best = cli("best", log)
    assert best.returncode == 0, best.stderr
    note = best.stdout.strip().splitlines()[-1]
    assert note.startswith("note: its graph 'mine' is not a bundled model") and \
        "--model PATH" in note
    assert "note:" not in cli("best", log, "--model", model).stdout
    assert_one_line_error(cli("report", log, "-o", tmp_path / "rep"), "t.jsonl",
                          "graph 'mine' is not a bundled model", "--model PATH")
    from autoplace.hardware.load import bundled_profiles

    hw, log = tmp_path / "board.toml", tmp_path / "b.jsonl"
    hw.write_text(bundled_profiles()["soc"].read_text().replace('name = "soc"', 'name = "board"'))
    assert cli("tune", model, "--hw", hw, "--trials", 2, "--log", log,
               "--no-progress").returncode == 0
    assert_one_line_error(cli("report", log), "--model PATH", "--hw PATH", "'board'")
    assert_one_line_error(cli("report", log, "--model", model), "profile 'board' is not a "
                          "bundled one", "--hw PATH")


def test_a_slow_set_up_phase_says_what_it_does_and_a_quick_one_is_quiet(capsys, monkeypatch):
    import time

    from autoplace.cli import main as cli

    monkeypatch.setattr(cli, "SLOW_PHASE_S", 0.05)
    with cli.phase("compiling the search space"):
        time.sleep(0.3)
    with cli.phase("loading profile soc"):
        pass
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "compiling the search space ..."
    assert out[1].startswith("compiling the search space: ") and out[1].endswith(" s")
    assert len(out) == 2


def test_version_help_defaults_broken_pipe_and_next_steps(tmp_path):
    import os
    import shlex
    import subprocess
    import sys

    def cli(*args, **kw):
        return subprocess.run([sys.executable, "-m", "autoplace", *map(str, args)],
                              capture_output=True, text=True, timeout=300, **kw)

    v = cli("--version")
    assert v.returncode == 0 and v.stdout.startswith("autoplace 0.") and "(TVM 0.27" in v.stdout
    h = cli("tune", "--help").stdout
    for option, default in [("--trials", "200"), ("--timeout", "60.0"), ("--sampler", "evolve"),
                            ("--seed", "0"), ("--batch-size", "16 with the simulator, 8 with a "
                                              "measurer that runs the model")]:
        block = h[h.index(f"\n  {option}") + 3:].split("\n  -")[0]
        assert f"(default: {default}" in " ".join(block.split()), block
    log = tmp_path / "t.jsonl"
    t = cli("tune", "seed_te", "--hw", "soc", "--trials", 8, "--log", log, "--no-progress")
    assert t.returncode == 0, t.stderr
    assert f"next: autoplace best {log}" in t.stdout and "autoplace compile seed_te" in t.stdout
    steps = t.stdout.split("next: ")[1].strip().split("  |  ")
    assert [s.split()[1] for s in steps] == ["best", "report", "compile", "run"]
    for step in steps:  # each works as printed (kernels cached under this HOME)
        r = cli(*shlex.split(step)[1:], cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
        assert r.returncode == 0, (step, r.stderr)
    # a reader that went away (`best LOG | head`): no "Broken pipe", no error status
    p = subprocess.Popen([sys.executable, "-m", "autoplace", "best", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the command writes anything
    assert p.wait(timeout=300) == 0
    assert p.stderr.read() == b""


def test_the_next_steps_after_tuning_ones_own_model_and_profile_work(tmp_path):
    """A model and a profile of one's own: the log names them but not where they are, so
    the printed steps carry --model and --hw (report could not find the model; best
    printed kind '?' for every op)."""
    import os
    import shlex
    import shutil

    from factories import conv_onnx

    from autoplace.hardware.load import bundled_profiles

    model, hw, log = tmp_path / "mine.onnx", tmp_path / "board.toml", tmp_path / "t.jsonl"
    conv_onnx(model)
    shutil.copy(bundled_profiles()["soc"], hw)
    t = cli("tune", model, "--hw", hw, "--input-shapes", "data:[1,3,8,8]", "--trials", 4,
            "--log", log, "--no-progress")
    assert t.returncode == 0, t.stderr
    steps = t.stdout.split("next: ")[1].strip().split("  |  ")
    assert f"--model {model}" in steps[0] and f"--model {model} --hw {hw}" in steps[1]
    for step in steps:
        r = subprocess.run([sys.executable, "-m", "autoplace", *shlex.split(step)[1:]],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path,
                           env={**os.environ, "HOME": str(tmp_path)})
        assert r.returncode == 0, (step, r.stderr)
        if step.startswith("autoplace best"):
            assert "?" not in r.stdout.split("\n", 2)[2]  # every op's kind is known


def test_an_uncalibrated_profile_says_so_once_and_a_calibrated_one_does_not(tmp_path):
    from autoplace.hardware.load import bundled_profiles

    out = cli("tune", "seed_te", "--trials", 2, "--log", tmp_path / "a.jsonl",
              "--no-progress").stdout
    assert out.count("not calibrated") == 1 and "autoplace calibrate --hw soc" in out
    text = bundled_profiles()["soc"].read_text().replace(
        "[units.cpu1.gflops]", '[units.cpu1.kernel_us]\n"conv2d:1000:1000" = 3.0\n'
        "[units.cpu1.gflops]", 1)
    (tmp_path / "cal.toml").write_text(text)
    proc = cli("tune", "seed_te", "--hw", tmp_path / "cal.toml", "--trials", 2, "--log",
               tmp_path / "b.jsonl", "--no-progress")
    assert proc.returncode == 0 and "not calibrated" not in proc.stdout, proc.stderr


def test_a_second_run_on_a_log_needs_append_or_resume(tmp_path):
    log = tmp_path / "t.jsonl"
    assert cli("tune", "seed_te", "--trials", 2, "--log", log, "--no-progress").returncode == 0
    before = log.read_bytes()
    assert_one_line_error(cli("tune", "seed_te", "--trials", 2, "--log", log, "--no-progress"),
                          "t.jsonl: already holds", "--resume", "--append")
    assert log.read_bytes() == before
    again = cli("tune", "seed_te", "--trials", 2, "--log", log, "--no-progress", "--append")
    assert again.returncode == 0, again.stderr
    runs = [r.run for r in read(log)]
    assert len(set(runs)) == 2 and len(runs) > len(before.splitlines())


def test_an_allocation_that_cannot_be_met_is_one_line(tmp_path):
    """Out of memory is a one-line error (exit 2), not a traceback: resnet50 on a mesh of
    250 x 250 PEs under a 1.5 GiB address-space cap cannot allocate its choice tables."""
    text = (Path(__file__).parents[2] / "hwprofiles" / "mesh.toml").read_text()
    hw = tmp_path / "mesh250.toml"
    hw.write_text(re.sub(r"^(rows|cols) = \d+$", r"\1 = 250", text, flags=re.M))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    proc = subprocess.run([sys.executable, "-m", "autoplace", "tune", "resnet50", "--hw",
                           str(hw), "--trials", "4", "--log", str(tmp_path / "t.jsonl"),
                           "--no-progress"], capture_output=True, text=True, timeout=300,
                          preexec_fn=cap)
    assert_one_line_error(proc, "autoplace: error: out of memory: Unable to allocate")
