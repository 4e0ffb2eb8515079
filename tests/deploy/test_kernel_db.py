"""Kernels tuned by MetaSchedule (``autoplace tune-kernels``) into a kernel database, and
builds that use it: real MetaSchedule tuning (builder, runner, XGBoost), on this host and
through a real TVM RPC tracker and stock RPC server on 127.0.0.1."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tvm
import tvm_ffi
from factories import (
    NM,
    board_toml,
    cli,
    conv_onnx,
    conv_reference,
    free_port,
    need_cross,
    one_line_error,
)
from tvm.rpc.tracker import Tracker

from autoplace.deploy.fast_math import for_target
from autoplace.deploy.kernel_db import (
    FINALISTS,
    FINALISTS_KEPT,
    RECORDS,
    UNTUNED,
    KernelDatabase,
    record_seconds,
    scheduled,
    target_dir_name,
    workload,
)
from autoplace.deploy.kernel_tuning import KernelTuner, KernelTuning, heaviest, kernel_tasks
from autoplace.deploy.schedule import default_schedule
from autoplace.deploy.targets import target_key, unit_target
from autoplace.hardware.load import load_profile
from autoplace.measure.server import wait_registered
from autoplace.models import load_module
from autoplace.runtime import Runtime
from autoplace.runtime.libraries import KernelLibraries, kernel_funcs
from autoplace.runtime.program import read_program
from autoplace.space import SearchSpace

SHAPES = {"data": (2, 3, 8, 8)}
SHAPES_ARG = "data:[2,3,8,8]"
TRIALS = 2


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, worker_id):
    """The conv model's kernels tuned for core0 of the host profile, 2 trials each: once
    for the whole session (the first xdist worker tunes, the others wait and read)."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker_id != "master" else root
    tmp = root / "kernel-db"
    model, db, out = tmp / "conv.onnx", tmp / "kdb", tmp / "stdout.txt"
    with open(root / "kernel-db.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            tmp.mkdir(exist_ok=True)
            conv_onnx(model)
            proc = cli("tune-kernels", model, "--input-shapes", SHAPES_ARG, "--hw", "host",
                       "--unit", "core0", "--trials", TRIALS, "--kernel-db", db)
            assert proc.returncode == 0, proc.stderr
            out.write_text(proc.stdout)
    mod, graph = load_module(model, SHAPES)
    return tmp, model, db, out.read_text(), mod, graph


@pytest.fixture(scope="module")
def metaschedule_only(tuned, tmp_path_factory):
    """A copy of the tuned database without the default schedules' records: a database
    MetaSchedule alone wrote (as TVM's own tuning, or autoplace before it measured
    defaults), so its best record of each kernel is MetaSchedule's."""
    from tvm.s_tir import meta_schedule as ms

    _, _, db_dir, _, mod, graph = tuned
    db, tasks = KernelDatabase(db_dir), _tasks(mod, graph)
    target = tasks[0].target
    where = tmp_path_factory.mktemp("ms-only") / "kdb"
    copy = KernelDatabase(where, create=True).database(target, create=True)
    for task in tasks:
        wl = copy.commit_workload(workload(task.prim_func))
        for r in db.records(task.prim_func, target):
            if not db.is_default(r, task.prim_func, target):
                copy.commit_tuning_record(ms.database.TuningRecord(
                    r.trace, wl, r.run_secs, r.target, r.args_info))
    return where


def _tasks(mod, graph, units=("core0",)):
    """The kernels ``tune-kernels`` tunes: as a library compiles them (weights marked)."""
    program = read_program(mod)
    return kernel_tasks(kernel_funcs(program), graph, load_profile("host"), list(units))


def _conv(tasks):
    return next(t for t in tasks if "conv2d" in t.func)


def test_each_kernel_is_tuned_for_its_units_target(tuned):
    _, _, db_dir, stdout, mod, graph = tuned
    tasks, db = _tasks(mod, graph), KernelDatabase(db_dir)
    target = unit_target(load_profile("host").unit("core0"), load_profile("host"))
    assert [p.name for p in db_dir.iterdir()] == [target_dir_name(target)]
    assert (db_dir / target_dir_name(target) / "target.json").read_text().strip() == \
        target_key(target)
    lines = [s for s in stdout.splitlines() if s.startswith("  [")]
    assert len(lines) == len(tasks) == len({t.func for t in tasks}) >= 4
    assert db.trials(_conv(tasks).prim_func, target) == TRIALS  # a conv has many candidates
    for task, line in zip(tasks, lines):
        ran = db.trials(task.prim_func, target)
        assert 1 <= ran <= TRIALS and f"{task.func} on core0" in line
        assert f"{ran} trials ({ran} now" in line
        assert db.best_seconds(task.prim_func, target) == pytest.approx(
            min(np.mean([float(x) for x in r.run_secs]) for r in db.records(task.prim_func,
                                                                           target)))
        defaults = [r for r in db.records(task.prim_func, target)
                    if db.is_default(r, task.prim_func, target)]
        assert len(defaults) == 1 and len(db.records(task.prim_func, target)) == ran + 1
        whose = "the default schedule" if db.is_default(
            db.records(task.prim_func, target)[0], task.prim_func, target) else "MetaSchedule's"
        load = db.retime_load(task.prim_func, target)
        assert f"({whose}, timed again at load {load:.1f}), {ran} trials" in line


def test_kernels_are_tuned_the_most_work_first(tuned):
    _, _, _, stdout, mod, graph = tuned
    tasks = _tasks(mod, graph)
    calls: dict[str, list] = {}
    for op in graph.ops:
        calls.setdefault(op.func or op.name, []).append(op)
    assert [(t.ops, t.flops) for t in tasks] == [
        (len(calls[t.func]), pytest.approx(sum(op.flops for op in calls[t.func])))
        for t in tasks]
    want = sorted(calls, key=lambda f: -sum(op.flops for op in calls[f]))  # (stable)
    assert [t.func for t in tasks] == want != list(calls)  # the reshape, 0 flops, moved last
    lines = [s for s in stdout.splitlines() if s.startswith("  [")]
    assert [line.split()[1] for line in lines] == want


def test_a_flops_share_keeps_each_targets_heaviest_kernels(tmp_path):
    """Of each target's kernels, the fewest of the heaviest that hold the share."""
    conv_onnx(tmp_path / "conv.onnx")
    tasks = _tasks(*load_module(tmp_path / "conv.onnx", SHAPES), units=("cpu", "core0"))
    targets = {target_key(t.target) for t in tasks}
    assert len(targets) == 2 and heaviest(tasks, 1.0) == tasks  # (0-flop reshape kept)
    assert len(heaviest(tasks, 0.5)) == len(targets)  # the conv of each: a share per target
    for share in (0.5, 0.99, 0.999999):
        kept = heaviest(tasks, share)
        for target in targets:
            mine = [t for t in tasks if target_key(t.target) == target]
            held = [t for t in kept if target_key(t.target) == target]
            total = sum(t.flops for t in mine)
            assert held == mine[:len(held)] and len(held) < len(mine)
            assert sum(t.flops for t in held) >= share * total > \
                sum(t.flops for t in held[:-1])
    assert {id(t) for t in heaviest(tasks[::-1], 0.99)} == \
        {id(t) for t in heaviest(tasks, 0.99)}  # whatever order they come in
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        heaviest(tasks, 0.0)


def _finalists(db_dir, task) -> list[dict]:
    path = db_dir / target_dir_name(task.target) / FINALISTS
    key = format(tvm_ffi.structural_hash(workload(task.prim_func)), "x")
    return [x for x in map(json.loads, path.read_text().splitlines()) if x["workload"] == key]


def test_finalists_are_timed_again_and_rank_the_kernel(tuned, tmp_path):
    """At the end of each kernel's tuning its best candidates as recorded and its default
    schedule are timed again, one line each kernel; their new times rank it (so a build
    takes the fastest of them), until the kernel has other trials."""
    _, _, db_dir, _, mod, graph = tuned
    db = KernelDatabase(db_dir)
    for task in _tasks(mod, graph):
        f, t = task.prim_func, task.target
        (line,) = _finalists(db_dir, task)
        seconds = {x["trace"]: x["seconds"] for x in line["finalists"]}
        assert line["trials"] == db.trials(f, t) and db.retimed(f, t)
        assert line["load"] >= 0 and db.retime_load(f, t) == line["load"]  # (this host's)
        assert 2 <= len(seconds) <= min(FINALISTS_KEPT, db.trials(f, t)) + 1  # + the default
        assert len(seconds) == len(line["finalists"])  # each schedule once
        if task == _conv(_tasks(mod, graph)):  # (a space with more candidates than trials)
            assert len(seconds) == TRIALS + 1
        records = db.records(f, t)
        assert [record_seconds(r) for r in records] == sorted(seconds.values())
        assert sum(db.is_default(r, f, t) for r in records) == 1
        fastest = min(seconds, key=seconds.get)
        assert db.tag(f, t) == (UNTUNED if db.is_default(records[0], f, t)
                                else f"tuned-{fastest}")
    conv = _conv(_tasks(mod, graph))
    copy = tmp_path / "kdb"
    shutil.copytree(db_dir, copy)
    (line,) = _finalists(copy, conv)
    with open(copy / target_dir_name(conv.target) / FINALISTS, "a") as fh:  # of other trials
        fh.write(json.dumps({**line, "trials": line["trials"] - 1}) + "\n")
    stale = KernelDatabase(copy)
    assert not stale.retimed(conv.prim_func, conv.target)
    recorded = stale.records(conv.prim_func, conv.target)  # as MetaSchedule timed them
    assert len(recorded) == TRIALS + 1
    assert [record_seconds(r) for r in recorded] != [
        record_seconds(r) for r in db.records(conv.prim_func, conv.target)]


def test_a_build_takes_the_faster_of_the_default_and_the_tuned_schedule(tuned):
    """The default schedule, measured by the same runner, is a record like MetaSchedule's:
    a build uses the fastest record of each kernel, the default schedule when it is the
    default's (and names it as an untuned kernel, so the cache shares its library), on a
    CPU its ``exp`` then polynomials as the candidates' were (``fast_math``)."""
    _, _, db_dir, _, mod, graph = tuned
    db = KernelDatabase(db_dir)
    for task in _tasks(mod, graph):
        fastest = db.records(task.prim_func, task.target)[0]
        built = scheduled(task.prim_func, task.target, db)
        if db.is_default(fastest, task.prim_func, task.target):
            want = default_schedule(task.prim_func, task.target)
            assert db.tag(task.prim_func, task.target) == UNTUNED
        else:
            want = fastest.as_measure_candidate().sch.mod["main"]  # (its trace applied)
            assert db.tag(task.prim_func, task.target).startswith("tuned-")
        want = for_target(want, task.target)
        assert tvm_ffi.structural_equal(built.without_attr("global_symbol"),
                                        want.without_attr("global_symbol"))


def test_the_runner_runs_kernels_on_the_units_thread_pool(tmp_path):
    """MetaSchedule's local runner times a kernel on the pool the unit's worker runs it on
    (TVM's default here is one thread: a two-core unit's kernels were tuned for one)."""
    mod, graph = load_module("seed_te")
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc)}
    profile = load_profile("host")
    tuner = KernelTuner(KernelDatabase(tmp_path / "k", create=True), KernelTuning(trials=1))

    def pool_of_this_thread() -> tuple[list[int], int]:  # nested: sent to the worker whole
        import os

        import tvm

        return sorted(os.sched_getaffinity(0)), int(tvm.get_global_func("runtime.NumThreads")())

    for unit in ("cpu", "core0"):
        task = kernel_tasks(funcs, graph, profile, [unit])[0]
        want = (sorted(profile.unit(unit).cpus), len(profile.unit(unit).cpus))
        assert tuner.runner(task).pool.submit(pool_of_this_thread).result() == want


