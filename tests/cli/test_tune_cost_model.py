"""``autoplace tune`` with the cost model, end to end in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

from autoplace.cost_model import XGBCostModel
from autoplace.records.tuning_log import read


def cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "autoplace", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_tune_with_the_xgb_cost_model_save_and_warm_start(tmp_path):
    log, model = tmp_path / "a.jsonl", tmp_path / "model.ubj"
    p = cli("tune", "squeezenet", "--hw", "soc", "--trials", 24, "--log", log,
            "--cost-model", "xgb", "--batch-size", 6, "--candidates", 96, "--save-model",
            model, "--descent", 0, "--no-progress")  # every round the model's: 4 side lines
    assert p.returncode == 0, p.stderr
    records = read(log)
    assert len(records) == 24 + 3  # single:cpu1, single:cpu2 (cpu1 is the host), greedy
    assert records[3].strategy == "heft"
    assert {r.strategy for r in records[4:]} <= {"evolve", "explore"}
    assert "baseline heft" in p.stdout and "cost model: Spearman" in p.stdout
    side = [json.loads(x) for x in (tmp_path / "a.model.jsonl").read_text().splitlines()]
    assert [s["batch"] for s in side] == [6, 6, 6, 6]
    XGBCostModel.load(model)  # a valid model file

    q = cli("tune", "seed_te", "--hw", "soc", "--trials", 8, "--log", tmp_path / "b.jsonl",
            "--warm-start", log, model, "--no-progress")
    assert q.returncode == 0, q.stderr
    assert "warm start: 27 records of 1 graph(s) (squeezenet)" in q.stdout


def test_cost_model_errors_are_one_line(tmp_path):
    for args, fragment in [
        (("--cost-model", "gp"), "--cost-model: invalid choice: 'gp'"),
        (("--warm-start", tmp_path / "none.jsonl"), "no such file"),
        (("--save-model", tmp_path / "m.pkl"), "save_model must end in .json or .ubj"),
        (("--cost-model", "none", "--save-model", tmp_path / "m.json"), "need cost_model='xgb'"),
    ]:
        p = cli("tune", "seed_te", "--trials", 4, "--log", tmp_path / "x.jsonl", *args)
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], p.stderr
