"""A store's reads and writes `here` (store/here_lane.py): on the loop's own thread with sqlite3 on SQLite,
as they were on PostgreSQL; the same answers and the same faults as the store's other paths."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from swarmkit.runtime import control
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store, is_transient
from swarmkit.store.clock import store_now
from swarmkit.store.here_lane import as_sqlalchemy_error
from swarmkit.store.named import S
from swarmkit.store.reads import get_job, run_views

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