def _second_job(tuned, copy, *options) -> tuple[str, list[str]]:
    """``tune-kernels`` again, with ``options``, on a copy of the tuned database: its stdout
    and the finalists' lines it appended (the records and finalists before it left as
    they were)."""
    _, model, db_dir, _, mod, graph = tuned
    shutil.copytree(db_dir, copy)
    records = next(copy.iterdir()) / RECORDS
    finalists = records.parent / FINALISTS
    before, timed = records.read_bytes(), finalists.read_bytes()
    again = cli("tune-kernels", model, "--input-shapes", SHAPES_ARG, "--hw", "host",
                "--unit", "core0", "--trials", TRIALS, "--kernel-db", copy, *options)
    assert again.returncode == 0, again.stderr
    conv = _conv(_tasks(mod, graph))
    assert f"{conv.func} on core0 (1 ops)" in again.stdout
    assert f"{TRIALS} trials (none now)" in again.stdout
    assert records.read_bytes()[:len(before)] == before  # appended to, never rewritten
    assert finalists.read_bytes()[:len(timed)] == timed
    return again.stdout, finalists.read_bytes()[len(timed):].decode().splitlines()


def test_a_second_job_measures_only_what_the_budget_has_left(tuned, tmp_path):
    _, _, _, _, mod, graph = tuned
    copy = tmp_path / "kdb"
    _, again = _second_job(tuned, copy)
    conv = _conv(_tasks(mod, graph))
    # timed again: only the kernels MetaSchedule measured again (those short of the budget)
    assert len(again) < len(_tasks(mod, graph))
    db = KernelDatabase(copy)
    for line in map(json.loads, again):
        assert line["trials"] <= TRIALS and len({f["trace"] for f in line["finalists"]}) == \
            len(line["finalists"])  # (MetaSchedule may measure a candidate twice)
    assert not _finalists(copy, conv)[1:] and db.retimed(conv.prim_func, conv.target)
    assert KernelDatabase(copy).trials(conv.prim_func, conv.target) == TRIALS


