"""Opening a store: only hosting verbs create one, only `db upgrade` migrates a shared one, a moved store is noticed.

Each test is a case of issue 10 that failed before the fix: `swarmkit status`
in the wrong folder made a store and said "no runs"; a mistyped `?schema=`
made a schema with every table; every verb upgraded a shared store, so one
newer laptop locked every older worker out; a worker wrote on into a store
file that had been moved away, and the next process made a new empty one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import text

from swarmkit.store import Store
from swarmkit.store.schema import head_revision

from .conftest import Cli, _pg_exec, require_pg, write_flow
from .helpers import PG_BASE, processes_naming, wait_for

TWO = 'name = "two"\n[[agents]]\nname = "a"\ncommand = "echo a"\n[[agents]]\nname = "b"\ncommand = "echo b"\n'


def _pg_schema_exists(schema: str) -> bool:
    async def go() -> bool:
        import asyncpg

        conn = await asyncpg.connect(PG_BASE.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
        try:
            return bool(await conn.fetchval("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", schema))
        finally:
            await conn.close()

    return asyncio.run(go())


def _sql(store_url: str, workspace: Path, *statements: str) -> None:
    async def go() -> None:
        store = await Store.open(store_url, workspace, migrate=False)
        try:
            async with store.write() as conn:
                for st in statements:
                    await conn.execute(text(st))
        finally:
            await store.close()

    asyncio.run(go())


def _revision(store_url: str, workspace: Path) -> str:
    async def go() -> str:
        store = await Store.open(store_url, workspace, migrate=False)
        try:
            async with store.read() as conn:
                return str(await conn.scalar(text("SELECT version_num FROM alembic_version")))
        finally:
            await store.close()

    return asyncio.run(go())


def _downgrade_to_0002(store_url: str, workspace: Path) -> None:
    """The store as the previous release left it."""
    from alembic import command

    from swarmkit.store.schema import _config

    async def go() -> None:
        store = await Store.open(store_url, workspace)
        try:
            async with store.write() as conn:
                def down(sync_conn) -> None:
                    cfg = _config()
                    cfg.attributes["connection"] = sync_conn
                    command.downgrade(cfg, "0002")

                await conn.run_sync(down)
        finally:
            await store.close()

    asyncio.run(go())


@pytest.mark.parametrize("verb", [["status"], ["status", "--json"], ["logs", "abc123"], ["stop", "abc123"], ["cancel", "abc123"], ["resume", "abc123"], ["approve", "abc123"], ["db", "status"]])
def test_looking_in_the_wrong_folder_says_no_store_and_creates_none(tmp_path: Path, verb: list[str]):
    cli = Cli(f"sqlite:///{tmp_path}/nowhere/store.db", tmp_path)
    r = cli.run(*verb)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "no store at" in r.stderr and "nowhere" in r.stderr
    assert not (tmp_path / "nowhere").exists()


def test_the_default_store_is_not_created_by_status_or_the_console(tmp_path: Path):
    import subprocess
    import sys

    from .conftest import child_env

    for argv in (["-m", "swarmkit.cli", "status"], ["-m", "swarmkit.console.cli", "--once"], ["-m", "swarmkit.console.cli", "--once", "--json"]):
        r = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no store at" in r.stderr, (argv, r.stdout, r.stderr)
    assert not (tmp_path / ".swarmkit").exists()


def test_a_mistyped_schema_is_not_created(tmp_path: Path):
    require_pg()
    schema = "t_typo_" + os.urandom(4).hex()
    cli = Cli(f"{PG_BASE}?schema={schema}", tmp_path)
    try:
        for verb in (["status"], ["stop", "abc"], ["db", "status"]):
            r = cli.run(*verb)
            assert r.returncode == 2 and "no store at" in r.stderr and schema in r.stderr, (verb, r.stderr)
        import subprocess
        import sys

        from .conftest import child_env

        r = subprocess.run([sys.executable, "-m", "swarmkit.console.cli", "--once", "--store", cli.store_url], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no store at" in r.stderr
        assert not _pg_schema_exists(schema)
        # A verb that hosts makes it (and `db upgrade` does).
        r = cli.run("db", "upgrade", check=True)
        assert "created the store" in r.stdout
        assert _pg_schema_exists(schema)
    finally:
        _pg_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_only_db_upgrade_migrates_a_shared_store(store_url: str, cli: Cli, workspace: Path):
    cli.run("db", "upgrade", check=True)
    _downgrade_to_0002(store_url, workspace)
    assert _revision(store_url, workspace) == "0002"
    for verb in (["status"], ["stop", "abc"]):
        r = cli.run(*verb)
        assert r.returncode == 1, (verb, r.stdout, r.stderr)
        assert "swarmkit db upgrade" in r.stderr and "0002" in r.stderr
    assert _revision(store_url, workspace) == "0002", "looking migrated the store"
    st = json.loads(cli.run("db", "status", "--json", check=True).stdout)
    assert st["current"] == "0002" and st["wanted"] == head_revision() and not st["up_to_date"]
    flow = write_flow(workspace, "two", TWO)
    r = cli.run("run", str(flow), timeout=120)
    if store_url.startswith("sqlite"):
        # One machine's own file: a hosting verb may still upgrade it.
        assert r.returncode == 0, r.stderr
        assert _revision(store_url, workspace) == head_revision()
    else:
        assert r.returncode == 1 and "swarmkit db upgrade" in r.stderr
        assert _revision(store_url, workspace) == "0002"
        r = cli.run("db", "upgrade", check=True)
        assert f"from schema revision 0002 to {head_revision()}" in r.stdout
        assert _revision(store_url, workspace) == head_revision()
        assert cli.run("run", str(flow), timeout=120).returncode == 0


def test_a_newer_additive_schema_is_still_written_and_a_breaking_one_refused(store_url: str, cli: Cli, workspace: Path):
    flow = write_flow(workspace, "two", TWO)
    cli.run("db", "upgrade", check=True)
    # What a newer release does when it only adds: a column, and the store says older code may write.
    _sql(store_url, workspace, "ALTER TABLE jobs ADD COLUMN future_note TEXT", "UPDATE alembic_version SET version_num = '0099_future'")
    r = cli.run("run", str(flow), timeout=120)
    assert r.returncode == 0 and "completed" in r.stdout, r.stderr
    st = json.loads(cli.run("db", "status", "--json", check=True).stdout)
    assert st["current"] == "0099_future" and st["may_write"] is True
    # A breaking change raises the oldest writer past what this code knows.
    _sql(store_url, workspace, "UPDATE swarmkit_meta SET value = '0099_future' WHERE key = 'min_writer'")
    for verb in (["status"], ["run", str(flow)]):
        r = cli.run(*verb)
        assert r.returncode == 1 and "newer Swarmkit" in r.stderr, (verb, r.stderr)
    assert _revision(store_url, workspace) == "0099_future"


def test_a_store_moved_away_under_a_running_host_is_noticed(sqlite_url: str, workspace: Path):
    cli = Cli(sqlite_url, workspace)
    gate = workspace / "gate"
    flow = write_flow(workspace, "slow", f'name = "slow"\n[[agents]]\nname = "a"\ncommand = "while [ ! -e {gate} ]; do sleep 0.05; done; echo late > {workspace}/late"\n[[agents]]\nname = "b"\ncommand = "echo b"\n')
    proc = cli.start("run", str(flow))
    try:
        def started() -> bool:
            r = cli.run("status", "--json")
            return r.returncode == 0 and any(j["status"] == "running" for j in json.loads(r.stdout)["runs"])

        wait_for(started, timeout=30, interval=0.2, what="the run to start")
        db = workspace / ".swarmkit" / "store.db"
        os.rename(db, workspace / "backup.db")
        out, errs = proc.communicate(timeout=30)
        gate.touch()  # an agent still alive would now write `late`
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, (out, errs)
    assert "was removed under this process" in errs and "stops hosting" in errs
    # The agent (a shell waiting on the gate touched above) is gone, and wrote nothing after its host stopped.
    wait_for(lambda: not processes_naming(str(gate)), timeout=30, what="the agent waiting on the gate to be gone")
    assert not (workspace / "late").exists(), "the agent carried on after its host stopped hosting"
    # Nothing makes a fresh store in its place: looking and hosting both say what happened.
    for verb in (["status"], ["run", str(flow)]):
        r = cli.run(*verb)
        assert r.returncode == 1 and "is gone: it was moved or deleted" in r.stderr, (verb, r.stderr)
    assert not db.exists()
    # Put back (a restore of the same store), it opens again.
    os.rename(workspace / "backup.db", db)
    assert cli.run("status").returncode == 0


def test_a_different_store_put_in_place_is_refused(sqlite_url: str, workspace: Path, tmp_path: Path):
    cli = Cli(sqlite_url, workspace)
    cli.run("db", "upgrade", check=True)
    other = Cli(f"sqlite:///{tmp_path}/other/store.db", tmp_path)
    other.run("db", "upgrade", check=True)
    db = workspace / ".swarmkit" / "store.db"
    os.replace(tmp_path / "other" / "store.db", db)
    r = cli.run("status")
    assert r.returncode == 1 and "was replaced" in r.stderr, r.stderr


def test_a_migration_on_a_loaded_machine_outlasts_no_idle_transaction(pg_url: str, tmp_path: Path):
    """Making a store on PostgreSQL where loading Alembic takes longer than the server lets a transaction
    sit idle (PG_IDLE_IN_TRANSACTION_MS; beside two CPU hogs its import took that long): the store is made.
    Alembic loaded inside the migration's transaction, the server ended it and the open failed."""
    import sys

    from swarmkit.store.engine import PG_IDLE_IN_TRANSACTION_MS

    from .conftest import child_env
    from .helpers import run_child

    # A slow machine, played by an import hook: loading alembic.command takes the idle limit and a second more.
    slow = tmp_path / "slow_alembic.py"
    slow.write_text(
        "import importlib.abc, sys, time\n"
        "class Slow(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'alembic.command':\n"
        f"            time.sleep({PG_IDLE_IN_TRANSACTION_MS / 1000 + 1})\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n"
    )
    code = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[2]); import slow_alembic\n"
        "from swarmkit.store import Store\n"
        "async def main():\n"
        "    store = await Store.open(sys.argv[1], create=True)\n"
        "    print(*store.schema_change)\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    made = run_child([sys.executable, "-c", code, pg_url, str(tmp_path)], 120, env=child_env())
    assert made.returncode == 0, made.stderr[-3000:]
    # (revision before, revision now): made from nothing to this code's head.
    assert made.stdout.split() == ["None", head_revision()], made.stdout
