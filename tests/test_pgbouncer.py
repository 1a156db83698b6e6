"""A fleet on one PostgreSQL (issue 15): through a real PgBouncer in transaction mode, and the
connections each kind of process holds, counted on the server and on the pooler.

Connections are told apart by the client ports a process holds (tests/reliability.py's
tcp_ports_of): other processes on this machine may be named `swarmkit-worker@...` too.
The stop/resume/cancel, console and `logs -f` tests of the other files run through PgBouncer
too (ALSO_PGBOUNCER in tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.console.console_helpers import submit
from tests.reliability import console_argv, console_in_process, kill_group_of, pg_dsn, tcp_ports_of

from .conftest import Cli, child_env, hold, release, require_pgbouncer, wait_for, write_flow
from .helpers import job, read
from .pgbouncer_instance import PgBouncer

HOST = "pgb-test-host"  # SWARMKIT_HOST of every process started here: application_name carries it
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


# --- a worker hosting several runs -----------------------------------------------------------


def test_a_worker_hosts_five_runs_through_pgbouncer_one_stopped_and_resumed_one_cancelled(pgbouncer_url: str, workspace: Path, tmp_path: Path):
    cli = Cli(pgbouncer_url, workspace)
    gates, ledger = tmp_path / "gates", tmp_path / "ledger"
    gates.mkdir()
    mark = f"echo $SWARMKIT_RUN_ID $SWARMKIT_NODE >> {ledger}"
    flow = write_flow(tmp_path, "hops", f"""
        name = "hops"
        [[agents]]
        name = "a"
        command = "{mark}; echo a"
        [[agents]]
        name = "b"
        command = "{mark}; while [ ! -e {gates}/$SWARMKIT_RUN_ID ]; do sleep 0.02; done; echo b"
        [[agents]]
        name = "c"
        command = "{mark}; echo c"
    """)
    ids = queue(cli.store_url, workspace, flow, 5)
    worker = cli.start("worker", "--concurrency", "5", env=LONG_LEASE)
    try:
        with told_by(worker):
            _steer_five(cli, workspace, ids, gates)
    finally:
        end(worker)
    _, errs = worker.communicate(timeout=10)
    assert "Traceback" not in errs, errs[-3000:]
    cancelled = ids[2]
    ran = ledger.read_text().split("\n")
    for i in ids:
        nodes = [line.split()[1] for line in ran if line.startswith(i)]
        assert nodes == (["a", "b"] if i == cancelled else ["a", "b", "c"]), (i[:8], nodes)
    row = job(cli.store_url, workspace, ids[1])
    assert row.step == row.steps == 3 and row.stop_requested_at is None


def _steer_five(cli: Cli, workspace: Path, ids: list[str], gates: Path) -> None:
    """All five in b at once; stop one and cancel another there; the stopped one resumed to completion."""
    wait_for(lambda: all(job(cli.store_url, workspace, i).current_node == "b" for i in ids), what="all five in b")
    assert len({job(cli.store_url, workspace, i).pid for i in ids}) == 1, "one worker hosts all five"
    stopped, cancelled = ids[1], ids[2]
    assert "stop requested" in cli.call("stop", stopped[:8], check=True).stdout
    assert "cancel requested" in cli.call("cancel", cancelled[:8], check=True).stdout
    wait_for(lambda: job(cli.store_url, workspace, cancelled).status == "cancelled", timeout=20, what="the cancel")
    release(gates, *ids)
    wait_for(lambda: job(cli.store_url, workspace, stopped).status == "stopped", timeout=20, what="the stop")
    res = cli.call("resume", stopped[:8], check=True)
    assert "queued" in res.stdout
    wait_for(lambda: all(job(cli.store_url, workspace, i).status == "completed" for i in ids if i != cancelled), timeout=30, what="the others to complete")


def test_a_store_url_behind_pgbouncer_without_the_flag_says_to_add_it(pgbouncer: PgBouncer, pg_url: str, workspace: Path):
    """Behind PgBouncer without `pgbouncer=true`, the startup parameters it refuses are not the message:
    what to add to the URL is."""
    Cli(pg_url, workspace).call("db", "upgrade", check=True)  # the store exists: only the URL is wrong
    res = Cli(f"{pgbouncer.dsn}?schema={schema_of(pg_url)}", workspace).run("status", env=ENV, timeout=60)
    assert res.returncode != 0
    assert "pgbouncer=true" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


# --- connection counts -----------------------------------------------------------------------


TEN = """
    name = "busy"
    [[agents]]
    name = "a"
    command = "{hold}; echo a"
    [[agents]]
    name = "b"
    command = "for i in 1 2 3 4 5; do echo b $i; sleep 0.05; done"
    [[agents]]
    name = "c"
    command = "echo c"