def test_retime_times_every_kernels_finalists_again(tuned, tmp_path):
    _, _, db_dir, _, mod, graph = tuned
    copy = tmp_path / "kdb"
    stdout, lines = _second_job(tuned, copy, "--retime")
    tasks, db = _tasks(mod, graph), KernelDatabase(copy)
    assert len(lines) == len(tasks)
    for task, line in zip(tasks, map(json.loads, lines)):  # each once, as the job went
        old = _finalists(db_dir, task)[-1]
        assert line["workload"] == old["workload"]
        assert line["trials"] == db.trials(task.prim_func, task.target) >= old["trials"]
        assert [record_seconds(r) for r in db.records(task.prim_func, task.target)] == \
            sorted(f["seconds"] for f in line["finalists"])  # the new times rank it
    conv = _conv(tasks)  # at its budget: no trial, the same finalists timed again
    assert {f["trace"] for f in _finalists(copy, conv)[-1]["finalists"]} == \
        {f["trace"] for f in _finalists(db_dir, conv)[-1]["finalists"]}
    assert stdout.count("timed again at load") == len(tasks)


def test_a_job_with_a_flops_share_tunes_only_the_heaviest_kernels(tuned, tmp_path):
    _, _, _, _, mod, graph = tuned
    stdout, lines = _second_job(tuned, tmp_path / "kdb", "--flops-share", "0.9", "--retime")
    tasks = _tasks(mod, graph)
    conv = _conv(tasks)
    share = conv.flops / sum(t.flops for t in tasks)
    assert 0.9 <= share < 1 and conv is tasks[0]
    assert f"tuning the 1 heaviest of {len(tasks)} kernels ({share:.1%} of the flops)" in stdout
    assert [s.split()[:2] for s in stdout.splitlines() if s.startswith("  [")] == \
        [["[1/1]", conv.func]]
    assert [json.loads(line)["workload"] for line in lines] == \
        [format(tvm_ffi.structural_hash(workload(conv.prim_func)), "x")]  # only it retimed


