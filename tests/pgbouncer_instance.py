"""A PgBouncer of a test's (or a benchmark's) own, in transaction pooling mode, in front of a PostgreSQL server.

The Debian service is never used: each instance gets a temp folder with its
ini, log and pid file, listens on a free port of 127.0.0.1, runs in the
foreground as our subprocess, and is stopped and removed afterwards.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .pg_instance import _free_port


def pgbouncer_bin() -> str | None:
    return shutil.which("pgbouncer") or next((p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).exists()), None)


class PgBouncer:
    """`with PgBouncer() as pgb: url = pgb.url(schema)`; `pgb.admin("SHOW POOLS")` reads its console."""

    def __init__(self, *, server_host: str = "127.0.0.1", server_port: int = 5432, dbname: str = "test",
                 pool_size: int = 20, max_client_conn: int = 2000, user: str | None = None) -> None:
        binary = pgbouncer_bin()
        if binary is None:
            raise RuntimeError("no pgbouncer found (install the Debian package pgbouncer)")
        self.bin = binary
        self.port = _free_port()
        self.dbname = dbname
        # The user the server trusts is the OS user the tests run as (root here).
        self.user = user or getpass.getuser()
        self.root = Path(tempfile.mkdtemp(prefix="swarmkit-pgb-"))
        self.log = self.root / "pgb.log"
        self.proc: subprocess.Popen | None = None
        (self.root / "users.txt").write_text(f'"{self.user}" ""\n"postgres" ""\n')
        (self.root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{dbname} = host={server_host} port={server_port} dbname={dbname}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.root / 'users.txt'}\nadmin_users = {self.user}\n"
            f"pool_mode = transaction\nmax_client_conn = {max_client_conn}\ndefault_pool_size = {pool_size}\n"
            "idle_transaction_timeout = 5\n"
            f"logfile = {self.log}\npidfile = {self.root / 'pgb.pid'}\n"
        )

    def url(self, schema: str | None = None) -> str:
        base = f"postgresql+asyncpg://{self.user}@127.0.0.1:{self.port}/{self.dbname}?pgbouncer=true"
        return f"{base}&schema={schema}" if schema else base

    def start(self, timeout: float = 15.0) -> PgBouncer:
        argv = [self.bin, str(self.root / "pgbouncer.ini")]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root: it drops to postgres, which must own its folder.
            for path in (self.root, *self.root.iterdir()):
                shutil.chown(path, "postgres")
            argv[1:1] = ["-u", "postgres"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log.read_text(errors="replace") if self.log.exists() else ""
                raise RuntimeError(f"pgbouncer exited {self.proc.returncode}: {log[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on {self.port} within {timeout:g} s")

    def admin(self, sql: str) -> list[dict[str, str]]:
        """A SHOW on the admin console (simple query protocol: the console knows no other), as rows of text."""
        out = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-X", "-A", "-F", "\t", "-P", "footer=off", "pgbouncer", "-c", sql],
            check=True, capture_output=True, text=True, timeout=10,
        ).stdout.splitlines()
        if not out:
            return []
        head = out[0].split("\t")
        return [dict(zip(head, row.split("\t"))) for row in out[1:]]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
