"""Fixtures: a real store on SQLite and on PostgreSQL, real subprocesses.

PostgreSQL: SWARMKIT_TEST_PG names the server (default the local one at
127.0.0.1:5432, database `test`); each test gets a schema of its own. Where
none answers the PostgreSQL variants skip with the reason, except under CI,
where they fail.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .helpers import FAST_ENV, PG_BASE, ROOT, wait_for  # noqa: F401  (tests import them from here too)

_pg_state: dict[str, Any] = {}


def _pg_reason() -> str | None:
    """None when PostgreSQL answers, else why not (checked once per session)."""
    if "reason" not in _pg_state:
        async def probe() -> None:
            import asyncpg

            dsn = PG_BASE.replace("postgresql+asyncpg://", "postgresql://")
            conn = await asyncpg.connect(dsn, timeout=5)
            await conn.close()

        try:
            asyncio.run(probe())
            _pg_state["reason"] = None
        except Exception as exc:  # any failure to connect is a reason to skip
            _pg_state["reason"] = f"no PostgreSQL at {PG_BASE} ({type(exc).__name__}: {exc}); set SWARMKIT_TEST_PG"
    return _pg_state["reason"]


def _pg_exec(sql: str) -> None:
    async def go() -> None:
        import asyncpg

        conn = await asyncpg.connect(PG_BASE.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(go())


def require_pg() -> None:
    reason = _pg_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but PostgreSQL does not answer: {reason}")
        pytest.skip(reason)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, workspace: Path):
    """A store URL for an empty store: a SQLite file, or a fresh PostgreSQL schema (direct, or through
    the session's PgBouncer for the tests marked ALSO_PGBOUNCER)."""
    if request.param == "sqlite":
        yield f"sqlite:///{workspace}/.swarmkit/store.db"
        return
    if request.param == "pgbouncer":
        yield from _pg_schema(request.getfixturevalue("pgbouncer"))
        return
    yield from _pg_schema()


# The store tests issue 15 names also run through a real PgBouncer in transaction mode; the rest of
# the suite does not (its time is bounded).
ALSO_PGBOUNCER = pytest.mark.parametrize("store_url", ["sqlite", "postgresql", "pgbouncer"], indirect=True)


@pytest.fixture(scope="session")
def pgbouncer():
    """A PgBouncer of the session's own (tests/pgbouncer_instance.py) in front of the test PostgreSQL."""
    from .pgbouncer_instance import PgBouncer

    require_pgbouncer()
    with PgBouncer() as pgb:
        yield pgb


def require_pgbouncer() -> None:
    """Skip (fail under CI) where PostgreSQL does not answer or no PgBouncer can be started."""
    from .pgbouncer_instance import pgbouncer_missing

    require_pg()
    reason = pgbouncer_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)


@pytest.fixture
def pgbouncer_url(pgbouncer):
    """A fresh PostgreSQL schema, reached through the session's PgBouncer."""
    yield from _pg_schema(pgbouncer)


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL schema, for what only a store shared across machines shows."""
    yield from _pg_schema()


def _pg_schema(pgbouncer=None):
    """The URL of a schema of its own on the test server (through `pgbouncer` if given), dropped afterwards."""
    require_pg()
    schema = "t_" + uuid.uuid4().hex[:12]
    sep = "&" if "?" in PG_BASE else "?"
    yield pgbouncer.url(schema) if pgbouncer else f"{PG_BASE}{sep}schema={schema}"
    try:
        _pg_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except Exception:
        pass


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path_factory, monkeypatch):
    """No test reads or writes the real user's config (the console keeps its theme there)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture
def sqlite_url(workspace: Path) -> str:
    return f"sqlite:///{workspace}/.swarmkit/store.db"


@pytest.fixture
def fast_env(monkeypatch) -> dict[str, str]:
    for k, v in FAST_ENV.items():
        monkeypatch.setenv(k, v)
    return dict(FAST_ENV)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAST_ENV)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SWARMKIT_STORE", None)
    if extra:
        env.update(extra)
    return env


class Cli:
    """Runs `swarmkit` as a real subprocess against one store and workspace."""

    def __init__(self, store_url: str, workspace: Path):
        self.store_url = store_url
        self.workspace = workspace

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "swarmkit.cli", *args]

    def _with_store(self, args: tuple[str, ...]) -> list[str]:
        verb, rest = args[0], list(args[1:])
        return self.argv(verb, "--store", self.store_url, *rest)

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            self._with_store(args), cwd=self.workspace, env=child_env(env), capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"swarmkit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def call(self, *args: str, env: dict[str, str] | None = None, check: bool = False):
        """The same verb through the same `main()` the script runs, but in this process.

        For tests of what a verb does and prints, where a separate process is not
        the point: it saves the ~1 s of CPU each `swarmkit` process spends importing.
        Returns what run() returns (args, returncode, stdout, stderr).
        """
        from .reliability import swarmkit_in_process

        res = swarmkit_in_process(args[0], self.store_url, *args[1:], env=env, cwd=self.workspace)
        if check and res.returncode != 0:
            raise AssertionError(f"swarmkit {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
        return res

    def start(self, *args: str, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
        """`log`: its stdout and stderr go to that file, for a process nobody reads while it runs
        (a pipe nobody drains blocks the process once 64 KB of warnings fill it)."""
        out = open(log, "ab") if log is not None else None
        try:
            return subprocess.Popen(
                self._with_store(args), cwd=self.workspace, env=child_env(env), start_new_session=True,
                stdout=out or subprocess.PIPE, stderr=subprocess.STDOUT if out else subprocess.PIPE, text=out is None,
            )
        finally:
            if out is not None:
                out.close()  # the child holds its own copy


@pytest.fixture
def cli(store_url: str, workspace: Path) -> Cli:
    return Cli(store_url, workspace)


def write_flow(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    return path


async def await_for(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Async twin of wait_for: `predicate` is a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def hold(gates: Path, name: str) -> str:
    """A shell snippet that waits until the test calls release(gates, name): timing-free agents."""
    gates.mkdir(parents=True, exist_ok=True)
    return f"while [ ! -e {gates}/{name} ]; do sleep 0.1; done"


def release(gates: Path, *names: str) -> None:
    gates.mkdir(parents=True, exist_ok=True)
    for name in names:
        (gates / name).touch()


@pytest.fixture
def serving(cli: Cli, tmp_path: Path):
    """Start `swarmkit serve` processes with the test flows (tests/serve_helpers.py); all stopped at the end."""
    from .serve_helpers import Served, flows

    gates = tmp_path / "gates"
    folder = flows(tmp_path / "flows", gates)
    started: list[Served] = []

    def serve(*args: str, **kw) -> Served:
        s = Served(cli, "--flows", str(folder), *args, **kw)
        started.append(s)
        return s

    yield serve, folder, gates
    for s in started:
        s.stop()