def test_a_build_uses_the_best_record_and_keeps_the_outputs(tuned, metaschedule_only,
                                                           tmp_path):
    _, _, _, _, mod, graph = tuned
    db, profile = KernelDatabase(metaschedule_only), load_profile("host")
    conv = _conv(_tasks(mod, graph))
    tuned_conv = scheduled(conv.prim_func, conv.target, db)
    assert not tvm_ffi.structural_equal(tuned_conv, default_schedule(conv.prim_func,
                                                                    conv.target))
    assert tvm_ffi.structural_equal(tuned_conv, db.schedule(conv.prim_func, conv.target))
    program = read_program(mod)
    with_db = KernelLibraries(program, graph, profile, tmp_path, kernels=db)
    without = KernelLibraries(program, graph, profile, tmp_path)
    assert with_db.path("core0") != without.path("core0")  # another library, not the cache's
    assert with_db.path("cpu") == without.path("cpu")  # nothing tuned for cpu's target
    x = np.random.default_rng(3).normal(size=SHAPES["data"]).astype(np.float32)
    with Runtime(mod, graph, profile, cache_dir=tmp_path, kernels=db) as rt:
        a = rt.assemble(SearchSpace(graph, profile).uniform("core0"))
        out = rt.run(a, [x])
        assert rt.libraries.compiled == [str(with_db.path("core0"))]
    np.testing.assert_allclose(out[0], conv_reference(x), rtol=1e-4, atol=1e-6)


