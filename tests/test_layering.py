"""Imports flow one way: graph/hardware -> space -> measure -> records -> search -> cli.

Parsed from the source (module-level and function-level imports alike), so a shortcut that
creates a cycle or pulls TVM into the tuning path fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "autoplace"

# each module may import only autoplace modules of a lower rank, keyed by the longest prefix
# of its full name in the table (the pipeline planner logs its search as the tuner's records
# and may use the cost model); measure and cost_model: see
# test_measure_and_the_cost_model_import_neither_the_other
RANK = {
    "patterns": -1, "lazy": 0, "tvm_import": 0, "graph": 0, "hardware.profile": 0,
    "hardware.toml_schema": 0.5,
    "hardware.toml_tables": 1,
    "hardware.mesh_expansion": 2, "hardware.load": 3,
    "hardware.write": 3.5,
    "frontend": 1, "zoo": 1, "models": 2, "space": 4, "deploy": 5, "baselines.heft": 5,
    # applying a log's best record picks it as every reader does (records.tuning_log.best)
    "deploy.vm_build": 7.2,
    "baselines.contiguous": 5.4, "baselines.named": 5.5, "measure": 6, "runtime": 6.3,
    # tuning kernels runs them on a unit's thread pool, as the runtime's workers do
    "deploy.kernel_tuning": 6.4,
    "cost_model": 6.5,
    # the real measurers run placements on the runtime, which the simulator times
    "measure.board": 6.5, "measure.server": 6.55, "measure.local": 6.6,
    "measure.rpc_runtime": 6.65, "measure.rpc": 6.7, "measure.rpc_stages": 6.7,
    "records.schema": 6.9, "records.tuning_log": 7, "records.front": 7.1,
    # the exact front of every placement is a front as records make it (records.front)
    "baselines.optimum": 7.15, "pipeline": 7.5,
    "calibrate": 8,
    "reports.analysis": 8.5, "search": 8,
    "reports.plots": 9, "reports.placement_report": 10, "reports.pipeline_report": 10.2,
    "cli.options": 10.5, "cli.real_commands": 11,
    "cli.report_command": 11, "cli.tune_kernels_command": 11, "cli.calibrate_command": 11,
    "cli.import_command": 11, "cli.pipeline_commands": 10.8, "cli.pipeline_stages": 10.9,
    "cli.tune_summary": 10.7, "cli.best_command": 11.5, "cli.main": 12, "cli.entry": 12.5,
    "__main__": 13,
}


def rank_key(dotted: str) -> str:
    """The key of :data:`RANK` that ranks module ``dotted`` (relative to autoplace): the
    longest of its prefixes that has a rank."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    raise KeyError(f"no rank for autoplace.{dotted}")


def module_key(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rank_key(".".join(rel.parts))


def imported_from(module: str, name: str) -> str:
    """The module ``from module import name`` loads, relative to autoplace: ``module.name``
    when that is a module of its own (``from autoplace.cli import tune_summary``), else
    ``module`` ("" for autoplace itself)."""
    parts = module.split(".")[1:]
    if PKG.joinpath(*parts, name + ".py").exists() or PKG.joinpath(*parts, name).is_dir():
        parts.append(name)
    return ".".join(parts)


def full_imports(path: Path) -> set[str]:
    """The autoplace modules ``path`` imports, by full name (relative to autoplace)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "autoplace":
            names.update(imported_from(node.module, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names
                         if a.name.startswith("autoplace."))
    return names - {""}


def autoplace_imports(path: Path) -> set[str]:
    return {rank_key(n) for n in full_imports(path)}


SOURCES = sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_down(path):
    me = module_key(path)
    for dep in autoplace_imports(path) - {me}:
        assert RANK[dep] < RANK[me], f"{path.name} ({me}) imports {dep}: against the layering"


def test_tuning_path_does_not_load_tvm():
    code = ("import sys, autoplace.cli.main, autoplace.search, autoplace.measure.simulator, "
            "autoplace.models, autoplace.hardware.load; "
            "from autoplace.models import load_graph; load_graph('resnet50'); "
            "print(sorted(m for m in ('tvm', 'tvm_ffi', 'onnx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_measure_and_the_cost_model_import_neither_the_other():
    """No measurer imports the cost model; the cost model reaches into ``measure`` only for
    the batch simulator it refines (its kernels and the objectives that read its rows)."""
    measure = sorted((PKG / "measure").glob("*.py"))
    assert measure and all("cost_model" not in autoplace_imports(p) for p in measure)
    used = {n for n in full_imports(PKG / "cost_model.py") if n.split(".")[0] == "measure"}
    assert used == {"measure.batch", "measure.objective"}


@pytest.mark.parametrize("module", ["autoplace.records.tuning_log", "autoplace.records.front",
                                    "autoplace.search.strategy",
                                    "autoplace.search", "autoplace.space"])
def test_light_leaves_load_no_kernels_nor_search_engines(module):
    """Reading a log or subclassing SearchStrategy starts neither numba's kernels nor Optuna
    nor XGBoost (checked in a fresh interpreter)."""
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('numba', 'optuna', 'xgboost', 'tvm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_lines_options_load_no_kernels_nor_search_engines():
    """``autoplace --version``, ``--help`` and every command's options are parsed without
    numba's kernels, Optuna or XGBoost (each command imports what it runs when it runs):
    a search config's names (``COST_MODELS``, ``RANKINGS``, ``split_paths``) live in the
    light ``autoplace.search.config``."""
    code = ("import sys; from autoplace.cli.main import build_parser; "
            "build_parser().parse_args(['tune', 'squeezenet', '--hw', 'soc']); "
            "print(sorted(m for m in ('numba', 'optuna', 'xgboost') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_light_leaf_still_gives_its_heavy_names_on_use():
    code = ("import sys, autoplace.search as s, autoplace.space as sp; "
            "assert 'optuna' not in sys.modules; s.tune; sp.SearchSpace; "
            "print(sorted(m for m in ('numba', 'optuna') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['numba', 'optuna']"
