"""The journal file workers share: a lock the kernel frees when its holder dies, whole-line
appends, a torn tail cut before appending, and the format Optuna's own backend reads."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from autoplace.search.journal import LOCK_SUFFIX, FlockLock, SafeJournalFile

HOLDS_THE_LOCK = textwrap.dedent("""
    import sys, time
    from autoplace.search.journal import FlockLock
    FlockLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(600)
""")


def test_the_lock_of_a_killed_holder_is_free_at_once(tmp_path):
    path = str(tmp_path / "study.journal")
    holder = subprocess.Popen([sys.executable, "-c", HOLDS_THE_LOCK, path],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    fd = os.open(path + LOCK_SUFFIX, os.O_RDWR)
    with pytest.raises(BlockingIOError):  # held by the other process
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    t0 = time.monotonic()
    lock = FlockLock(path)
    assert lock.acquire() and time.monotonic() - t0 < 1.0  # no grace period to wait out
    lock.release()
    os.close(fd)


def study_on(backend) -> optuna.Study:
    return optuna.create_study(study_name="s", storage=JournalStorage(backend),
                               load_if_exists=True)


def test_optunas_own_backend_reads_what_it_writes(tmp_path):
    path = str(tmp_path / "study.journal")
    study = study_on(SafeJournalFile(path))
    for x in (3.0, 1.0, 2.0):
        study.add_trial(optuna.trial.create_trial(value=x, user_attrs={"x": x}))
    again = study_on(JournalFileBackend(path))
    assert [t.value for t in again.trials] == [3.0, 1.0, 2.0]
    assert again.best_value == 1.0 and again.trials[2].user_attrs == {"x": 2.0}


@pytest.mark.parametrize("backend", [SafeJournalFile, JournalFileBackend])
def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path, backend):
    path = str(tmp_path / "study.journal")
    study = study_on(SafeJournalFile(path))
    study.add_trial(optuna.trial.create_trial(value=1.0))
    n = len(list(JournalFileBackend(path).read_logs(0)))
    with open(path, "ab") as fh:  # a writer died mid-line
        fh.write(b'{"op_code":5,"worker_id":"x","study_id":0,"datetime_st')
    op = {"op_code": 0, "worker_id": "y", "study_name": "t", "directions": [1]}
    if backend is JournalFileBackend:  # Optuna's: the op is glued to the torn line, which
        backend(path).append_logs([op, op])  # the next line makes mid-file: fatal
        with pytest.raises(ValueError):
            list(JournalFileBackend(path).read_logs(0))
        return
    with pytest.warns(UserWarning, match="dropping a torn last line"):
        backend(path).append_logs([op])
    logs = list(JournalFileBackend(path).read_logs(0))
    assert len(logs) == n + 1 and logs[-1] == op
    assert optuna.get_all_study_names(JournalStorage(JournalFileBackend(path))) == ["s", "t"]
