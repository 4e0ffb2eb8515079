"""Stands in for torch in the test processes and their subprocesses (tests/conftest.py):
importing it fails as a missing torch does, so TVM's FFI, which imports torch whenever it
can, skips it. Only the torch.export tests see the real one."""

raise ImportError("torch is kept out of the test processes (tests/conftest.py)")
