"""``autoplace report`` of a pipeline search's log: the best plan's stages, grid, one period
of its stream and the search's progress."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mesh_search import search

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, StageCosts
from autoplace.reports.pipeline_report import is_pipeline_log, write_pipeline_report
from autoplace.reports.placement_report import ReportError


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A 60-trial search of squeezenet on the bundled mesh, logged."""
    profile = load_profile("mesh")
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))
    path = tmp_path_factory.mktemp("pipe") / "pipe.jsonl"
    best, _ = search(costs, 60, seed=2, log=path)
    return path, best


def test_the_report_shows_the_best_plan_and_the_search(searched, tmp_path):
    path, best = searched
    assert is_pipeline_log(path)
    page = write_pipeline_report(path, tmp_path / "r")
    text = page.read_text()
    assert "Pipeline report: squeezenet on mesh (4x4)" in text
    assert f"best trial {best.number} ({best.move}): {best.throughput:,.1f} inferences/s" in text
    assert "60 trials (seed 2)" in text
    # one table row per stage of the best plan: its op range and PEs
    rows = re.findall(r"<tr>\s*<td>(\d+)</td>\s*<td>(\d+)-(\d+)</td>\s*<td>[^<]*</td>\s*"
                      r"<td>(\d+)</td>", text)
    assert [(int(a), int(b) + 1, int(k)) for _, a, b, k in rows] == \
        [(s.start, s.end, s.pes) for s in best.plan.stages]
    for name in ("grid", "period", "search"):
        assert (tmp_path / "r" / f"{name}.png").stat().st_size > 10_000
    assert text.count("data:image/png;base64,") == 3


def test_a_log_of_another_mesh_names_the_option_to_fix_it(searched, tmp_path):
    path, _ = searched
    mesh32 = tmp_path / "mesh32.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh32.write_text(text.replace("rows = 4", "rows = 32"))
    with pytest.raises(ReportError, match="pass --hw with the right one"):
        write_pipeline_report(path, tmp_path / "r", hw=str(mesh32))
    tuning_log = tmp_path / "t.jsonl"
    tuning_log.write_text('{"v": 2}\n')
    assert not is_pipeline_log(tuning_log)


def test_report_of_a_pipeline_log_from_the_command_line(searched, tmp_path):
    path, _ = searched
    proc = subprocess.run([sys.executable, "-m", "autoplace", "report", str(path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "report.html").is_file()
