"""A Ctrl-C a tuning job never loses.

Python raises a Ctrl-C's KeyboardInterrupt wherever the main thread is; raised inside a
finalizer (``__del__``: an XGBoost booster freed by the garbage collector) it is printed as
"Exception ignored in ..." with a traceback and lost, and the job runs on, deaf to it.
:class:`CtrlC` records every Ctrl-C (and keeps a finalizer's from being printed); the loop
calls :meth:`CtrlC.check` between rounds, which raises one that was recorded and not seen
since. :func:`uninterrupted` holds a Ctrl-C back to the end of a step that must run whole
(a record logged and counted). :func:`from_ctrl_c` tells a Ctrl-C that a numba kernel
wrapped in a SystemError.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CtrlC:
    """While entered (in the main thread, where Ctrl-C has Python's default handler):
    Ctrl-C raises KeyboardInterrupt as usual and is recorded until :meth:`seen`."""

    def __init__(self):
        self.pending = False
        self._previous = self._hook = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._interrupted)
            self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            sys.unraisablehook = self._hook
            self._previous = self._hook = None

    def _unraisable(self, unraisable) -> None:
        """A Ctrl-C raised in a finalizer is recorded (:meth:`check` raises it), not
        printed; anything else goes to the hook there was."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.pending = True
            return
        self._hook(unraisable)

    def _interrupted(self, signum, frame):
        self.pending = True
        raise KeyboardInterrupt

    def seen(self) -> None:
        """The Ctrl-C recorded was caught: nothing for :meth:`check` to raise."""
        self.pending = False

    def check(self) -> None:
        """Raise the KeyboardInterrupt of a Ctrl-C recorded and not seen (one a finalizer
        swallowed)."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block whole: a Ctrl-C in it is handed to the SIGINT handler there was (which
    raises KeyboardInterrupt) when the block ends; a second Ctrl-C in it is not held. Only
    in the main thread, where Python runs signal handlers, and over a Python handler."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    held = []

    def hold(signum, frame):
        if held:  # pressed again: the user means it
            raise KeyboardInterrupt
        held.append((signum, frame))

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            previous(*held[0])


def from_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C in disguise: a KeyboardInterrupt raised while a numba
    kernel called back into Python comes out of the kernel as a SystemError caused by it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
