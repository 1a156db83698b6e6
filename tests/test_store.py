"""The store itself: URLs, migrations, refusals, SQLite settings, concurrent writers."""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from swarmkit.runtime import control
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import SchemaTooNewError, Store, StoreError, StoreUrlError, resolve_store
from swarmkit.store.schema import head_revision

from .conftest import child_env, write_flow

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "true"\n'


async def test_a_new_store_is_migrated_to_head(store_url, workspace: Path):
    store = await Store.open(store_url, workspace)
    try:
        async with store.read() as conn:
            rev = await conn.scalar(text("SELECT version_num FROM alembic_version"))
        assert rev == head_revision()
        row = await control.submit(store, parse_flow(ONE), {"k": "v"})
        assert row.status == "queued" and row.steps == 1
    finally:
        await store.close()


async def test_a_store_from_a_newer_schema_is_refused_and_left_untouched(store_url, workspace: Path):
    store = await Store.open(store_url, workspace)
    async with store.write() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
        # Not additive: only code of that revision on may write it.
        await conn.execute(text("UPDATE swarmkit_meta SET value = '9999_future' WHERE key = 'min_writer'"))
    await store.close()
    with pytest.raises(SchemaTooNewError) as caught:
        await Store.open(store_url, workspace)
    assert "newer Swarmkit" in str(caught.value) and "9999_future" in str(caught.value)
    proc = subprocess.run(
        [sys.executable, "-m", "swarmkit.cli", "status", "--store", store_url],
        cwd=workspace, env=child_env(), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1 and "newer Swarmkit" in proc.stderr
    store = await Store.open(store_url, workspace, migrate=False)
    try:
        async with store.read() as conn:
            assert await conn.scalar(text("SELECT version_num FROM alembic_version")) == "9999_future"
    finally:
        await store.close()


async def test_concurrent_first_opens_migrate_once(store_url, workspace: Path):
    script = (
        "import asyncio, sys\n"
        "from swarmkit.store import Store\n"
        "async def go():\n"
        "    s = await Store.open(sys.argv[1], sys.argv[2])\n"
        "    await s.close()\n"
        "asyncio.run(go())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, store_url, str(workspace)], env=child_env(), stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    for p in procs:
        _, errs = p.communicate(timeout=60)
        assert p.returncode == 0, errs


def test_a_new_sqlite_store_is_born_in_wal_so_opens_at_once_never_find_it_locked(tmp_path: Path):
    """Every connection asks for WAL. On a file still in rollback mode that request is a write made from
    inside a read, and SQLite answers "database is locked" at once, whatever the busy timeout, when
    another process holds the write lock at that moment (one of eight `swarmkit run`s on a new store
    failed so in CI). Here another process is caught mid-switch, holding the lock, as a store's engine
    makes its first connection: the file it made is already in WAL, so it opens."""
    import sqlite3

    from swarmkit.store.engine import make_engine, make_sync_engine

    ws = tmp_path / "ws"
    ws.mkdir()
    loc = resolve_store(f"sqlite:///{ws}/.swarmkit/store.db", ws)
    make_engine(loc, create=True)  # what `run` does first: the store's file is made
    db = ws / ".swarmkit" / "store.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert sorted(p.name for p in db.parent.iterdir()) == ["store.db"], "the file was made under another name and left behind"
    other = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        other.execute("BEGIN IMMEDIATE")
        engine = make_sync_engine(loc)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        engine.dispose()
    finally:
        other.rollback()
        other.close()


def test_store_urls_resolve_and_bad_ones_are_named(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("SWARMKIT_STORE", raising=False)
    loc = resolve_store(None, tmp_path)
    assert loc.is_sqlite and loc.url.database == str(tmp_path.resolve() / ".swarmkit" / "store.db")
    monkeypatch.setenv("SWARMKIT_STORE", f"sqlite:///{tmp_path}/other.db")
    assert resolve_store(None, tmp_path).url.database == str(tmp_path / "other.db")
    assert resolve_store("postgresql://u@h/db?schema=team_a", tmp_path).schema == "team_a"
    assert resolve_store("postgresql://u@h/db", tmp_path).url.drivername == "postgresql+asyncpg"
    pooled = resolve_store("postgresql://u@h:6432/db?pgbouncer=true&schema=team_a", tmp_path)
    # Swarmkit's own options never reach the driver as connect arguments.
    assert pooled.pgbouncer and pooled.schema == "team_a" and dict(pooled.url.query) == {}
    assert pooled.display == "postgresql+asyncpg://u@h:6432/db (schema team_a, through PgBouncer)"
    assert not resolve_store("postgresql://u@h/db?pgbouncer=false", tmp_path).pgbouncer
    for bad, words in (
        ("mysql://x/y", "unsupported database"), ("sqlite://", "names no database file"), ("postgresql://h/db?schema=a;drop", "schema"),
        ("postgresql://h/db?pgbouncer=maybe", "pgbouncer='maybe' must be true or false"),
    ):
        with pytest.raises(StoreUrlError) as caught:
            resolve_store(bad, tmp_path)
        assert words in str(caught.value)


def test_bad_stores_give_one_clear_line(tmp_path: Path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    cases = [
        (f"sqlite:///{junk}", "is not a Swarmkit store", 1),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot reach the store", 1),
        ("mysql://x/y", "unsupported database", 2),  # bad usage, not a store that failed
    ]
    for url, words, code in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "swarmkit.cli", "status", "--store", url],
            cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == code, (url, proc.stderr)
        assert words in proc.stderr, (url, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert junk.read_bytes().startswith(b"this is not a database"), "nothing written into a foreign file"


async def test_sqlite_store_is_private_wal_and_writes_begin_immediate(sqlite_url, workspace: Path):
    store = await Store.open(sqlite_url, workspace)
    try:
        async with store.read() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() >= 10000
        db = Path(store.loc.url.database)
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
        assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    finally:
        await store.close()


def test_sixteen_sqlite_writers_see_no_busy_errors(sqlite_url, workspace: Path, tmp_path: Path):
    flow = write_flow(tmp_path, "w", ONE)
    script = (
        "import asyncio, sys\n"
        "from swarmkit.runtime import control\n"
        "from swarmkit.runtime.flow import load_flow\n"
        "from swarmkit.store import Store\n"
        "async def go():\n"
        "    s = await Store.open(sys.argv[1], sys.argv[2])\n"
        "    flow = load_flow(sys.argv[3])\n"
        "    for _ in range(25):\n"
        "        j = await control.submit(s, flow, {})\n"
        "        await control.stop(s, j.id)\n"
        "        await control.resume(s, j.id)\n"
        "    await s.close()\n"
        "asyncio.run(go())\n"
    )
    asyncio.run(_open_close(sqlite_url, workspace))
    procs = [
        subprocess.Popen([sys.executable, "-c", script, sqlite_url, str(workspace), str(flow)], env=child_env(), stderr=subprocess.PIPE, text=True)
        for _ in range(16)
    ]
    errors = []
    for p in procs:
        _, errs = p.communicate(timeout=300)
        if p.returncode != 0:
            errors.append(errs)
    assert not errors, errors[0]
    assert not any("database is locked" in e for e in errors)

    async def count():
        s = await Store.open(sqlite_url, workspace)
        try:
            async with s.read() as conn:
                return await conn.scalar(text("SELECT count(*) FROM jobs WHERE status = 'queued'"))
        finally:
            await s.close()

    assert asyncio.run(count()) == 16 * 25


async def _open_close(url: str, workspace: Path) -> None:
    s = await Store.open(url, workspace)
    await s.close()


def test_store_error_for_an_unwritable_folder(tmp_path: Path):
    import os

    if os.geteuid() == 0:
        # root ignores permission bits; a read-only bind would be needed instead.
        ro = tmp_path / "ro"
        ro.mkdir()
        (ro / ".swarmkit").write_text("a file where the store folder should be")
        proc = subprocess.run(
            [sys.executable, "-m", "swarmkit.cli", "db", "upgrade", str(ro)],
            cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 1 and "cannot create the store" in proc.stderr, proc.stderr
        return
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(StoreError):
        asyncio.run(_open_close(None, ro))


async def test_a_heartbeats_clock_read_takes_the_hot_lane(pg_url, workspace: Path):
    """A host measures the store's clock again every minute, inside a heartbeat: on PostgreSQL that read
    goes on the hot lane, like the heartbeat's write, and never queues behind the main lane's work."""
    from swarmkit.store import clock

    store = await Store.open(pg_url, workspace, connections=2)
    try:
        async with store.write() as main:  # the main lane's one connection, held
            await main.execute(text("SELECT 1"))
            clock.forget()  # the minute has passed: the next heartbeat measures again
            # Waited for, not timed: on the main lane this read could only begin once `main` ends.
            await asyncio.wait_for(store.keep_time(hot=True), timeout=60)
            assert not clock.anchor_due()
    finally:
        await store.close()


def test_a_fresh_id_is_a_random_uuid4s_hex():
    """Row ids are made without importing uuid (store/ids.py); they must stay what uuid4().hex gave."""
    import uuid

    from swarmkit.store.ids import new_id

    ids = {new_id() for _ in range(1000)}
    assert len(ids) == 1000
    for made in list(ids)[:50]:
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122
