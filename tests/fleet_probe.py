"""Telling one process's PostgreSQL connections from another's, directly and through PgBouncer (issue 15).

Connections are told apart by the client ports a process holds (tests/reliability.py's
tcp_ports_of): other processes on this machine may be named `swarmkit-worker@...` too.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.console.console_helpers import submit
from tests.reliability import console_argv, kill_group_of, pg_dsn, tcp_ports_of

from .conftest import child_env, require_pgbouncer
from .helpers import read
from .pgbouncer_instance import PgBouncer

HOST = "pgb-test-host"  # SWARMKIT_HOST of the processes these tests start: application_name carries it
ENV = {"SWARMKIT_HOST": HOST}
# For workers hosting many runs at once: FAST_ENV's 2 s lease is missed on a loaded 2-CPU machine,
# and leases are not what these tests are about.
LONG_LEASE = {**ENV, "SWARMKIT_LEASE": "10"}


def queue(store_url: str, workspace: Path, flow: Path, count: int) -> list[str]:
    """Queue `count` runs of a flow, in one store session (what `swarmkit run --detach` does, without its start-up)."""
    return asyncio.run(submit(store_url, workspace, flow, count=count))


def schema_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


@contextmanager
def own_pgbouncer(**kw) -> Iterator[PgBouncer]:
    """A PgBouncer for one test, where what it holds must be this test's alone."""
    require_pgbouncer()
    with PgBouncer(**kw) as pgb:
        yield pgb


class Backends:
    """What the test PostgreSQL serves, read from pg_stat_activity on one connection of its own."""

    def __init__(self) -> None:
        import asyncpg

        self._loop = asyncio.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(pg_dsn(), timeout=10))

    def of(self, pid: int) -> list[tuple[str, str, str]]:
        """(application_name, state, query) of every backend serving a client port process `pid` holds."""
        return self.of_each({pid: pid})[pid]

    def of_each(self, pids: dict[str, int] | dict[int, int]) -> dict:
        """`of` for several processes (key -> pid), read in one query."""
        ports = {key: tcp_ports_of(pid) for key, pid in pids.items()}
        every = sorted(set().union(*ports.values()))
        rows = self._loop.run_until_complete(self._conn.fetch(
            "SELECT client_port, coalesce(application_name, ''), coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity "
            "WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
            every,
        )) if every else []
        return {key: [tuple(r)[1:] for r in rows if r[0] in mine] for key, mine in ports.items()}

    def close(self) -> None:
        self._loop.run_until_complete(self._conn.close())
        self._loop.close()


def clients_of(pgb: PgBouncer, pid: int) -> list[dict[str, str]]:
    """PgBouncer's client connections (SHOW CLIENTS) that process `pid` holds."""
    return clients_of_each(pgb, {pid: pid})[pid]


def clients_of_each(pgb: PgBouncer, pids: dict) -> dict:
    """`clients_of` for several processes (key -> pid), from one SHOW CLIENTS."""
    ports = {key: tcp_ports_of(pid) for key, pid in pids.items()}
    rows = [c for c in pgb.admin("SHOW CLIENTS") if c["database"] == pgb.dbname]
    return {key: [c for c in rows if int(c["port"]) in mine] for key, mine in ports.items()}


class Sampler:
    """Calls `sample()` every `every` s in a thread until stopped; keeps every result."""

    def __init__(self, sample: Callable[[], object], every: float = 0.05) -> None:
        self.samples: list = []
        self.errors: list[BaseException] = []
        self._sample, self._every = sample, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._done.is_set():
            try:
                self.samples.append(self._sample())
            except Exception as exc:  # a process gone between reading its ports and its fds
                self.errors.append(exc)
            self._done.wait(self._every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(10)


def rows(store_url: str, workspace: Path, ids: list[str]) -> dict[str, tuple]:
    """run id -> (status, current_node, pid), in one look (a store opened per run is slow beside ten runs)."""
    from sqlalchemy import select

    from swarmkit.store.models import jobs

    async def fn(conn):
        got = await conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.current_node, jobs.c.pid).where(jobs.c.id.in_(ids)))
        return {r[0]: tuple(r[1:]) for r in got}

    return read(store_url, workspace, fn)


@contextmanager
def told_by(proc: subprocess.Popen, state: Callable[[], object] = lambda: "") -> Iterator[None]:
    """A failed wait says what the process (a worker) said on stderr, and `state()` then."""
    try:
        yield
    except AssertionError as exc:
        end(proc)
        said = proc.stderr.read()[-3000:] if proc.stderr else ""
        raise AssertionError(f"{exc}\n{state()}\n{proc.args[3]} said:\n{said}") from None


def end(*procs: subprocess.Popen) -> None:
    """SIGKILL each process group this test started (a worker's agents with it), and reap it."""
    for p in procs:
        kill_group_of(p)
        p.wait(timeout=10)


@contextmanager
def nothing() -> Iterator[None]:
    yield None


LOGIN = re.compile(r"C-0x[0-9a-f]+: (?P<db>[^/ ]+)/\S+@(?P<peer>[\d.]+:\d+) login attempt")
CLOSED = re.compile(r"C-0x[0-9a-f]+: (?P<db>[^/ ]+)/\S+@(?P<peer>[\d.]+:\d+) closing because")


def peak_clients(log: str, db: str) -> tuple[int, int]:
    """(most client connections open at once, logins) in a PgBouncer log, for database `db`."""
    open_now: set[str] = set()
    peak = logins = 0
    for line in log.splitlines():
        if (m := LOGIN.search(line)) and m["db"] == db:
            open_now.add(m["peer"])
            logins += 1
            peak = max(peak, len(open_now))
        elif (m := CLOSED.search(line)) and m["db"] == db:
            open_now.discard(m["peer"])
    return peak, logins


def console_on_pty(store_url: str, workspace: Path) -> tuple[subprocess.Popen, int]:
    """The real `swarmkit-console` on a pty; the caller drains `master` (see drain) and closes it."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    proc = subprocess.Popen(
        console_argv(store_url, "--poll", "0.2", str(workspace)), cwd=workspace, env=child_env({**ENV, "TERM": "xterm-256color"}),
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
    )
    os.close(slave)
    return proc, master


def drain(master: int, seen: bytearray, stop: threading.Event) -> None:
    while not stop.is_set():
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                return