def test_the_vm_build_and_its_build_pool_use_the_database(tuned, metaschedule_only, tmp_path):
    """The Relax VM path (``vm_build.build``, the build pool of the VM measurers,
    calibrate's whole-model timing on a board) schedules each kernel as the runtime's
    libraries do: the database's best record for the unit's target, else the default."""
    from autoplace.deploy.pool import BuildPool
    from autoplace.deploy.run import Loaded
    from autoplace.deploy.vm_build import build

    _, _, _, _, mod, graph = tuned
    db_dir = metaschedule_only
    db, profile = KernelDatabase(db_dir), load_profile("host")
    conv = _conv(_tasks(mod, graph))
    placement = SearchSpace(graph, profile).uniform("core0")
    with_db = build(mod, placement, profile, graph=graph, kernels=db)
    plain = build(mod, placement, profile, graph=graph)

    def conv_kernel(built):
        (pf,) = [f for gv, f in built.module.functions.items()
                 if gv.name_hint.startswith(conv.func + "_t")]
        return pf.without_attr("target")

    want = db.schedule(conv.prim_func, conv.target)
    assert tvm_ffi.structural_equal(conv_kernel(with_db), want.without_attr("target")
                                    if "target" in (want.attrs or {}) else want)
    assert not tvm_ffi.structural_equal(conv_kernel(plain), conv_kernel(with_db))
    x = np.random.default_rng(4).normal(size=SHAPES["data"]).astype(np.float32)
    loaded = with_db.load()
    np.testing.assert_allclose(loaded.run(loaded.inputs([x]))[0], conv_reference(x),
                               rtol=1e-4, atol=1e-6)
    pool = BuildPool(mod, graph, profile, tmp_path, workers=1, kernels=db_dir)
    (art,) = pool.build([placement])
    pool.close()
    assert art.ok, art.error
    lib = Loaded(tvm.runtime.load_module(art.path))
    np.testing.assert_allclose(lib.run(lib.inputs([x]))[0], conv_reference(x),
                               rtol=1e-4, atol=1e-6)


