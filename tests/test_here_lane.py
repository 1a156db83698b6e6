"""A store's reads and writes `here` (store/here_lane.py): on the loop's own thread with sqlite3 on SQLite,
as they were on PostgreSQL; the same answers and the same faults as the store's other paths."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from swarmkit.runtime import control
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store, is_transient
from swarmkit.store.clock import store_now
from swarmkit.store.here_lane import as_sqlalchemy_error
from swarmkit.store.named import S
from swarmkit.store.reads import get_job, run_views

from .conftest import ALSO_PGBOUNCER

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "true"\n'


def _checkpoint(job_id: str, step: int) -> dict:
    return dict(job_id=job_id, step=step, node="only", state="{}", epoch=1, created_at=store_now())


async def test_a_read_here_gives_what_a_read_on_the_store_thread_gives(store_url, workspace: Path):
    store = await Store.open(store_url, workspace)
    try:
        job = await control.submit(store, parse_flow(ONE), {"k": "v"})
        here = await store.run_read(lambda c: run_views(c, [get_job(c, job.id)]), here=True)
        there = await store.run_read(lambda c: run_views(c, [get_job(c, job.id)]))
        assert here == there and here[0]["inputs"] == {"k": "v"} and here[0]["status"] == "queued"
    finally:
        await store.close()


async def test_a_write_here_commits_and_a_failed_one_leaves_nothing(store_url, workspace: Path):
    store = await Store.open(store_url, workspace)
    try:
        job = await control.submit(store, parse_flow(ONE), {})
        await store.run_write(lambda c: c.execute(S.INSERT_CHECKPOINT, _checkpoint(job.id, 1)), here=True)

        def twice(conn) -> None:
            conn.execute(S.INSERT_CHECKPOINT, _checkpoint(job.id, 2))
            conn.execute(S.INSERT_CHECKPOINT, _checkpoint(job.id, 1))  # (job_id, step) is unique

        # As SQLAlchemy raises it on every store: the callers judge faults by SQLAlchemy's classes.
        with pytest.raises(IntegrityError):
            await store.run_write(twice, here=True)
        steps = await store.run_read(lambda c: [r.epoch for r in [c.execute(S.CHECKPOINT_DONE, {"b_id": job.id, "b_step": s}).first() for s in (1, 2)] if r])
        assert steps == [1], "the failed write's first insert was rolled back with it"
    finally:
        await store.close()


async def test_a_write_here_waits_for_another_writer_instead_of_failing(sqlite_url, workspace: Path):
    """The loop's connection never waits for the lock: while another process holds it, the write goes to the
    store's thread and waits there (the busy timeout), and lands once the lock is free."""
    store = await Store.open(sqlite_url, workspace)
    other = sqlite3.connect(store.loc.url.database, isolation_level=None)
    try:
        job = await control.submit(store, parse_flow(ONE), {})
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.create_task(store.run_write(lambda c: c.execute(S.INSERT_CHECKPOINT, _checkpoint(job.id, 1)), here=True))
        for _ in range(20):  # let the write try the lock here and hand over to the store's thread
            await asyncio.sleep(0)
        assert not write.done(), f"the write did not wait for the lock: {write.exception() if write.done() else ''}"
        other.execute("COMMIT")
        await asyncio.wait_for(write, 30)
        done = await store.run_read(lambda c: c.execute(S.CHECKPOINT_DONE, {"b_id": job.id, "b_step": 1}).first(), here=True)
        assert done is not None and done.epoch == 1
    finally:
        other.close()
        await store.close()


def test_a_sqlite3_fault_here_is_raised_as_sqlalchemy_raises_it():
    """A locked store is a transient fault on the store's thread (SQLAlchemy's OperationalError): raised
    here, it is the same class with the same original, so the host's retries and the HTTP door's 503
    judge it alike."""
    orig = sqlite3.OperationalError("database is locked")
    raised = as_sqlalchemy_error(orig)
    assert isinstance(raised, OperationalError) and raised.orig is orig and is_transient(raised)
    assert isinstance(as_sqlalchemy_error(sqlite3.IntegrityError("UNIQUE constraint failed")), IntegrityError)


