"""The parameters of a study's trials (``--study-params``): what a trial carries is the
placement its log record holds, whatever the storage; an Optuna sampler keeps its own."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import optuna
import pytest
from factories import fork_graph, tiny_profile

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, to_params, to_placement, tune
from autoplace.search.params import TrialParams
from autoplace.search.study_storage import open_storage
from autoplace.space import SearchSpace

STORAGES = {"sqlite": "sqlite:///{}/tune.db", "journal": "journal:{}/tune.journal"}


def job(tmp_path, storage: str, **cfg):
    """A small job on squeezenet/soc (every kind of count varies); its space, log records
    and study trials by log trial number."""
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    url = STORAGES[storage].format(tmp_path)
    with TuningLog(tmp_path / "log.jsonl") as log:
        tune(space, Simulator(space), log, TuneConfig(trials=16, storage=url, **cfg))
    opened = open_storage(url)
    study = optuna.load_study(study_name=optuna.get_all_study_names(opened)[0], storage=opened)
    trials = {t.user_attrs["trial"]: t for t in study.trials if t.user_attrs.get("strategy")}
    return space, read(tmp_path / "log.jsonl"), trials


def counted(space: SearchSpace, placement) -> dict[str, int]:
    """The counts of ``placement``, tallied here apart from the code under test."""
    free = {n for n, m in zip(space.edge_names, space.edge_modes) if len(m) > 1}
    units = Counter(u for u, _ in placement.ops.values())
    scopes = Counter(s for _, s in placement.ops.values())
    modes = Counter(m for e, m in placement.copies.items() if e in free)
    return ({f"ops_on:{u}": units[u] for u in ("cpu1", "cpu2", "accelerator1", "accelerator2")}
            | {f"ops_in:{s}": scopes[s] for s in ("dram", "sram1", "sram2")}
            | {f"copies:{m}": modes[m] for m in ("sync", "async")}
            | {"resident_weights": sum(w == "resident" for w in placement.weights.values())})


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_by_default_each_trial_carries_the_counts_of_its_logged_placement(tmp_path, storage):
    space, records, trials = job(tmp_path, storage)
    assert len(trials) == len(records) == 3 + 16
    for r in records:
        params = trials[r.trial].params
        assert params == counted(space, r.placement), r.trial
        assert sum(v for k, v in params.items() if k.startswith("ops_on:")) == len(space.op_choices)
    assert len({tuple(t.params.values()) for t in trials.values()}) > 3  # they differ


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_the_ops_form_is_the_logged_placement_op_by_op(tmp_path, storage):
    space, records, trials = job(tmp_path, storage, study_params="ops")
    for r in records:
        params = trials[r.trial].params
        assert params == to_params(space, r.placement)
        assert to_placement(space, params) == r.placement


def test_an_optuna_sampler_keeps_its_per_op_parameters(tmp_path):
    """(An asked trial has a mode for every free edge, the log's copies only the crossing
    ones: its parameters decode to the logged placement.)"""
    space, records, trials = job(tmp_path, "journal", sampler="tpe", cost_model="none")
    assert all(to_placement(space, trials[r.trial].params) == r.placement for r in records)
    url = STORAGES["sqlite"].format(tmp_path / "refused")
    (tmp_path / "refused").mkdir()
    with pytest.raises(ValueError, match="study_params='counts': the trials OptunaSampling "
                                         "asks carry its per-op parameters"):
        job(tmp_path / "refused", "sqlite", sampler="tpe", study_params="counts")
    assert optuna.get_all_study_names(url) == []  # refused before the study was made


def test_a_count_is_a_parameter_only_where_the_space_has_a_choice_of_it():
    """No copy modes to choose, no weights that can be resident: no such counts."""
    free = TrialParams(SearchSpace(fork_graph(), tiny_profile()), "counts").dists
    fixed = TrialParams(SearchSpace(fork_graph(), tiny_profile(modes=("sync",))), "counts").dists
    assert set(free) - set(fixed) == {"copies:sync", "copies:async"}
    assert set(fixed) == {"ops_on:cpu", "ops_on:acc", "ops_in:dram", "ops_in:sram"}


def test_none_adds_trials_without_parameters_and_bad_forms_are_refused(tmp_path):
    _, _, trials = job(tmp_path, "sqlite", study_params="none")
    assert all(t.params == {} for t in trials.values())
    with pytest.raises(ValueError, match="study_params must be one of"):
        TuneConfig(study_params="all")
    with pytest.raises(ValueError, match="study_params must be one of"):
        TrialParams(SearchSpace(load_graph("squeezenet"), load_profile("soc")), "all")


def test_the_command_line_refuses_a_form_its_sampler_cannot_give_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autoplace", "tune", "seed_te", "--trials",
                           "2", "--sampler", "random", "--study-params", "none",
                           "--storage", f"sqlite:///{tmp_path}/x.db",
                           "--log", str(tmp_path / "x.jsonl"), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "study_params='none'" in proc.stderr and "per-op parameters" in proc.stderr
