"""A PgBouncer of our own, in transaction pooling mode, in front of the test PostgreSQL.

The one launcher for tests and benches (bench/ imports it with the repo root on
sys.path). Each instance has its own free port and temp dir, removed on stop;
the Debian service is never used. PgBouncer refuses to run as root, so when the
tests run as root it runs as the `postgres` user (as tests/pg_instance.py runs
PostgreSQL).

No `idle_transaction_timeout` and no `ignore_startup_parameters` here on purpose:
a transaction left idle must be ended by the server, through the timeout
Swarmkit sets per transaction, and a startup parameter PgBouncer refuses must
fail the tests, not be hidden by the pooler.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

# The test server, as tests/helpers.py names it (kept here too so that a bench need not import the tests).
PG_BASE = os.environ.get("SWARMKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pgbouncer_bin() -> str | None:
    return shutil.which("pgbouncer") or next((p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None)


def pgbouncer_missing() -> str | None:
    """None when a PgBouncer can be started here, else why not."""
    if pgbouncer_bin() is None:
        return "pgbouncer is not installed (Debian package `pgbouncer`)"
    if shutil.which("psql") is None:
        return "psql is not installed (PgBouncer's admin console is read with it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """`with PgBouncer() as pgb:` ... `pgb.url(schema)`, `pgb.admin("SHOW CLIENTS")`."""

    def __init__(self, backend: str = PG_BASE, *, pool_size: int = 20, extra: dict[str, str] | None = None) -> None:
        binary = pgbouncer_bin()
        if binary is None:
            raise RuntimeError(pgbouncer_missing() or "no pgbouncer")
        self.bin = binary
        parts = urlsplit(backend.replace("postgresql+asyncpg://", "postgresql://"))
        self.server_host = parts.hostname or "127.0.0.1"
        self.server_port = parts.port or 5432
        self.dbname = parts.path.lstrip("/") or "test"
        self.user = parts.username or pwd.getpwuid(os.geteuid()).pw_name
        self.pool_size = pool_size
        self.extra = dict(extra or {})
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="swarmkit-pgb-"))
        self.log = self.root / "pgb.log"
        self.proc: subprocess.Popen | None = None
        self._as: tuple[int, int] | None = None  # (uid, gid) to run as
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            self._as = (pw.pw_uid, pw.pw_gid)
            os.chown(self.root, *self._as)

    def url(self, schema: str | None = None) -> str:
        """The store URL through this PgBouncer (`pgbouncer=true` tells Swarmkit it is behind one)."""
        query = "pgbouncer=true" + (f"&schema={schema}" if schema else "")
        return f"postgresql+asyncpg://{self.user}@127.0.0.1:{self.port}/{self.dbname}?{query}"

    @property
    def pid(self) -> int:
        """PgBouncer's own process (its server connections are the TCP sockets it holds to PostgreSQL)."""
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def dsn(self) -> str:
        """A plain libpq/asyncpg DSN through the pooler (no Swarmkit query parameters)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.dbname}"

    def _write_config(self) -> Path:
        users = {self.user, "postgres", pwd.getpwuid(os.geteuid()).pw_name}
        auth = self.root / "users.txt"
        auth.write_text("".join(f'"{u}" ""\n' for u in sorted(users)))
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": str(auth),
            "admin_users": ",".join(sorted(users)),
            "pool_mode": "transaction",
            "max_client_conn": "2000",
            "default_pool_size": str(self.pool_size),
            "logfile": str(self.log),
            "pidfile": str(self.root / "pgb.pid"),
            **self.extra,
        }
        ini = self.root / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{self.dbname} = host={self.server_host} port={self.server_port} dbname={self.dbname}\n"
            "[pgbouncer]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
        )
        if self._as:
            for p in (auth, ini):
                os.chown(p, *self._as)
        return ini

    def start(self, timeout: float = 15) -> PgBouncer:
        ini = self._write_config()
        uid, gid = self._as or (None, None)
        self.proc = subprocess.Popen(
            [self.bin, str(ini)], cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, user=uid, group=gid, extra_groups=[] if self._as else None,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                tail = self.log_text()[-2000:]
                self.stop()
                raise RuntimeError(f"pgbouncer exited {self.proc.returncode} at start:\n{tail}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"pgbouncer did not listen on {self.port} within {timeout}s") from None
                time.sleep(0.02)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def admin(self, sql: str) -> list[dict[str, str]]:
        """A command on the admin console (`SHOW CLIENTS`, `SHOW SERVERS`, `SHOW POOLS`): its rows, by column name.

        Through psql: the admin console speaks the simple query protocol only.
        """
        out = subprocess.run(
            ["psql", "-X", "-q", "-A", "-F", "\x1f", "-P", "footer=off", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", self.user, "pgbouncer", "-c", sql],
            capture_output=True, text=True, timeout=20,
        )
        if out.returncode != 0:
            raise RuntimeError(f"pgbouncer admin {sql!r} failed: {out.stderr.strip()}")
        lines = out.stdout.splitlines()
        if not lines:
            return []
        header = lines[0].split("\x1f")
        return [dict(zip(header, line.split("\x1f"))) for line in lines[1:]]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # SIGTERM shuts down at once (SIGINT would wait for every client to finish).
            self.proc.send_signal(signal.SIGTERM)
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