def test_bad_databases_and_units_are_one_line(tuned, tmp_path):
    _, model, db_dir, _, _, _ = tuned
    log = tmp_path / "t.jsonl"
    ok = cli("tune", model, "--input-shapes", SHAPES_ARG, "--hw", "host", "--trials", 2,
             "--log", log, "--no-progress")
    assert ok.returncode == 0, ok.stderr
    compile_ = ("compile", model, "--input-shapes", SHAPES_ARG, "--hw", "host", "--log", log,
                "-o", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    one_line_error(cli(*compile_, "--kernel-db", tmp_path / "none"),
                   f"kernel database {tmp_path / 'none'}: no such directory")
    bad = tmp_path / "bad"
    shutil.copytree(db_dir, bad)
    records = next(p for p in bad.iterdir()) / RECORDS
    records.write_text(records.read_text() + "not json\n")
    one_line_error(cli(*compile_, "--kernel-db", bad), str(records.parent),
                   "cannot be read", "not json")
    bad = tmp_path / "bad-finalists"
    shutil.copytree(db_dir, bad)
    finalists = next(p for p in bad.iterdir()) / FINALISTS
    finalists.write_text(finalists.read_text() + '{"workload": "1", "trials": 2, '
                         '"finalists": [{"trace": "a", "seconds": NaN}]}\n')
    one_line_error(cli(*compile_, "--kernel-db", bad), str(finalists),
                   "line", "is not a re-timing of finalists")
    text = next(iter(finalists.read_text().splitlines()))
    finalists.write_text(json.dumps({**json.loads(text), "load": -1.0}) + "\n")
    one_line_error(cli(*compile_, "--kernel-db", bad), f"{finalists}: line 1 ",
                   "a load of at least 0")
    one_line_error(cli("tune-kernels", model, "--input-shapes", SHAPES_ARG, "--hw", "host",
                       "--unit", "npu", "--kernel-db", tmp_path / "k"),
                   "--unit 'npu': profile 'host' has no such unit (its units: cpu, core0")
    one_line_error(cli("tune-kernels", "seed_te", "--hw", "host", "--kernel-db",
                       tmp_path / "k", "--rpc-key", "x"), "--rpc-tracker and --rpc-key")


def test_a_killed_job_leaves_a_database_that_reads(tuned, tmp_path):
    """A line MetaSchedule was writing when the job died is dropped; the others are kept."""
    _, _, db_dir, _, mod, graph = tuned
    copy = tmp_path / "kdb"
    shutil.copytree(db_dir, copy)
    records = next(copy.iterdir()) / RECORDS
    whole = records.read_bytes()
    records.write_bytes(whole + whole.splitlines(keepends=True)[0][:40])  # torn last line
    conv = _conv(_tasks(mod, graph))
    assert KernelDatabase(copy).trials(conv.prim_func, conv.target) == TRIALS
    assert records.read_bytes() == whole


def test_kernels_tuned_on_a_board_are_the_kernels_calibrate_times(tmp_path):
    """A stock TVM RPC server (not autoplace serve) measures MetaSchedule's candidates;
    ``calibrate --kernel-db`` then times the library built from those records."""
    tracker = Tracker("127.0.0.1", port=9400, port_end=9599, silent=True)
    addr = f"127.0.0.1:{tracker.port}"
    server = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker",
                               addr, "--key", "board", "--host", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_registered(addr, "board", 1)
        proc = cli("tune-kernels", "seed_te", "--hw", "host", "--unit", "core0", "--trials",
                   1, "--kernel-db", tmp_path / "kdb", "--rpc-tracker", addr, "--rpc-key",
                   "board")
    finally:
        server.kill()
        server.wait()
        tracker.terminate()
    assert proc.returncode == 0, proc.stderr
    assert f"on {addr} key board" in proc.stdout
    mod, graph = load_module("seed_te")
    db = KernelDatabase(tmp_path / "kdb")
    for task in _tasks(mod, graph):
        assert db.trials(task.prim_func, task.target) == 1
        assert db.best_seconds(task.prim_func, task.target) > 0
    cal = cli("calibrate", "--hw", "host", "--unit", "core0", "--model", "seed_te",
              "--kernel-db", tmp_path / "kdb", "--cache-dir", tmp_path / "cache", "-o",
              tmp_path / "cal.toml", "--repeat", 1)
    assert cal.returncode == 0, cal.stderr
    tuned = KernelLibraries(read_program(mod), graph, load_profile("host"),
                            tmp_path / "cache", kernels=db).path("core0")
    assert [p.name for p in (tmp_path / "cache").glob("seed_te-*.so")] == [tuned.name]


def test_a_boards_candidates_are_linked_here_by_its_cross_compiler(tmp_path):
    """Kernels of an aarch64 board, tuned through RPC: MetaSchedule's builder links each
    candidate (and the default schedule) into an aarch64 shared library exporting the
    kernel, so a board without a compiler runs it; the default's record is built so too."""
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from autoplace.deploy.elf import AARCH64, elf_machine
    from autoplace.deploy.schedule import traced_default_schedule

    cross = need_cross()
    board = tmp_path / "board.toml"
    board.write_text(board_toml(target='kind = "llvm", mtriple = "aarch64-linux-gnu", '
                                       'num-cores = 4'))
    mod, graph = load_module("seed_te")
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc)}
    profile = load_profile(str(board))
    tasks = kernel_tasks(funcs, graph, profile, ["cpu"], on_board=True, cross_compiler=cross)
    assert {t.compiler for t in tasks} == {cross}
    tuner = KernelTuner(KernelDatabase(tmp_path / "k", create=True),
                        KernelTuning(trials=1, tracker="127.0.0.1:9", key="board"))
    sch = traced_default_schedule(workload(tasks[0].prim_func)["main"], tasks[0].target)
    (built,) = tuner.builder(tasks[0]).build([BuilderInput(sch.mod, tasks[0].target)])
    assert built.error_msg is None, built.error_msg
    assert elf_machine(built.artifact_path) == AARCH64
    symbols = subprocess.run([NM, "-D", built.artifact_path], capture_output=True, text=True)
    assert " T main" in symbols.stdout or " T __tvm_ffi_main" in symbols.stdout, symbols.stdout


