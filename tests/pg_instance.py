"""A PostgreSQL server of a test's own, on a free port, for tests that restart their server.

The shared server on 5432 is never restarted: this one is made with the
installed initdb and pg_ctl (run as the `postgres` user when the tests run as
root, since PostgreSQL refuses to run as root), and removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    return Path(which).parent if which else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgInstance:
    def __init__(self) -> None:
        bindir = pg_bin()
        if bindir is None:
            raise RuntimeError("no initdb/pg_ctl found (install PostgreSQL's server package)")
        self.bin = bindir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="swarmkit-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.sock.mkdir()
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sock, "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 60) -> None:
        subprocess.run([*self._as, *argv], check=True, capture_output=True, timeout=timeout)

    def start(self) -> PgInstance:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._ctl("start")
        return self

    def _ctl(self, action: str, *more: str) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-w", "-t", "60", "-l", str(self.root / "log"), action, *more)

    def restart(self) -> float:
        """`pg_ctl restart -m fast`; returns how long it took (the server was away for about as long)."""
        t0 = time.monotonic()
        self._ctl("restart", "-m", "fast")
        return time.monotonic() - t0

    def down(self) -> None:
        """Stop the server (fast) and leave it down, until `up()`."""
        self._ctl("stop", "-m", "fast")

    def up(self) -> None:
        self._ctl("start")

    def away_for(self, seconds: float) -> float:
        """Stop the server (fast), leave it down for `seconds`, start it: an outage longer than a restart."""
        t0 = time.monotonic()
        self._ctl("stop", "-m", "fast")
        time.sleep(seconds)
        self._ctl("start")
        return time.monotonic() - t0

    def stop(self) -> None:
        try:
            self._ctl("stop", "-m", "immediate")
        except Exception:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