"""


@pytest.mark.parametrize("via", ["postgresql", "pgbouncer"])
def test_a_worker_hosting_ten_runs_holds_at_most_two_server_connections(via: str, pg_url: str, workspace: Path, tmp_path: Path):
    """Ten runs at once in one worker: never more than 2 connections on the server (directly),
    nor more than 2 clients on the pooler and 2 server connections behind it (through PgBouncer)."""
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "busy", TEN.format(hold=hold(gates, "go")))
    ids = queue(pg_url, workspace, flow, 10)  # directly: only the worker goes through the pooler
    pg = Backends()
    with own_pgbouncer() if via == "pgbouncer" else _nothing() as pgb:
        url = pgb.url(schema_of(pg_url)) if pgb else pg_url
        worker = Cli(url, workspace).start("worker", "--concurrency", "10", env=LONG_LEASE)

        def sample() -> dict[str, int]:
            mine = pg.of(worker.pid)
            seen = {"server": len(mine), "named": sum(1 for a, _, _ in mine if a == f"swarmkit-worker@{HOST}")}
            if pgb:
                seen["pooler_clients"] = len(clients_of(pgb, worker.pid))
                seen["server"] = len(pg.of(pgb.pid))  # every server connection of this test's own pooler
            return seen

        try:
            with Sampler(sample) as sampler:
                wait_for(lambda: all(r[1] == "a" for r in rows(pg_url, workspace, ids).values()), what="all ten running a")
                time.sleep(0.5)  # heartbeats of ten held runs
                release(gates, "go")
                with told_by(worker, lambda: rows(pg_url, workspace, ids)):
                    wait_for(lambda: all(r[0] == "completed" for r in rows(pg_url, workspace, ids).values()), timeout=40, what="all ten to complete")
        finally:
            end(worker)
            pg.close()
    assert len({r[2] for r in rows(pg_url, workspace, ids).values()}) == 1, "one worker hosted all ten"
    samples = sampler.samples
    assert len(samples) > 20, f"too few samples ({len(samples)}; {sampler.errors[:3]})"
    peak = {k: max(s[k] for s in samples) for k in samples[0]}
    assert 1 <= peak["server"] <= 2, peak
    if pgb:
        assert 1 <= peak["pooler_clients"] <= 2, peak
    else:
        assert all(s["named"] == s["server"] for s in samples), "every connection of the worker is named swarmkit-worker@HOST"


@contextmanager
def _nothing() -> Iterator[None]:
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


def test_a_one_shot_verb_and_the_console_once_use_one_connection(pg_url: str, workspace: Path, tmp_path: Path):
    """Counted on PgBouncer's own log (every client's login and close): a one-shot verb opens at most
    1 connection at a time, however short-lived it is."""
    flow = write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "a"\ncommand = "echo hi"\n')
    (rid,) = queue(pg_url, workspace, flow, 1)
    with own_pgbouncer() as pgb:
        cli = Cli(pgb.url(schema_of(pg_url)), workspace)
        # In this process, through the verbs' own main()s: what they open is the point, not their start-up.
        for argv in (["status"], ["stop", rid[:8]]):
            before = len(pgb.log_text())
            res = cli.call(*argv, env=ENV)
            assert res.returncode == 0, res.stderr
            assert peak_clients(pgb.log_text()[before:], pgb.dbname)[0] == 1, f"swarmkit {' '.join(argv)}"
        before = len(pgb.log_text())
        once = console_in_process(cli.store_url, "--once", str(workspace), cwd=workspace)
        assert once.returncode == 0 and rid[:8] in once.stdout, once.stderr
        assert peak_clients(pgb.log_text()[before:], pgb.dbname)[0] == 1, "swarmkit-console --once"


# --- application_name, and what each long-lived process holds ---------------------------------


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


@pytest.mark.parametrize("via", ["postgresql", "pgbouncer"])
def test_every_process_is_named_and_keeps_to_its_connection_budget(via: str, request, pg_url: str, workspace: Path, tmp_path: Path):
    """A worker hosting a run, `swarmkit serve`, the console and a long-lived cli verb (`status -w`), at once:
    each is named swarmkit-ROLE@HOST (in pg_stat_activity directly, in SHOW CLIENTS through PgBouncer);
    the worker and serve hold at most 2 connections, the console and the cli verb 1."""
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "held", f'name = "held"\n[[agents]]\nname = "a"\ncommand = "{hold(gates, "go")}"\n')
    (rid,) = queue(pg_url, workspace, flow, 1)
    pgb: PgBouncer | None = request.getfixturevalue("pgbouncer") if via == "pgbouncer" else None
    url = pgb.url(schema_of(pg_url)) if pgb else pg_url
    cli = Cli(url, workspace)
    pg = Backends()
    procs: dict[str, subprocess.Popen] = {}
    seen, stop_draining = bytearray(), threading.Event()
    master = None
    try:
        procs["worker"] = cli.start("worker", "--concurrency", "4", env=ENV)
        procs["serve"] = cli.start("serve", "--port", "0", "--no-host", env=ENV)
        procs["cli"] = cli.start("status", "-w", env=ENV)
        procs["console"], master = console_on_pty(url, workspace)
        threading.Thread(target=drain, args=(master, seen, stop_draining), daemon=True).start()
        wait_for(lambda: job(pg_url, workspace, rid).status == "running", what="the worker to host the run")

        pids = {role: p.pid for role, p in procs.items()}

        def names_and_counts() -> dict[str, tuple[int, set[str]]]:
            if pgb:
                return {role: (len(rows), {r["application_name"] for r in rows}) for role, rows in clients_of_each(pgb, pids).items()}
            return {role: (len(rows), {r[0] for r in rows}) for role, rows in pg.of_each(pids).items()}

        wait_for(lambda: all(n for n, _ in names_and_counts().values()), timeout=30, what="every process to connect")
        with Sampler(names_and_counts, every=0.1) as sampler:
            wait_for(lambda: len(sampler.samples) >= 10, timeout=60, what="10 samples")
        for role, p in procs.items():
            assert p.poll() is None, f"{role} exited: {p.stderr.read() if p.stderr else ''}"
    finally:
        release(gates, "go")
        end(*procs.values())
        stop_draining.set()
        if master is not None:
            os.close(master)
        pg.close()
    assert b"Traceback" not in bytes(seen)
    names = {role: set().union(*(s[role][1] for s in sampler.samples)) for role in procs}
    peaks = {role: max(s[role][0] for s in sampler.samples) for role in procs}
    assert names == {role: {f"swarmkit-{role}@{HOST}"} for role in procs}, (names, peaks)
    budget = {"worker": 2, "serve": 2, "cli": 1, "console": 1}
    assert all(peaks[role] <= limit for role, limit in budget.items()), peaks


# --- the frozen host, and no session state on pooled connections ------------------------------


FROZEN = """
import asyncio, os, signal, sys
from sqlalchemy import text
from swarmkit.store import Store

