"""Put tests/ on sys.path so test modules can import the shared factories, and keep torch
out of every test process and its subprocesses.

torch is installed for the torch.export tests (tests/frontend/test_torch.py), but TVM imports
torch whenever it can: 2.2 s more for every process that imports TVM before autoplace
(autoplace.tvm_import keeps it out of the others: TVM's RPC servers and tracker, the
workers of MetaSchedule and of the local measurer start with ``import tvm``) and torch's
memory in each; the RPC tests' set-up took 3.8 s with the blocker, 10 s without. So
``tests/torch_blocker`` comes first on the path here and in ``PYTHONPATH``: ``import torch``
fails there as if torch were missing; :func:`factories.with_torch` gives the torch tests an
environment without it.
"""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TORCH_BLOCKER = str(HERE / "torch_blocker")

sys.path.insert(0, str(HERE))
sys.path.insert(0, TORCH_BLOCKER)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [TORCH_BLOCKER, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


@pytest.hookimpl(optionalhook=True)  # (a run without xdist, -p no:xdist, has no such hook)
def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject's addopts): half again as many workers as usable cores, 3 on 2.

    Much of the suite waits rather than computes: on RPC servers and trackers it started, on
    subprocesses of the CLI, on timeouts a test provokes; a worker per core leaves a core
    idle meanwhile. On this 2-core machine the suite took 19-20 min with 2 workers and
    14 min 14 s with 3. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still overrides it.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return max(2, (3 * len(os.sched_getaffinity(0)) + 1) // 2)
