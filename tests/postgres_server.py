"""A real PostgreSQL server for the tests: ``initdb`` in a temporary directory, ``pg_ctl``
start on a free port of 127.0.0.1, its ``postgres`` database; stopped at the end.

The binaries are found on PATH or under ``/usr/lib/postgresql/*/bin`` (Debian's package;
``.ci/run`` installs it). As root, the server runs as the ``postgres`` user (initdb refuses
root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from factories import free_port


def binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, or None."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if dirs:
        return Path(dirs[0])
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


class Server:
    """One PostgreSQL cluster; :attr:`url` is a database URL for Optuna."""

    def __init__(self, root: Path, bindir: Path):
        self.root, self.bindir = root, bindir
        self.data, self.port = root / "data", free_port()
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            os.chmod(root, 0o755)

    def _run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
        return done

    def start(self) -> Server:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust",
                  "--no-sync")
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.root} -c max_connections=100 -c fsync=off")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l",
                  str(self.root / "server.log"), "-w", "-t", "60", "start")
        return self

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except RuntimeError:  # not running
            pass
        time.sleep(0.1)