async def go():
    store = await Store.open(sys.argv[1], sys.argv[2])
    async with store.write() as conn:
        # A host's heartbeat, frozen half-way: the row is locked, nothing is committed.
        await conn.execute(text("UPDATE jobs SET heartbeat_at = heartbeat_at WHERE id = :i"), {"i": sys.argv[3]})
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
asyncio.run(go())
"""


def test_a_transaction_left_idle_behind_pgbouncer_is_ended_by_the_server(pgbouncer: PgBouncer, pg_url: str, workspace: Path, tmp_path: Path):
    """A host frozen inside a write transaction, through PgBouncer (which has no timeout of its own here):
    the server ends that transaction within ~5 s, because Swarmkit sets the idle-in-transaction timeout
    in the transaction itself (a session setting would not survive transaction pooling). Its row is
    free again: a stop from another process goes through."""
    flow = write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "a"\ncommand = "true"\n')
    (rid,) = queue(pg_url, workspace, flow, 1)
    url = pgbouncer.url(schema_of(pg_url))
    pg = Backends()
    frozen = subprocess.Popen([sys.executable, "-c", FROZEN, url, str(workspace), rid], cwd=workspace, env=child_env(), stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert frozen.stdout is not None and frozen.stdout.readline().strip() == "locked"
        t0 = time.monotonic()

        def idle_writer() -> list:
            return [r for r in pg.of(pgbouncer.pid) if r[1] == "idle in transaction" and "UPDATE jobs" in r[2]]

        assert idle_writer(), "the frozen transaction holds a server connection"
        wait_for(lambda: not idle_writer(), timeout=15, interval=0.1, what="the server to end the idle transaction")
        took = time.monotonic() - t0
        assert took < 8, f"the idle transaction lasted {took:.1f}s"
        res = Cli(url, workspace).run("stop", rid[:8], timeout=20)
        assert res.returncode == 0 and "stopped" in res.stdout, res.stdout + res.stderr
    finally:
        end(frozen)
        pg.close()
    assert job(pg_url, workspace, rid).status == "stopped"


def test_a_one_connection_pool_serves_a_worker_and_keeps_no_session_state(pg_url: str, workspace: Path, tmp_path: Path):
    """Behind a PgBouncer with ONE server connection, a worker hosting three runs (its two lanes share it)
    completes them; and that server connection, used by every Swarmkit transaction, is left with the
    server's own search_path and idle-in-transaction timeout: nothing is set for the session."""
    flow = write_flow(tmp_path, "three", "".join(
        ['name = "three"\n'] + [f'[[agents]]\nname = "n{i}"\ncommand = "echo {i}; sleep 0.05"\n' for i in range(3)]
    ))
    ids = queue(pg_url, workspace, flow, 3)
    plain = _session_settings(pg_dsn())
    with own_pgbouncer(pool_size=1) as pgb:
        worker = Cli(pgb.url(schema_of(pg_url)), workspace).start("worker", "--concurrency", "3", env=ENV)
        try:
            with told_by(worker, lambda: rows(pg_url, workspace, ids)):
                wait_for(lambda: all(r[0] == "completed" for r in rows(pg_url, workspace, ids).values()), timeout=40, what="three runs on one server connection")
            worker.send_signal(signal.SIGTERM)  # a clean exit: the pooler keeps the server connection it served
            worker.wait(timeout=30)
        finally:
            end(worker)
        (server,) = [s for s in pgb.admin("SHOW SERVERS") if s["database"] == pgb.dbname]
        backend, *settings = _session_settings(pgb.dsn)
        assert backend == int(server["remote_pid"]), "the same server connection the worker used"
        assert tuple(settings) == plain[1:]


def _session_settings(dsn: str) -> tuple[int, str, str]:
    """(backend pid, search_path, idle_in_transaction_session_timeout) of a plain session on `dsn`."""

    async def go() -> tuple[int, str, str]:
        import asyncpg

        conn = await asyncpg.connect(dsn, timeout=10, statement_cache_size=0)
        try:
            row = await conn.fetchrow("SELECT pg_backend_pid(), current_setting('search_path'), current_setting('idle_in_transaction_session_timeout')")
            return (row[0], row[1], row[2])
        finally:
            await conn.close()

    return asyncio.run(go())