def test_what_tune_kernels_cannot_do_here_is_one_line(tmp_path):
    """A target without num-cores (MetaSchedule needs one), a board's architecture measured
    on this host, a tracker nobody answers at: one line each, before any tuning."""
    board = tmp_path / "board.toml"
    board.write_text(board_toml())
    args = ("tune-kernels", "seed_te", "--hw", board, "--unit", "cpu", "--trials", 1,
            "--kernel-db", tmp_path / "k")
    one_line_error(cli(*args), "unit 'cpu': MetaSchedule tunes for a number of cores",
                   "board.toml")
    for share in ("0", "nan", "1.5", "half"):
        one_line_error(cli(*args, "--flops-share", share), "--flops-share", "(0, 1]",
                       start="autoplace tune-kernels: error:")
    board.write_text(board_toml(target='kind = "llvm", mtriple = "aarch64-linux-gnu", '
                                       'num-cores = 4'))
    one_line_error(cli(*args), "unit 'cpu' builds for aarch64", "on the board (--rpc-tracker")
    one_line_error(cli(*args, "--rpc-tracker", f"127.0.0.1:{free_port()}", "--rpc-key", "b"),
                   "cannot reach the RPC tracker at 127.0.0.1:")
    assert not (tmp_path / "k").exists()


def test_kernels_are_tuned_and_timed_reading_their_weights_packed(tmp_path):
    """A conv's weight is marked layout free as a library compiles it (its bias is not):
    MetaSchedule's candidates pack it (``RewriteLayout``) as the default schedule does;
    each record was timed without its packing, as a library runs it once it has split the
    packing off into one function, and packing then computing gives the conv's output; a
    second job with a larger budget tunes it further."""
    from deploy.test_prepack import SSE2, _built, _reference, conv_bias_relu

    from autoplace.deploy.kernel_tuning import KernelTask
    from autoplace.deploy.prepack import free_params, mark_weights, split_packs

    profile = load_profile("host")
    plain = conv_bias_relu((1, 16, 10, 10), (32, 16, 3, 3))
    func = mark_weights(plain, [1, 2])
    assert free_params(func) == {1}
    target = unit_target(profile.unit("core0"), profile)
    db = KernelDatabase(tmp_path / "kdb", create=True)
    KernelTuner(db, KernelTuning(trials=TRIALS)).tune_all(
        [KernelTask("conv", func, target, ("core0",), 1, (0,))], progress=lambda _: None)
    args, want, got = _reference(plain)
    records = db.records(func, target)
    assert sum(db.is_default(r, func, target) for r in records) == 1 and len(records) == 3
    for r in records:
        compute, (pack,) = split_packs(r.as_measure_candidate().sch.mod["main"], 1)
        assert [list(a.shape) for a in r.args_info] == [
            [int(d) for d in p.ty.shape] for p in compute.params]  # timed as it runs
        packed = tvm.runtime.empty(pack.shape, pack.dtype, tvm.cpu())
        _built(pack.func, SSE2)(tvm.runtime.tensor(args[1]), packed)
        assert pack.param == 1 and (pack.shape != args[1].shape or not np.array_equal(
            packed.numpy(), args[1]))  # re-laid (MetaSchedule may keep the shape: (3, 3) swapped)
        _built(compute, SSE2)(tvm.runtime.tensor(args[0]), packed, tvm.runtime.tensor(args[2]),
                              got)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    # a larger budget resumes the kernel: MetaSchedule's search starts from its best records
    # (not the default schedule's, whose packed weight its RewriteLayout cannot pack again)
    KernelTuner(db, KernelTuning(trials=TRIALS + 1)).tune_all(
        [KernelTask("conv", func, target, ("core0",), 1, (0,))], progress=lambda _: None)
    assert KernelDatabase(tmp_path / "kdb").trials(func, target) == TRIALS + 1


