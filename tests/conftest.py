"""Put tests/ on sys.path so test modules can import the shared factories.

``autoplace`` is imported first, so that a test module importing TVM before it still
loads TVM without PyTorch (:mod:`autoplace.tvm_import`; the test extra installs torch).
"""

import sys
from pathlib import Path

import autoplace  # noqa: F401 - TVM without PyTorch in this process (autoplace.tvm_import)

HERE = Path(__file__).parent

sys.path.insert(0, str(HERE))
