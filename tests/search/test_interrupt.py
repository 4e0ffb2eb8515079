"""A Ctrl-C that lands in a finalizer (there Python prints it and drops it) still stops the
tuning loop at its next round."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from autoplace.search.interrupt import CtrlC, uninterrupted


class Finalized:
    """Ctrl-C while its ``__del__`` runs, as when the garbage collector frees a booster."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):  # the handler runs here, between two bytecodes
            pass


def test_a_ctrl_c_a_finalizer_swallowed_is_raised_at_the_next_check(monkeypatch):
    printed = []  # what Python would print as "Exception ignored in ..." with a traceback
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    hook = sys.unraisablehook
    with CtrlC() as ctrl_c:
        obj = Finalized()
        del obj  # its KeyboardInterrupt is "ignored": nothing raised here, nothing printed
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.check()
        ctrl_c.check()  # raised once
    assert sys.unraisablehook is hook and printed == []


def test_other_finalizer_errors_still_reach_the_hook_there_was(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    class Failing:
        def __del__(self):
            raise ValueError("a finalizer's own error")

    with CtrlC():
        obj = Failing()
        del obj
    assert [type(u.exc_value) for u in seen] == [ValueError]


def test_a_ctrl_c_caught_is_not_raised_again_and_the_handler_is_put_back():
    before = signal.getsignal(signal.SIGINT)
    with CtrlC() as ctrl_c:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100_000):
                pass
        ctrl_c.seen()
        ctrl_c.check()
    assert signal.getsignal(signal.SIGINT) is before


def ctrl_c_now():
    """Press Ctrl-C and let Python run the SIGINT handler (between two bytecodes)."""
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100_000):
        pass


def test_a_ctrl_c_in_an_uninterrupted_block_is_raised_when_the_block_has_run_whole():
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            ctrl_c_now()
            ran.append("after the Ctrl-C")
    assert ran == ["after the Ctrl-C"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_in_the_block_is_not_held():
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            ctrl_c_now()
            ran.append("first held")
            ctrl_c_now()
            ran.append("second not held")
    assert ran == ["first held"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_held_ctrl_c_goes_to_the_handler_there_was():
    with CtrlC() as ctrl_c:
        with pytest.raises(KeyboardInterrupt):
            with uninterrupted():
                ctrl_c_now()
                assert not ctrl_c.pending  # held: CtrlC has not seen it yet
        assert ctrl_c.pending  # handed on when the block ended


def test_a_block_without_ctrl_c_runs_as_any_other():
    with uninterrupted():
        value = 1 + 1
    assert value == 2 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
