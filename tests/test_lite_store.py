"""The lite SQLite store (store/lite.py) runs the same statements, and reads the same records, as SQLAlchemy.

store/compiled_sqlite.py is written from store/statements.py by
scripts/compile_sqlite.py: recompiled here, the two must be equal, so a
statement changed in one place can never run in its old form in the other.
What the lite runner converts (times, booleans) is compared with SQLAlchemy's
own processors, and the records both read from one real store are compared.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from swarmkit.store import Store, compiled_sqlite, resolve_store, statements
from swarmkit.store.lite import LiteStore, lite_location
from swarmkit.store.lite_connection import _bind_bool, _bind_datetime, _read_datetime, bind_params
from swarmkit.store.named import S
from swarmkit.store.reads import get_job, jobs_by_prefix, list_jobs, node_durations, skewed_workers, workspaces_for

from .conftest import child_env, write_flow

ROOT = Path(__file__).resolve().parents[1]


def test_the_compiled_module_is_the_statements_compiled_now():
    assert compiled_sqlite.STATEMENTS == statements.compiled(), "run: python scripts/compile_sqlite.py"
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_sqlite.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_an_unknown_statement_name_fails_at_once():
    with pytest.raises(AttributeError, match="no statement 'NO_SUCH'"):
        S.NO_SUCH  # noqa: B018


def test_parameters_are_converted_as_sqlalchemy_converts_them():
    from sqlalchemy import Boolean
    from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

    from swarmkit.store.models import UTCDateTime

    dialect = SQLiteDialect_pysqlite(paramstyle="named")
    utc = UTCDateTime().dialect_impl(dialect)
    to_text, from_text = utc.bind_processor(dialect), utc.result_processor(dialect, None)
    for at in (
        datetime(2026, 12, 1, 18, 36, 51, 123456, tzinfo=UTC),
        datetime(2026, 12, 1, 20, 36, 51, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 1, 2, 3, 4, 5),  # naive: UTC already
    ):
        assert _bind_datetime(at) == to_text(at)
        assert _read_datetime(to_text(at)) == from_text(to_text(at))
    to_int = Boolean().dialect_impl(dialect).bind_processor(dialect)
    for flag in (True, False):
        assert _bind_bool(flag) == to_int(flag)
    with pytest.raises(TypeError):
        _bind_datetime("2026-12-01")  # type: ignore[arg-type]


def test_lists_are_expanded_into_parameters_never_into_sql():
    sql, values = bind_params(S.WORKSPACES_FOR, {"b_ids": ["a'b", "c"]})
    assert "IN (:b_ids_1, :b_ids_2)" in sql and "a'b" not in sql
    assert values == {"b_ids_1": "a'b", "b_ids_2": "c"}


def test_the_lite_location_is_the_one_resolve_store_finds(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("SWARMKIT_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    for given in (None, "x.db", "./sub/x.db", str(tmp_path / "abs.db"), f"sqlite:///{tmp_path}/u.db", "sqlite:///rel.db", "~/h.db"):
        lite, full = lite_location(given, tmp_path), resolve_store(given, tmp_path)
        assert lite is not None, given
        assert (lite.display, lite.url.database, lite.workspace, lite.is_sqlite) == (full.display, full.url.database, full.workspace, True), given
    monkeypatch.setenv("SWARMKIT_STORE", str(tmp_path / "env.db"))
    assert lite_location(None, tmp_path).display == resolve_store(None, tmp_path).display  # type: ignore[union-attr]
    # What it does not plainly know opens as a full Store.
    for given in ("postgresql://h/db", "sqlite:///x.db?mode=ro", "sqlite://", "sqlite:///:memory:"):
        assert lite_location(given, tmp_path) is None, given


def _make_runs(workspace: Path) -> list[str]:
    flow = write_flow(workspace, "quick.toml", 'name = "quick"\n[[agents]]\nname = "a"\ncommand = "true"\n')
    swarmkit = str(Path(sys.executable).with_name("swarmkit"))
    ids = []
    for _ in range(3):
        made = subprocess.run([swarmkit, "run", str(flow), "--detach"], cwd=workspace, env=child_env(), capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        ids.append(made.stdout.strip())
    done = subprocess.run([swarmkit, "run", str(flow)], cwd=workspace, env=child_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return ids


def test_lite_and_sqlalchemy_read_the_same_records(workspace: Path, monkeypatch):
    monkeypatch.delenv("SWARMKIT_STORE", raising=False)
    queued = _make_runs(workspace)

    async def reads(store) -> tuple:
        async def one(fn):
            return await store.run_read(fn)

        ids = [j.id for j in await one(lambda c: list_jobs(c, ended_limit=50))]
        return (
            await one(lambda c: list_jobs(c, ended_limit=50)),
            await one(lambda c: [get_job(c, i) for i in ids]),
            await one(lambda c: jobs_by_prefix(c, queued[0][:6])),
            await one(lambda c: workspaces_for(c, ids)),
            await one(lambda c: node_durations(c, "quick", "a")),
            await one(lambda c: skewed_workers(c, 30.0)),
        )

    async def go() -> None:
        full = await Store.open(loc=resolve_store(None, workspace), create=False, upgrade=False, inline=True)
        try:
            want = await reads(full)
        finally:
            await full.close()
        lite = await LiteStore.open(lite_location(None, workspace))  # type: ignore[arg-type]
        try:
            got = await reads(lite)
            assert lite.schema_change is not None and lite.schema_change[0] == lite.schema_change[1]
        finally:
            await lite.close()
        assert got == want
        assert len(want[0]) == 4 and any(want[3].values()) and want[4]  # the runs, a workspace and a node duration were read
        ended = [j for j in want[0] if j.status == "completed"]
        assert ended and ended[0].ended_at is not None and ended[0].ended_at.tzinfo is UTC

    asyncio.run(go())
