"""``--storage`` URLs: each usable kind opens, every bad one is one line naming the URL (a
password never shown), exit 2 from the CLI, the log untouched."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest
from factories import free_port

from autoplace.search.study_storage import StorageError, open_storage, redact


def test_a_journal_file_and_an_sqlite_file_open_and_hold_a_study(tmp_path):
    for url in (f"journal:{tmp_path / 'a.journal'}", f"journal://{tmp_path / 'b.journal'}",
                f"sqlite:///{tmp_path / 'c.db'}"):
        storage = open_storage(url)
        optuna.create_study(study_name="s", storage=storage).optimize(lambda t: 1.0, 2)
        again = optuna.load_study(study_name="s", storage=open_storage(url))
        assert len(again.trials) == 2, url


def _sqlite_file(tmp):
    path = tmp / "real.db"
    optuna.create_study(study_name="s", storage=f"sqlite:///{path}")
    return path


def test_the_bare_path_of_a_journal_file_opens_it(tmp_path):
    """As ``optuna-dashboard PATH`` takes a journal file."""
    path = tmp_path / "a.journal"
    optuna.create_study(study_name="s", storage=open_storage(f"journal:{path}")).optimize(
        lambda t: 1.0, 2)
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(path))).trials) == 2


def bad_urls(tmp):
    (tmp / "text.db").write_text("not a database\n")
    (tmp / "text.journal").write_text("not a journal\n")
    return [
        ("mysql2://u@h/db", "unknown scheme 'mysql2'"),
        ("tune.db", "no scheme"),
        (f"sqlite:///{tmp / 'missing' / 't.db'}", "does not exist"),
        (f"sqlite:///{tmp / 'text.db'}", "is not an SQLite database"),
        ("sqlite://", "name a database file"),
        (f"journal:{tmp / 'missing' / 'j.log'}", "does not exist"),
        (f"journal:{tmp}", "is a directory"),
        (f"journal:{tmp / 'text.journal'}", "is not an Optuna journal file"),
        ("journal:", "no journal file named"),
        ("journal://host/j.log", "a journal is a file"),
        (str(tmp / "text.journal"), "not an Optuna journal file (and no scheme"),
        (str(_sqlite_file(tmp)), "an SQLite database: use sqlite:///"),
        ("postgresql+nodriver://u@127.0.0.1/db", "driver nodriver is not installed"),
        (f"postgresql://u:secret@127.0.0.1:{free_port()}/db", "cannot open it"),
    ]


def test_every_bad_url_is_one_line_naming_it(tmp_path):
    for url, reason in bad_urls(tmp_path):
        with pytest.raises(StorageError) as info:
            open_storage(url)
        message = str(info.value)
        assert reason in message and "\n" not in message, (url, message)
        assert redact(url) in message and "secret" not in message, message


def test_a_bad_url_from_the_command_line_is_exit_2_and_the_log_untouched(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("")
    for url, reason in bad_urls(tmp_path)[:4]:
        proc = subprocess.run([sys.executable, "-m", "autoplace", "tune", "seed_te", "--trials",
                               "2", "--storage", url, "--log", str(log), "--no-progress"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and reason in proc.stderr, proc.stderr
        assert log.read_text() == ""


def test_redact_hides_only_the_password():
    assert redact("postgresql://me:pw@db:5432/x") == "postgresql://me:***@db:5432/x"
    assert redact("postgresql://me@db/x") == "postgresql://me@db/x"
    assert redact("journal:/a/b") == "journal:/a/b"