def test_asyncpg_left_half_way_by_a_killed_connection_is_a_transient_fault_here():
    """A connection killed mid-query can leave asyncpg's protocol half-way through an operation. Read here
    on PostgreSQL (store/pg_here_lane.py), the driver's error reaches the caller without SQLAlchemy's
    dialect, which calls it a disconnect on the store's other paths: a follower (`logs -f`) that took it
    for a fault for good died of it in CI (2026-12-06). It is worth retrying, as the lost connection is."""
    import asyncpg

    half_way = asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation (2) is in progress")
    assert is_transient(as_sqlalchemy_error(half_way, Exception)) and is_transient(half_way)
    gone = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    assert is_transient(as_sqlalchemy_error(gone, Exception)) and is_transient(gone)
    refused = asyncpg.exceptions.UniqueViolationError("duplicate key value violates unique constraint")
    assert not is_transient(as_sqlalchemy_error(refused, Exception)) and not is_transient(refused)


async def test_the_wal_stays_bounded_when_a_host_writes_every_boundary_here(sqlite_url, workspace: Path, monkeypatch):
    """A long flow of fast nodes whose boundaries all commit here, heartbeats far apart (one a minute, so
    the store's thread writes next to nothing): the WAL grows no more than SQLite's autocheckpoint lets
    it. With the loop's connection never checkpointing and the store's thread doing it beside the
    writes, it grew to 66 MB: the WAL never started over."""
    import sys

    from swarmkit.runtime.executor import RunHost

    monkeypatch.setenv("SWARMKIT_HEARTBEAT", "60")
    monkeypatch.setenv("SWARMKIT_LEASE", "600")
    (workspace / "walnoop.py").write_text("async def noop(ctx):\n    return {'pad': 'x' * 2000}\n")
    monkeypatch.syspath_prepend(str(workspace))
    sys.modules.pop("walnoop", None)
    nodes = 1500
    flow = parse_flow('name = "long"\n' + "".join(f'[[agents]]\nname = "n{i}"\ncall = "walnoop:noop"\n' for i in range(nodes)))
    store = await Store.open(sqlite_url, workspace)
    try:
        job = await control.submit(store, flow, {}, host_here=True)
        assert await RunHost(store, job.id, job.epoch, flow).run() == "completed"
        wal = Path(str(store.loc.url.database) + "-wal").stat().st_size
        # Each boundary writes a checkpoint of over 2 KB and its row: some 20 MB without a checkpoint.
        assert wal < 8 * 1024 * 1024, f"the WAL grew to {wal / 1e6:.1f} MB over {nodes} boundaries"
    finally:
        await store.close()


# --- PostgreSQL's reads here (store/pg_here_lane.py): asyncpg alone, on the main lane's connection ---------


async def _runs_of_every_kind(store: Store) -> list[str]:
    """A queued run, a running one with a stop --now asked and a workspace, one cancelled keeping its
    workspaces, and a stopped one: every column a merged view shows set on one of them."""
    flow = parse_flow(ONE)
    queued = await control.submit(store, flow, {"k": "v", "n": "1"})
    running = await control.submit(store, flow, {}, host_here=True, lease_s=3600.0)
    assert (await control.stop(store, running.id, actor="a@b", now=True)).changed
    cancelled = await control.submit(store, flow, {"x": "y"})
    assert (await control.cancel(store, cancelled.id, keep=True, actor="a@b")).changed
    stopped = await control.submit(store, flow, {})
    assert (await control.stop(store, stopped.id, actor="a@b")).changed
    from swarmkit.store.workspace_rows import add_workspace

    async with store.write() as conn:
        for i, job_id in enumerate((running.id, running.id, cancelled.id)):
            await add_workspace(conn, job_id, f"/w/{i}", host="h", now=store_now())
    return [queued.id, running.id, cancelled.id, stopped.id]


