"""Swarmkit through a real PgBouncer in transaction mode (issue 15): a worker hosting several runs,
the message for a URL without `pgbouncer=true`, a transaction left idle ended by the server, and no
session state left on pooled server connections.

The stop/resume/cancel, console and `logs -f` tests of the other files run through PgBouncer too
(ALSO_PGBOUNCER in tests/conftest.py); what each process holds is in test_connection_budget.py.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from swarmkit.store.engine import PG_IDLE_IN_TRANSACTION_MS
from tests.reliability import pg_dsn

from .conftest import Cli, child_env, release, wait_for, write_flow
from .fleet_probe import ENV, LONG_LEASE, Backends, end, own_pgbouncer, queue, rows, schema_of, told_by
from .helpers import job
from .pgbouncer_instance import PgBouncer

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
        command = "{mark}; while [ ! -e {gates}/$SWARMKIT_RUN_ID ]; do sleep 0.1; done; echo b"
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

        def idle_writer() -> list:
            return [r for r in pg.of(pgbouncer.pid) if r[1] == "idle in transaction" and "UPDATE jobs" in r[2]]

        assert idle_writer(), "the frozen transaction holds a server connection"
        # The contract's deadline, three times over: idle_in_transaction_session_timeout, set in the transaction.
        limit = 3 * PG_IDLE_IN_TRANSACTION_MS / 1000
        wait_for(
            lambda: not idle_writer(), timeout=limit, interval=0.1,
            what=f"the server to end the idle transaction (within 3x idle_in_transaction_session_timeout = {PG_IDLE_IN_TRANSACTION_MS} ms)",
        )
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
