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

HERE = Path(__file__).parent
TORCH_BLOCKER = str(HERE / "torch_blocker")

sys.path.insert(0, str(HERE))
sys.path.insert(0, TORCH_BLOCKER)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [TORCH_BLOCKER, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