def test_a_kernel_whose_weight_pack_pads_is_tuned_and_its_default_measured(tmp_path):
    """A conv onto channel blocks narrower than a vector packs its weight padded
    (:mod:`autoplace.deploy.channel_pairs`: ``if_then_else``, not the plain copy
    MetaSchedule's ``RemoveWeightLayoutRewriteBlock`` takes): its default schedule is
    still built and timed without its packing (its record read the packed weight) and
    ranked beside MetaSchedule's candidates."""
    from deploy.test_channel_pairs import blocks_of_4

    from autoplace.deploy.kernel_tuning import KernelTask
    from autoplace.deploy.prepack import split_packs

    profile = load_profile("host")
    func, target = blocks_of_4(), unit_target(profile.unit("core0"), profile)
    db = KernelDatabase(tmp_path / "kdb", create=True)
    KernelTuner(db, KernelTuning(trials=TRIALS)).tune_all(
        [KernelTask("conv", func, target, ("core0",), 1, (0,))], progress=lambda _: None)
    assert db.has_default(func, target)
    (default,) = [r for r in db.records(func, target) if db.is_default(r, func, target)]
    compute, (pack,) = split_packs(default_schedule(func, target), 1)
    assert pack.shape[0] * pack.shape[-1] > 20  # (padded)
    assert [list(a.shape) for a in default.args_info] == [
        [int(d) for d in p.ty.shape] for p in compute.params]


def test_a_job_resumes_a_database_holding_an_earlier_rules_default(tmp_path):
    """After the default rules change, a database holds the earlier default's record, which
    the current default no longer matches: a job with a larger budget resumes past it
    (MetaSchedule's search leaves every rule-made record out: replaying one, its
    ``RewriteLayout`` dies on the weight packed already) and ranks it with the rest."""
    from deploy.test_prepack import conv_bias_relu
    from tvm.s_tir import meta_schedule as ms

    from autoplace.deploy.kernel_db import made_by_rules
    from autoplace.deploy.kernel_tuning import KernelTask
    from autoplace.deploy.prepack import mark_weights
    from autoplace.deploy.schedule import traced_default_schedule

    profile = load_profile("host")
    func = mark_weights(conv_bias_relu((1, 16, 10, 10), (32, 16, 3, 3)), [1, 2])
    target = unit_target(profile.unit("core0"), profile)
    db = KernelDatabase(tmp_path / "kdb", create=True)
    task = KernelTask("conv", func, target, ("core0",), 1, (0,))
    KernelTuner(db, KernelTuning(trials=TRIALS)).tune_all([task], progress=lambda _: None)
    # an earlier rules' default: the default schedule for the baseline CPU's vectors
    earlier = traced_default_schedule(workload(func)["main"],
                                      tvm.target.Target({"kind": "llvm", "num-cores": 1}))
    store = db.database(target)
    (default,) = [r for r in db.records(func, target) if db.is_default(r, func, target)]
    store.commit_tuning_record(ms.database.TuningRecord(
        earlier.trace, store.commit_workload(workload(func)), [1e-9], target,
        default.args_info))
    again = KernelDatabase(tmp_path / "kdb")
    best = again.records(func, target)[0]
    assert made_by_rules(best) and not again.is_default(best, func, target)
    assert again.trials(func, target) == TRIALS + 1  # (the earlier default counts as one)
    KernelTuner(again, KernelTuning(trials=TRIALS + 2)).tune_all([task],
                                                                  progress=lambda _: None)
    assert KernelDatabase(tmp_path / "kdb").trials(func, target) == TRIALS + 2
