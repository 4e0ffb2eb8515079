"""Put tests/ on sys.path so test modules can import the shared factories, and keep torch
out of every test process and its subprocesses.

torch is installed for the torch.export tests (tests/frontend/test_torch.py), but TVM's FFI
imports torch whenever it can: 2.2 s more for every process that imports TVM (the CLI
tests' subprocesses, MetaSchedule's workers, RPC servers) and torch's memory in each. So
``tests/torch_blocker`` comes first on the path here and in ``PYTHONPATH``: ``import torch``
fails there as if torch were missing; :func:`factories.with_torch` gives the torch tests an
environment without it.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
TORCH_BLOCKER = str(HERE / "torch_blocker")

sys.path.insert(0, str(HERE))
sys.path.insert(0, TORCH_BLOCKER)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [TORCH_BLOCKER, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
