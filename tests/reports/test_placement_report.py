"""The report command, end to end through ``python -m autoplace``."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoplace.measure import ErrorKind, MeasureResult
from autoplace.models import load_graph
from autoplace.records.tuning_log import Record, TuningLog, load
from autoplace.reports.placement_report import ReportError, write_report
from autoplace.space import Placement

GOLDEN = Path(__file__).parents[1] / "data" / "analysis_fork.jsonl"


def autoplace(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoplace", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tuned")
    run = autoplace("tune", "seed_te", "--hw", "soc", "--trials", "12", "--log", "t.jsonl",
                    "--no-progress", cwd=d)
    assert run.returncode == 0, run.stderr
    return d / "t.jsonl"


def test_report_writes_html_with_tables_and_embedded_pictures(tuned):
    out = tuned.parent / "rep"
    run = autoplace("report", str(tuned), "--out", str(out), cwd=tuned.parent)
    assert run.returncode == 0, run.stderr
    assert str(out / "report.html") in run.stdout
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["convergence.png", "front.png", "gantt.png", "occupancy.png",
                    "utilisation.png"]  # (soc prices energy: its units' power)
    page = (out / "report.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(embedded) == 5  # self-contained: no file links
    assert base64.b64decode(embedded[0])[:4] == b"\x89PNG"
    df = load(tuned)
    best = df.loc[df[df["ok"]]["latency_s"].idxmin()]
    assert f"best {best['latency_s'] * 1e3:.4f} ms" in page
    assert f"{len(df)} candidates measured" in page
    for strategy in ("single:cpu1", "greedy"):
        assert f"<td>{strategy}</td>" in page
    # the best placement table: one row per op of the graph
    table = page.split("<h2>The best placement</h2>")[1]
    assert table.count("<tr>") == len(load_graph("seed_te").ops)  # header is <tr style=..>
    for op in load_graph("seed_te").ops:
        assert f"<td>{op.name}</td>" in table


def test_the_front_section_lists_the_front_and_only_where_energy_is_priced(tuned, tmp_path):
    from autoplace.hardware.load import bundled_profiles
    from autoplace.reports import analysis

    out = tuned.parent / "rep_front"
    assert autoplace("report", str(tuned), "--out", str(out), cwd=tuned.parent).returncode == 0
    section = (out / "report.html").read_text().split("the front (docs/pareto.md)</h2>")[1]
    rows = re.findall(r"<tr>\s*<td>(\d+)</td>", section.split("</table>")[0])
    assert [int(t) for t in rows] == analysis.front(load(tuned))["trial"].tolist() and rows
    soc = bundled_profiles()["soc"].read_text()
    (tmp_path / "free.toml").write_text(
        "\n".join(x for x in soc.splitlines() if not x.startswith("power_w")))
    run = autoplace("tune", "seed_te", "--hw", str(tmp_path / "free.toml"), "--trials", "4",
                    "--log", "f.jsonl", "--no-progress", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert autoplace("report", "f.jsonl", "--out", "rep", "--hw", "free.toml",
                     cwd=tmp_path).returncode == 0
    assert not (tmp_path / "rep" / "front.png").exists()
    assert "the front" not in (tmp_path / "rep" / "report.html").read_text()


def test_report_defaults_its_directory_next_to_the_log(tuned):
    run = autoplace("report", tuned.name, cwd=tuned.parent)
    assert run.returncode == 0, run.stderr
    assert (tuned.parent / "t-report" / "report.html").is_file()


def test_report_of_an_unknown_graph_is_one_line_and_exit_2(tmp_path):
    run = autoplace("report", str(GOLDEN), "--out", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "fork" in run.stderr
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_report_of_a_log_with_another_graph_names_the_fingerprints(tuned, tmp_path):
    run = autoplace("report", str(tuned), "--model", "squeezenet", "--out", str(tmp_path),
                    cwd=tmp_path)
    assert run.returncode == 2
    assert "fingerprint" in run.stderr and "--model" in run.stderr


def test_a_log_without_a_feasible_record_cannot_be_reported(tmp_path):
    g = load_graph("seed_te")
    path = tmp_path / "failed.jsonl"
    with TuningLog(path) as log:
        log.append(Record(graph=g.name, graph_fp=g.fingerprint, profile="soc", profile_hash="x",
                          strategy="tpe", trial=0, seed=0, measurer="rpc",
                          placement=Placement(ops={}, copies={}),
                          result=MeasureResult.failure(ErrorKind.TIMEOUT, "no answer")))
    with pytest.raises(ReportError, match="failed.jsonl: no feasible record"):
        write_report(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def appended(tuned: Path, log: Path, model: str, trials: int) -> Path:
    """A copy of the tuned log at ``log`` with a run of ``model`` on soc appended."""
    log.write_bytes(tuned.read_bytes())
    run = autoplace("tune", model, "--hw", "soc", "--trials", str(trials), "--log", str(log),
                    "--append", "--no-progress", cwd=log.parent)
    assert run.returncode == 0, run.stderr
    return log


def test_a_log_of_two_jobs_is_reported_one_job_at_a_time_and_says_so(tuned, tmp_path):
    log = appended(tuned, tmp_path / "two.jsonl", "squeezenet", 4)
    df = load(log)
    for job, graph in [(None, "squeezenet"), ("1", "seed_te"), ("2", "squeezenet")]:
        out = tmp_path / f"rep{job}"
        rep = autoplace("report", str(log), "--out", str(out), *(["--job", job] if job else []),
                        cwd=tmp_path)
        assert rep.returncode == 0, rep.stderr
        number = job or "2"  # by default the job of the last record
        assert f"holds 2 jobs (graph, profile version, measurer); this report is job " \
               f"{number}: {graph} on soc (simulator)" in rep.stdout
        page = (out / "report.html").read_text()
        mine = df[df["graph"] == graph]
        assert f"{len(mine)} candidates measured" in page  # the job's, not the log's
        assert f"best {mine[mine['ok']]['latency_s'].min() * 1e3:.4f} ms" in page
        assert "<h2>Jobs in this log</h2>" in page
    bad = autoplace("report", str(log), "--job", "3", "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--job 3: the log holds 2 job(s)" in bad.stderr


def test_a_job_of_several_runs_draws_one_convergence_line_per_run(tuned, tmp_path):
    from autoplace.reports import placement_report as report

    log = appended(tuned, tmp_path / "runs.jsonl", "seed_te", 6)
    df = load(log)
    names = report._curve_names(df)
    assert names.nunique() == 2 == df["run"].nunique()
    page, note = write_report(log, tmp_path / "out")
    assert note == "" and "; 2 runs)" in page.read_text()
