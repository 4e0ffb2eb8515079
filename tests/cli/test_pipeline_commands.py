"""``autoplace pipeline``: the DP's plan printed as a user reads it; one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_main import assert_one_line_error, cli

from autoplace.hardware.load import load_profile
from autoplace.measure.limits import Limits
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline, evaluate
from autoplace.pipeline.equal_flops import equal_flops
from autoplace.pipeline.log import best_plan, read_lines
from autoplace.pipeline.manifest import read_manifest
from autoplace.pipeline.plan_space import parse_plan, plan_of


def test_the_plan_printed_is_the_dynamic_programs(tmp_path):
    p = cli("pipeline", "squeezenet", "--hw", "mesh", "--manifest", tmp_path / "plan.json",
            "--plot", tmp_path / "pics")
    assert p.returncode == 0, p.stderr
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(load_profile("mesh")))
    plan = best_pipeline(costs)
    f = evaluate(plan, costs)
    assert (f"{f.throughput:,.1f} inferences/s analytic bound") in p.stdout
    assert (f"; {plan.replicas} copies of a pipeline of {len(plan.stages)} stages on "
            f"{plan.pes} PEs") in p.stdout
    stages = re.findall(r"ops +(\d+)-(\d+) .*: (\d+) PEs", p.stdout)
    assert [(int(a), int(b) + 1, int(k)) for a, b, k in stages] == \
        [(s.start, s.end, s.pes) for s in plan.stages]
    naive = evaluate(equal_flops(costs), costs).throughput
    assert f"equal-FLOP stages: {naive:,.1f} inferences/s" in p.stdout
    assert naive < f.throughput
    assert read_manifest(tmp_path / "plan.json", costs) == plan
    assert all((tmp_path / "pics" / f"{name}.png").stat().st_size > 10_000
               for name in ("grid", "period"))


def test_a_search_that_runs_out_of_new_plans_says_so(tmp_path):
    """seed_te (4 ops) on a 1x2 mesh: the moves reach 20 plans in all, measured long before
    1,000 trials; the search says it stopped short, and why (on the bundled 16 PEs, where
    the best plan's neighbourhood runs dry first, the search goes on from the next best
    plans and measures all 1,000)."""
    mesh = tmp_path / "mesh1x2.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh.write_text(text.replace("rows = 4", "rows = 1").replace("cols = 4", "cols = 2"))
    t = cli("pipeline", "seed_te", "--hw", mesh, "--trials", 1000)
    assert t.returncode == 0, t.stderr
    done = int(re.search(r"search: (\d+) trials in", t.stdout).group(1))
    assert 2 <= done < 1000
    assert "stopped short of the 1000 trials asked: every plan the moves reach from the " \
           "measured plans is measured" in t.stdout
    # draws are bounded per start plan (DRY_DRAWS), not by the trials asked (issue 31:
    # 50 x N draws never ended at N = 10^30)
    t = cli("pipeline", "seed_te", "--hw", mesh, "--trials", 10**30, timeout=60)
    assert t.returncode == 0, t.stderr
    assert f"stopped short of the {10**30} trials asked" in t.stdout
    # tune --objective throughput counts the DP's plan besides the trials asked
    t = cli("tune", "seed_te", "--hw", mesh, "--objective", "throughput", "--trials",
            1000, "--log", tmp_path / "t.jsonl", "--no-progress")
    assert t.returncode == 0, t.stderr
    assert "stopped short of the 1000 trials asked" in t.stdout
    t = cli("pipeline", "squeezenet", "--hw", "mesh", "--trials", 1000)
    assert t.returncode == 0, t.stderr
    assert re.search(r"search: 1000 trials in", t.stdout) and "stopped short" not in t.stdout


def test_what_does_not_fit_is_one_line():
    assert_one_line_error(cli("pipeline", "resnet50", "--hw", "mesh", "--pes", 2),
                          "resnet50 does not fit 2 PEs of mesh", "need at least 11 PEs")
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "soc"), "has no [mesh]")
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "mesh", "--pes", 17),
                          "--pes 17", "has 16 PEs")


def test_compile_then_run_a_pipeline_here_and_on_boards(tmp_path):
    """``pipeline --trials --log`` logs a search; ``compile --objective throughput --log`` on
    a mesh writes a library per stage of the log's best plan and the manifest; ``run DIR``
    streams inferences through them, checks every output against the unplaced model (random
    weights), and times each stage on an RPC server."""
    from references import randomized_onnx

    from autoplace.measure.server import LocalCluster

    model = randomized_onnx("squeezenet", tmp_path / "squeezenet.onnx")
    out, log = tmp_path / "piped", tmp_path / "pipeline.jsonl"
    t = cli("pipeline", model, "--hw", "mesh", "--trials", 40, "--log", log, timeout=600)
    assert t.returncode == 0, t.stderr
    assert re.search(r"search: 40 trials in [\d.]+ s", t.stdout)
    assert "stopped short" not in t.stdout
    p = cli("compile", model, "--hw", "mesh", "--objective", "throughput", "--log", log,
            "-o", out, timeout=600)
    assert p.returncode == 0, p.stderr
    costs = StageCosts(load_graph(model), MeshMachine.of(load_profile("mesh")))
    plan, _ = best_plan(log, costs, load_profile("mesh").hash)
    assert evaluate(plan, costs).fits and len(read_lines(log)) == 40
    best = cli("best", log, "--objective", "throughput")  # the log is the tuner's records
    assert best.returncode == 0, best.stderr
    stages = ", ".join(f"ops {s.start}-{s.end - 1} on {s.pes} PE" for s in plan.stages)
    assert stages in re.sub(r"PEs", "PE", best.stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    assert read_manifest(out / "manifest.json", costs) == plan
    assert [s["library"]["file"] for s in manifest["stages"]] == \
        [f"stage{i}.so" for i in range(len(plan.stages))]
    # the conv2d ops the plan splits are split inside the libraries (as far as they divide)
    shards = {n: v for s in manifest["stages"] for n, v in s["library"]["shards"].items()}
    split = {op["name"]: op["split"] for s in manifest["stages"] for op in s["ops"]}
    assert shards and all(2 <= v["ways"] <= split[n] for n, v in shards.items())
    assert re.search(rf"{len(shards)} of the \d+ conv2d/matmul ops the plan splits", p.stdout)
    r = cli("run", out, "--inferences", 3, "--check", timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"in {len(plan.stages)} stages on this host; 3 inferences" in r.stdout
    assert "check: all 3 outputs equal the unplaced" in r.stdout
    with LocalCluster(load_profile("mesh"), "mesh-stages") as cluster:
        b = cli("run", out / "manifest.json", "--inferences", 1, "--repeat", 2, "--rpc-tracker",
                cluster.tracker, "--rpc-key", "mesh-stages", timeout=600)
        dead = cli("run", out, "--inferences", 1, "--rpc-tracker", cluster.tracker,
                   "--rpc-key", "nobody-here")
    assert_one_line_error(dead, "rpc: no server under key 'nobody-here'")
    assert b.returncode == 0, b.stderr
    times = [float(t) for t in re.findall(r"stage \d+ on mesh-stages: ([\d.]+) ms", b.stdout)]
    assert len(times) == len(plan.stages) and min(times) > 0
    assert f"rpc: period {max(times):.4f} ms" in b.stdout
    stage = out / "stage1.so"
    stage.write_bytes(stage.read_bytes()[:4096])  # truncated: refused, not mapped (SIGBUS)
    assert_one_line_error(cli("run", out), "stages[1].library: 'stage1.so'", "SHA-256 differs")
    stage.unlink()
    assert_one_line_error(cli("run", out), "stages[1].library: 'stage1.so': no such file")
    manifest["version"] = 99
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert_one_line_error(cli("run", out), "version: this autoplace reads 1, got 99")


def test_compile_needs_a_log_unless_it_builds_a_pipeline(tmp_path):
    assert_one_line_error(cli("compile", "squeezenet", "--hw", "soc", "-o", "x.so"),
                          "--log LOG is needed")
    log = tmp_path / "t.jsonl"
    log.write_text("")
    assert_one_line_error(cli("compile", "squeezenet", "--hw", "soc", "--log", log, "--pes", 4,
                              "-o", "x.so"), "--pes only go with --objective throughput")
    assert_one_line_error(cli("run", tmp_path / "model.so", "--inferences", 2),
                          "--inferences only go with a compiled pipeline")


def test_a_malformed_pipeline_log_is_one_line(tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"kind": "pipeline-trial"}\n')
    p = cli("pipeline", "squeezenet", "--hw", "mesh", "--trials", 5, "--log", log)
    assert_one_line_error(p, "bad.jsonl:1:")
    assert log.read_text() == '{"kind": "pipeline-trial"}\n' and not p.stdout  # before planning


def test_a_plan_past_the_graphs_last_op_is_refused_where_it_would_be_the_best(tmp_path):
    """A record whose last stage ends past the graph's 41 ops, and which is the best by
    latency and by throughput: ``best`` and ``compile`` say so in one line (``best``
    printed it as the best)."""
    log = tmp_path / "p.jsonl"
    ran = cli("pipeline", "squeezenet", "--hw", "mesh", "--trials", 4, "--log", log)
    assert ran.returncode == 0, ran.stderr
    last = json.loads(log.read_text().splitlines()[-1])
    last["trial"] += 1
    last["result"].update(latency_s=1e-6, period_s=1e-7)
    last["pipeline"].update(stages=[[0, 20, 2, None, None, None], [20, 60, 2, None, None, None]],
                            status="ok", period_s=1e-7)
    with log.open("a") as f:
        f.write(json.dumps(last) + "\n")
    before = log.read_bytes()
    assert_one_line_error(cli("best", log), f"the best record (trial {last['trial']})",
                          "covers ops [0, 60), the graph has 41 (squeezenet)")
    assert_one_line_error(cli("compile", "squeezenet", "--hw", "mesh", "--objective",
                              "throughput", "--log", log, "-o", tmp_path / "out"),
                          f"the best trial ({last['trial']})", "covers ops [0, 60)")
    assert log.read_bytes() == before


def test_a_study_of_another_objective_or_graph_is_refused_and_left_as_it_was(tmp_path):
    """The journal holds a tuning study of seed_te (latency); a pipeline search, or a tuning
    job of another graph, asked to continue it is refused in one line ("not a genome of 41
    ops" before), and neither the journal nor the log is written (Optuna's create with
    load_if_exists appended a create-study operation; the log was made empty)."""
    journal = tmp_path / "j.log"
    storage = ("--storage", f"journal:{journal}", "--study", "S")
    tuned = cli("tune", "seed_te", "--hw", "soc", "--trials", 3, "--log", tmp_path / "t.jsonl",
                "--no-progress", *storage)
    assert tuned.returncode == 0, tuned.stderr
    before = journal.read_bytes()
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "mesh", "--trials", 3,
                              "--log", tmp_path / "p.jsonl", *storage),
                          "study 'S'", "minimises latency, not throughput")
    assert journal.read_bytes() == before and not (tmp_path / "p.jsonl").exists()
    assert_one_line_error(cli("tune", "squeezenet", "--hw", "soc", "--trials", 3, "--log",
                              tmp_path / "q.jsonl", "--no-progress", "--resume", *storage),
                          "study 'S'", "is a study of graph 'seed_te'", "not 'squeezenet'")
    assert journal.read_bytes() == before and not (tmp_path / "q.jsonl").exists()


def test_a_pipeline_search_in_an_optuna_study_resumes_without_measuring_again(tmp_path):
    """The tuning loop's study: each trial the plan's text as its genome, its value the
    seconds per inference over every copy; run again without a log, the search takes in
    the study's trials and measures none of them again."""
    import optuna

    from autoplace.search.study_storage import open_storage

    url = f"journal:{tmp_path / 'study.journal'}"
    args = ("pipeline", "squeezenet", "--hw", "mesh", "--storage", url, "--seed", 1)
    first = cli(*args, "--trials", 20, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    log = tmp_path / "pipeline-squeezenet-mesh.jsonl"  # the log, the source of truth
    assert [x["trial"] for x in read_lines(log)] == list(range(20))
    again = cli(*args, "--trials", 30, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "search: 30 trials in" in again.stdout
    assert "20 known from the log or study" in again.stdout
    storage = open_storage(url)
    (name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    assert study.user_attrs["objective"] == "throughput"
    done = [t for t in study.trials if "strategy" in t.user_attrs]
    assert sorted(t.user_attrs["trial"] for t in done) == list(range(30))
    plans = [parse_plan(t.user_attrs["genome"]) for t in done]
    assert len(set(plans)) == 30 and done[0].user_attrs["strategy"] == "dp"
    ok = [t for t in done if t.state == optuna.trial.TrialState.COMPLETE]
    best = float(re.search(r"the best, trial \d+ \(\w+\), ([\d,.]+)", again.stdout)
                 .group(1).replace(",", ""))
    assert ok and 1 / study.best_value == pytest.approx(best, rel=1e-4)
    tuned = cli("tune", "squeezenet", "--hw", "soc", "--trials", 8, "--storage", url,
                "--study", "taken", "--log", tmp_path / "t.jsonl", "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    assert_one_line_error(cli(*args, "--study", "taken", cwd=tmp_path), "study 'taken'",
                          "minimises latency, not throughput")


def test_tune_for_throughput_on_a_mesh_searches_pipelines(tmp_path):
    """``tune --objective throughput`` on a mesh profile runs the pipeline search (the DP's
    plans, then --trials more) into its log, which ``compile --objective throughput --log``
    reads; options of a placement search are refused before anything is logged."""
    log = tmp_path / "t.jsonl"
    t = cli("tune", "squeezenet", "--hw", "mesh", "--objective", "throughput", "--trials", 20,
            "--log", log, "--seed", 4, "--cost-model", "analytic", "--no-progress")
    assert t.returncode == 0, t.stderr
    assert "search: 22 trials in" in t.stdout  # the DP's two plans (held, streamed), then 20
    lines = read_lines(log)
    assert [x["trial"] for x in lines] == list(range(22))
    assert [x["move"] for x in lines[:2]] == ["dp", "dp-2"]
    assert {x["seed"] for x in lines} == {4}
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(load_profile("mesh")))
    plan, best = best_plan(log, costs, load_profile("mesh").hash)
    assert f"the best, trial {best.trial} ({best.strategy})" in t.stdout
    assert f"--objective throughput --log {log} -o piped/" in t.stdout
    other = tmp_path / "other.jsonl"
    bad = cli("tune", "squeezenet", "--hw", "mesh", "--objective", "throughput", "--log", other,
              "--storage", "bogus://x")
    assert_one_line_error(bad, "--storage bogus://x: unknown scheme")
    assert not other.exists() and "tuning squeezenet" in bad.stdout and "best:" not in bad.stdout
    for option, named in ((("--sampler", "tpe"), "--sampler"),
                          (("--measurer", "local"), "--measurer"),
                          (("--cost-model", "simulator"), "--cost-model simulator"),
                          (("--batch-size", "4"), "--batch-size"),
                          (("--candidates", "64"), "--candidates"),
                          (("--descent", "0"), "--descent"),
                          (("--append",), "--append"),
                          (("--warm-start", "x.jsonl"), "--warm-start")):
        assert_one_line_error(cli("tune", "squeezenet", "--hw", "mesh", "--objective",
                                  "throughput", "--log", other, *option),
                              f"{named} only go with a placement search")
        assert not other.exists()


def test_tune_for_throughput_within_limits_on_a_mesh(tmp_path):
    """``--max-energy`` and ``--max-latency`` bound a mesh's throughput search: the best
    printed is the best of the log within them, which ``compile`` (told the same limits, as
    the next step says) picks; where no plan keeps them it says so and gives no next step;
    ``--max-memory`` is refused in one line before anything is logged."""
    log, bound = tmp_path / "t.jsonl", "0.0015565"
    t = cli("tune", "squeezenet", "--hw", "mesh", "--objective", "throughput", "--trials", 64,
            "--max-energy", bound, "--log", log, "--no-progress")
    assert t.returncode == 0, t.stderr
    mesh = load_profile("mesh")
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(mesh))
    limits = Limits(energy_j=float(bound))
    _, best = best_plan(log, costs, mesh.hash, limits=limits)
    assert limits.admits(best.result)
    assert f"the best within --max-energy {bound}, trial {best.trial} (" in t.stdout
    assert f"--objective throughput --log {log} --max-energy {bound} -o piped/" in t.stdout
    none = cli("tune", "squeezenet", "--hw", "mesh", "--objective", "throughput", "--trials", 4,
               "--max-latency", "1e-9", "--log", tmp_path / "n.jsonl", "--no-progress")
    assert none.returncode == 0, none.stderr
    assert "no plan found within --max-latency 1e-09" in none.stdout
    assert "next:" not in none.stdout
    bad = cli("tune", "squeezenet", "--hw", "mesh", "--objective", "throughput", "--log",
              tmp_path / "m.jsonl", "--max-memory", "sram=1MiB")
    assert_one_line_error(bad, "--max-memory: a pipeline plan's memory is its PEs' local")
    assert not (tmp_path / "m.jsonl").exists()


def test_two_workers_share_a_pipeline_study_and_measure_nothing_twice(tmp_path):
    """Two ``--worker`` searches on one journal study, started together with the same seed:
    between their logs every plan once, the DP's plan once, trial numbers the study's and
    distinct, ``--trials`` counting the whole study."""
    import subprocess
    import sys

    import optuna

    from autoplace.search.study_storage import open_storage

    mesh = tmp_path / "mesh8.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh.write_text(text.replace("rows = 4", "rows = 8").replace("cols = 4", "cols = 8"))
    url = f"journal:{tmp_path / 'study.journal'}"
    procs = [subprocess.Popen(
        [sys.executable, "-m", "autoplace", "pipeline", "squeezenet", "--hw", str(mesh),
         "--trials", "40", "--storage", url, "--worker", "--log", str(tmp_path / f"w{i}.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    lines = read_lines(tmp_path / "w1.jsonl") + read_lines(tmp_path / "w2.jsonl")
    plans = [plan_of(x) for x in lines]
    assert len(lines) == 40 and len(set(plans)) == 40
    assert len({x["trial"] for x in lines}) == 40 and [x["move"] for x in lines].count("dp") == 1
    measured = [int(re.search(r"measured (\d+) of the study's", out).group(1))
                for out, _ in outs]
    assert sorted(measured) == sorted(len(read_lines(tmp_path / f"w{i}.jsonl")) for i in (1, 2))
    storage = open_storage(url)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0],
                              storage=storage)
    done = [t for t in study.trials if "strategy" in t.user_attrs]
    assert sorted(t.number for t in done) == sorted(x["trial"] for x in lines)
    assert_one_line_error(cli("pipeline", "squeezenet", "--hw", "mesh", "--storage", url,
                              "--worker"), "--worker needs --storage", "and --log")


def test_ctrl_c_keeps_every_trial_and_the_same_command_goes_on(tmp_path):
    """A search interrupted mid-way: exit 130, whole lines only, and run again it measures
    only the trials still to do (every plan once between the two runs)."""
    import signal
    import subprocess
    import sys
    import time

    mesh = tmp_path / "mesh16.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh.write_text(text.replace("rows = 4", "rows = 16").replace("cols = 4", "cols = 16"))
    log = tmp_path / "pipe.jsonl"
    cmd = [sys.executable, "-m", "autoplace", "pipeline", "densenet121", "--hw", str(mesh),
           "--trials", "100000", "--log", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and (not log.exists() or log.stat().st_size < 30_000):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "autoplace: interrupted" in err and "Traceback" not in err
    first = read_lines(log)
    assert log.read_text().endswith("\n") and len(first) >= 2
    assert f"interrupted: {len(first)} trials of this run in {log}" in out
    more = len(first) + 5
    again = cli("pipeline", "densenet121", "--hw", mesh, "--trials", more, "--log", log)
    assert again.returncode == 0, again.stderr
    lines = read_lines(log)
    assert len(lines) == more and [x["trial"] for x in lines] == list(range(more))
    assert len({plan_of(x) for x in lines}) == more  # no plan measured twice
    assert f"{len(first)} known from the log or study, not measured again" in again.stdout


def test_one_throughput_of_a_plan_of_two_copies_in_pipeline_best_and_report(tmp_path):
    """The DP's squeezenet plan on the 4x4 mesh (2 copies): ``pipeline``, ``best`` (by
    throughput by default on a log of pipeline plans) and the report state its streamed
    throughput and period over both copies, from one computation and in one wording, and
    name the per-copy period as such (issue 31)."""
    from autoplace.pipeline.plan import rate_text

    log = tmp_path / "pipe.jsonl"
    p = cli("pipeline", "squeezenet", "--hw", "mesh", "--log", log)
    assert p.returncode == 0, p.stderr
    (line,) = read_lines(log)
    assert line["replicas"] == 2
    streamed = rate_text(line["period_s"], 2)
    assert "over 2 copies" in streamed and "ms per copy" in streamed
    assert f"the DP's plan: {streamed}" in p.stdout
    assert rate_text(line["analytic_period_s"], 2, "analytic bound") in p.stdout
    b = cli("best", log)
    assert b.returncode == 0, b.stderr
    assert streamed in b.stdout and "picked by throughput" in b.stdout
    r = cli("report", log, "--out", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    assert streamed in (tmp_path / "rep" / "report.html").read_text()


def test_tune_for_throughput_and_energy_on_a_mesh_prints_the_front_and_its_knee(tmp_path):
    """``tune --objective throughput,energy`` on a mesh searches the front of pipeline plans:
    it prints the front (the fastest marked "most throughput"), the knee's plan, and
    ``compile --pick knee`` as the next step; the front is the log's (``best --pareto``).
    Within ``--max-energy`` (the energy of a point between the ends of that front) the
    front printed is of plans that keep it, the next step passes it on, and the front is
    the one ``best --pareto`` gives within it. Memory limits, a profile without a mesh and
    ``--pick`` without a log are one-line errors."""
    from mesh_search import mesh_with_energy

    from autoplace.measure.objective import objective_named
    from autoplace.records.front import front
    from autoplace.records.tuning_log import read

    hw, log = mesh_with_energy(tmp_path), tmp_path / "f.jsonl"
    t = cli("tune", "squeezenet", "--hw", hw, "--objective", "throughput,energy", "--trials",
            30, "--log", log, "--no-progress")
    assert t.returncode == 0, t.stderr
    points = front(read(log), objective_named("throughput,energy").criteria)
    assert len(points) >= 2
    head = f"the front of {len(points)} of 32 records over throughput, energy"
    assert head in t.stdout and "period ms  energy mJ" in t.stdout
    rows = [line.split() for line in t.stdout.splitlines() if re.match(r"\s+\d+\s+\w", line)]
    assert [int(r[0]) for r in rows] == [p.trial for p in points]
    assert "most throughput" in " ".join(rows[0]) and "least energy" in " ".join(rows[-1])
    assert "the knee's plan:" in t.stdout and f"--log {log} --pick knee -o piped/" in t.stdout
    assert head in cli("best", log, "--pareto").stdout
    bound, within = f"{points[len(points) // 2].result.energy_j!r}", tmp_path / "w.jsonl"
    t = cli("tune", "squeezenet", "--hw", hw, "--objective", "throughput,energy", "--trials",
            30, "--max-energy", bound, "--log", within, "--no-progress")
    assert t.returncode == 0, t.stderr
    kept = front(read(within), objective_named("throughput,energy").criteria,
                 Limits(energy_j=float(bound)))
    assert kept and all(p.result.energy_j <= float(bound) for p in kept)
    head = f"the front of {len(kept)} of 32 records over throughput, energy (--max-energy "
    assert head in t.stdout and f"--pick knee --max-energy {bound} -o piped/" in t.stdout
    rows = [line.split() for line in t.stdout.splitlines() if re.match(r"\s+\d+\s+\w", line)]
    assert [int(r[0]) for r in rows] == [p.trial for p in kept]
    assert f"the front of {len(kept)} of 32" in cli("best", within, "--pareto",
                                                    "--max-energy", bound).stdout
    for args, named in ((("--hw", "soc"), "over a mesh's pipeline plans"),
                        (("--hw", hw, "--max-memory", "sram=1MiB"), "--max-memory: a pipeline "
                                                                     "plan's memory is its"),
                        (("--hw", hw, "--cost-model", "analytic"),
                         "--cost-model analytic: the front of throughput,energy ranks")):
        assert_one_line_error(cli("tune", "squeezenet", "--objective", "throughput,energy",
                                  "--log", tmp_path / "x.jsonl", *args), named)
        assert not (tmp_path / "x.jsonl").exists()
    assert_one_line_error(cli("compile", "squeezenet", "--hw", hw, "--objective", "throughput",
                              "--pick", "knee", "-o", tmp_path / "piped"),
                          "--pick, --criteria and the limits choose a plan of --log")
