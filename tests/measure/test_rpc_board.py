"""The RPC measurer's job for a board of another architecture: its kernel libraries are
cross-built here before anything is uploaded; without a cross compiler its units are refused
in one line each."""

from __future__ import annotations

import pytest
from factories import board_toml, need_cross
from tvm.rpc.tracker import Tracker

from autoplace.deploy.elf import AARCH64, elf_machine
from autoplace.hardware.load import profile_from_toml
from autoplace.measure.rpc import RPCMeasurer


@pytest.fixture(scope="module")
def tracker():
    t = Tracker("127.0.0.1", port=9400, port_end=9599, silent=True)
    yield f"127.0.0.1:{t.port}"
    t.terminate()


def test_the_uploaded_libraries_are_built_for_the_board(seed, tracker, tmp_path):
    cross = need_cross()
    mod, graph = seed
    board = profile_from_toml(board_toml(), "board.toml")
    m = RPCMeasurer(mod, graph, board, tracker=tracker, key="no-board-yet", mode="runtime",
                    cache_dir=tmp_path, cross_compiler=cross)
    try:
        libraries = [f for f in m.sessions.job.files() if f.suffix == ".so"]
        assert len(libraries) == 2 and not m.broken  # cpu's and npu's (another mcpu)
        assert all(elf_machine(f) == AARCH64 for f in libraries)
    finally:
        m.close()


def test_without_a_cross_compiler_the_board_s_units_are_refused(seed, tracker, tmp_path):
    mod, graph = seed
    board = profile_from_toml(board_toml(), "board.toml")
    m = RPCMeasurer(mod, graph, board, tracker=tracker, key="no-board-yet", mode="runtime",
                    cache_dir=tmp_path)
    try:
        assert sorted(m.broken) == ["cpu", "npu"]
        assert "set cross_compiler = \"aarch64-linux-gnu-g++\"" in str(m.broken["npu"])
        assert not [f for f in m.sessions.job.files() if f.suffix == ".so"]
    finally:
        m.close()
