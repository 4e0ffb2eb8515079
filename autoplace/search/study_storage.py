"""Optuna storages by URL (``--storage``), each checked before use with a one-line error.

- ``journal:PATH``: Optuna's journal file (``JournalStorage``): no server, safe for several
  processes on one host, even ones killed mid-write (:mod:`autoplace.search.journal`);
  ``journal:///abs/path`` works too, and so does the bare path of an existing journal file
  (as ``optuna-dashboard PATH`` takes it);
- ``sqlite:///PATH``: one process at a time (SQLite is not meant for concurrent writers);
- ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB``: Optuna's RDB storage on PostgreSQL, for
  workers on several hosts, through psycopg (``pip install autoplace[postgres]``) unless
  the URL names another driver (``postgresql+psycopg2://...``).

Messages never show a password.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna

from autoplace.search.strategy import SearchError

#: tries at opening a database whose tables another worker is creating at the same time
CREATE_ATTEMPTS = 5
_SQLITE_MAGIC = b"SQLite format 3\x00"


class StorageError(SearchError):
    """A ``--storage`` URL that cannot be used: the message names the URL and the reason."""


def open_storage(url: str | None) -> optuna.storages.BaseStorage | None:
    """The storage ``url`` names (None: in memory)."""
    if url is None:
        return None
    scheme = url.split(":", 1)[0].split("+", 1)[0] if ":" in url else ""
    if scheme == "journal":
        return _journal(url)
    if scheme == "sqlite":
        return _rdb(url, url, _sqlite_check)
    if scheme in ("postgresql", "postgres"):
        return _rdb(url, _with_driver(url), _postgres_check)
    if not scheme and Path(url).is_file():
        return _bare_file(url)
    shown = redact(url)
    raise StorageError(f"--storage {shown}: unknown scheme {scheme!r}; use one of "
                       "journal:PATH, sqlite:///PATH, postgresql://USER@HOST/DB"
                       if scheme else f"--storage {shown}: no scheme; use journal:PATH, "
                       "sqlite:///PATH or postgresql://USER@HOST/DB")


def _bare_file(path: str) -> optuna.storages.BaseStorage:
    """An existing file named without a scheme: a journal, as optuna-dashboard takes it."""
    with open(path, "rb") as fh:
        head = fh.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        raise StorageError(f"--storage {path}: an SQLite database: use sqlite:///{path}")
    if not _is_journal(Path(path)):
        raise StorageError(f"--storage {path}: not an Optuna journal file (and no scheme: "
                           "journal:PATH, sqlite:///PATH or postgresql://USER@HOST/DB)")
    return _journal(f"journal:{path}")


def redact(url: str) -> str:
    """``url`` with the password of its user part (``user:password@``) replaced by ***."""
    head, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    user, _, host = rest.partition("@")
    return f"{head}://{user.split(':', 1)[0]}{':***' if ':' in user else ''}@{host}"


def _journal(url: str) -> optuna.storages.BaseStorage:
    from autoplace.search.journal import SafeJournalFile

    path = url[len("journal:"):]
    if path.startswith("///"):
        path = path[2:]
    elif path.startswith("//"):
        raise StorageError(f"--storage {url}: a journal is a file: journal:PATH or "
                           "journal:///absolute/path")
    if not path:
        raise StorageError(f"--storage {url}: no journal file named")
    _parent_exists(url, Path(path))
    if Path(path).is_dir():
        raise StorageError(f"--storage {url}: {path} is a directory, not a journal file")
    if Path(path).is_file() and Path(path).stat().st_size and not _is_journal(Path(path)):
        raise StorageError(f"--storage {url}: {path} is not an Optuna journal file")
    return optuna.storages.JournalStorage(SafeJournalFile(path))


def _is_journal(path: Path) -> bool:
    """Whether the first line of ``path`` is a journal operation (``{"op_code": ...}``)."""
    with open(path, "rb") as fh:
        first = fh.readline(1 << 16)
    try:
        return "op_code" in json.loads(first)
    except (ValueError, TypeError):
        return False


def _parent_exists(url: str, path: Path) -> None:
    if not path.parent.is_dir():
        raise StorageError(f"--storage {redact(url)}: directory {path.parent} does not exist")


def _sqlite_check(url: str, _engine_url: str) -> None:
    path = url.split(":///", 1)[1] if ":///" in url else ""
    if not path or path == ":memory:":
        raise StorageError(f"--storage {url}: name a database file: sqlite:///PATH")
    _parent_exists(url, Path(path))
    if Path(path).is_file() and Path(path).stat().st_size:
        with open(path, "rb") as fh:
            if fh.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
                raise StorageError(f"--storage {url}: {path} is not an SQLite database")


def _with_driver(url: str) -> str:
    """A PostgreSQL URL with psycopg (3) as its driver unless it names one."""
    head, sep, rest = url.partition("://")
    return f"postgresql+psycopg://{rest}" if sep and "+" not in head else url


def _postgres_check(url: str, engine_url: str) -> None:
    driver = engine_url.split("://", 1)[0].partition("+")[2]
    try:
        __import__(driver)
    except ImportError:
        raise StorageError(f"--storage {redact(url)}: the PostgreSQL driver {driver} is not "
                           "installed (pip install 'autoplace[postgres]')") from None


def _rdb(url: str, engine_url: str, check) -> optuna.storages.BaseStorage:
    """Optuna's RDB storage on ``engine_url`` (``url`` as the user gave it, for messages)."""
    import sqlalchemy.exc

    check(url, engine_url)
    try:
        for attempt in range(CREATE_ATTEMPTS):
            try:
                return optuna.storages.RDBStorage(engine_url,
                                                  engine_kwargs={"pool_pre_ping": True})
            # workers creating the tables at once: a duplicate row or table
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
    except (sqlalchemy.exc.SQLAlchemyError, ValueError, ImportError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise StorageError(f"--storage {redact(url)}: cannot open it: "
                           f"{reason[0] if reason else type(exc).__name__}") from None