@ALSO_PGBOUNCER
async def test_every_read_of_the_http_door_gives_here_what_sqlalchemy_gives(store_url, workspace: Path):
    """The pages, a prefix, a run and its view, read here (sqlite3 alone, asyncpg alone; through PgBouncer
    SQLAlchemy still) and on the store's SQLAlchemy path: the same rows, converted the same way."""
    from swarmkit.store.pages import jobs_page
    from swarmkit.store.reads import jobs_by_prefix

    store = await Store.open(store_url, workspace, connections=2)
    try:
        ids = await _runs_of_every_kind(store)
        first, _more = await store.run_read(lambda c: jobs_page(c, limit=2))

        def reads(conn):
            pages = [
                jobs_page(conn, limit=50),
                jobs_page(conn, limit=2, cursor=first[-1].id),
                jobs_page(conn, status="running", limit=5),
                jobs_page(conn, flow="one", limit=3, cursor=first[0].id),
                jobs_page(conn, status="cancelled", flow="one", limit=5),
            ]
            jobs = [get_job(conn, i) for i in ids]
            return pages, jobs, run_views(conn, jobs, now=store_now()), jobs_by_prefix(conn, ids[1][:4]), get_job(conn, "0" * 32)

        here = await store.run_read(reads, here=True)
        there = await store.run_read(reads)
        assert here == there
        pages, jobs, views, _prefix, missing = here
        assert missing is None and [len(p[0]) for p in pages] == [4, 2, 1, 3, 1]
        running = views[1]
        assert running["stop_now"] is True and running["stop_requested_by"] == "a@b" and running["display_status"] == "stopping"
        assert [w["path"] for w in running["workspaces"]] == ["/w/0", "/w/1"] and views[2]["cancel_keep"] is True
        assert jobs[1].stop_requested_at.tzinfo is not None and isinstance(jobs[1].cost, float)
    finally:
        await store.close()


async def test_a_failed_read_here_on_postgresql_is_sqlalchemys_fault_and_the_next_read_works(pg_url, workspace: Path):
    """A statement the server refuses is raised as SQLAlchemy raises it (its SQLSTATE on it, not transient),
    and the connection it failed on is not handed out again as good: the next read answers."""
    from swarmkit.store.pages import jobs_page

    store = await Store.open(pg_url, workspace, connections=2)
    try:
        job = await control.submit(store, parse_flow(ONE), {})
        with pytest.raises(DBAPIError) as caught:
            await store.run_read(lambda c: jobs_page(c, limit=-2), here=True)  # LIMIT -1: refused by the server
        assert not is_transient(caught.value) and caught.value.orig.sqlstate == "2201W"
        assert (await store.run_read(lambda c: get_job(c, job.id), here=True)).id == job.id
    finally:
        await store.close()


async def test_reads_here_and_the_stores_other_work_share_the_main_lane_without_waiting_on_each_other(pg_url, workspace: Path):
    """One connection for the main lane (a host's budget of two): a write right after a read here takes the
    connection the read kept, and many reads and acts at once all finish, with the same answers."""
    store = await Store.open(pg_url, workspace, connections=2)
    try:
        ids = await _runs_of_every_kind(store)
        for job_id in ids:
            await store.run_read(lambda c, j=job_id: get_job(c, j), here=True)
            async with store.write() as conn:  # the lane gives its connection back first
                await conn.execute(S.GET_JOB, {"b_id": job_id})
        seen = await asyncio.gather(
            *(store.run_read(lambda c, j=j: get_job(c, j), here=True) for j in ids * 10),
            *(control.stop(store, ids[0], actor="x@y") for _ in range(3)),
            *(control.resume(store, ids[3], actor="x@y") for _ in range(2)),
        )
        assert [j.id for j in seen[: len(ids) * 10]] == ids * 10
        acts = seen[len(ids) * 10 :]
        assert sum(r.changed for r in acts[:3]) == 1 and sum(r.changed for r in acts[3:]) == 1
        statuses = await store.run_read(lambda c: [get_job(c, j).status for j in ids], here=True)
        assert statuses == ["stopped", "running", "cancelled", "queued"]
    finally:
        await store.close()
