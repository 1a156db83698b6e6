"""Fixtures: a real store on SQLite and on PostgreSQL, real subprocesses.

PostgreSQL: SWARMKIT_TEST_PG names the server (default the local one at
127.0.0.1:5432, database `test`); each test gets a schema of its own. Where
none answers the PostgreSQL variants skip with the reason, except under CI,
where they fail.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from . import helpers
from .helpers import FAST_ENV, PG_BASE, ROOT, need, proc_stats, run_child, stuck_report, wait_for  # noqa: F401  (tests import them from here too)

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
    need(reason is None, f"PostgreSQL does not answer: {reason}")


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
    need(reason is None, str(reason))


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
    _drop_schema(schema)


def _drop_schema(schema: str, tries: int = 3) -> None:
    """Drop a test's schema; a drop that fails is an error of the test (its teardown), never swallowed.

    One failure is retried: a deadlock (40P01), which PostgreSQL resolves by cancelling one side, when
    a process of the test that is still ending holds locks in the schema. Anything else (the server
    gone, a connection refused, a timeout) fails at once: schemas left behind fill the test database.
    """
    import asyncpg

    for attempt in range(1, tries + 1):
        try:
            _pg_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            return
        except asyncpg.exceptions.DeadlockDetectedError:
            if attempt == tries:
                raise
            time.sleep(0.2 * attempt)  # a back-off between tries, not a wait for a condition


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path_factory, monkeypatch):
    """No test reads or writes the real user's config (the console keeps its theme there)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture
def sqlite_url(workspace: Path) -> str:
    return f"sqlite:///{workspace}/.swarmkit/store.db"


@pytest.fixture(autouse=True)
def lease_of_the_test(request):
    """Hosts get a 2 s lease in tests about leases (marked `short_lease`), a roomy one in the rest (helpers.FAST_ENV)."""
    helpers.use_short_lease(request.node.get_closest_marker("short_lease") is not None)


@pytest.fixture
def fast_env(monkeypatch) -> dict[str, str]:
    env = helpers.timing_env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(helpers.timing_env())
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # A child that hangs and is sent SIGABRT (helpers.stuck_report) prints every thread's stack first.
    env["PYTHONFAULTHANDLER"] = "1"
    env.pop("SWARMKIT_STORE", None)
    if extra:
        env.update(extra)
    return env


class Child(subprocess.Popen):
    """A Popen whose wait() and communicate(), when a wait of DUMP_AFTER_S or more runs out, first say on
    stderr what the child is doing (helpers.stuck_report: /proc State and wchan, py-spy stack); the
    test then decides what to do about it (kill it, fail). Shorter waits are probes that expect to
    run out now and then (escalating signals), and say nothing."""

    DUMP_AFTER_S = 10.0

    def _say(self, timeout: float | None) -> None:
        if timeout is not None and timeout >= self.DUMP_AFTER_S and not getattr(self, "_saying", False):
            self._saying = True  # communicate() waits through wait(): one report per time-out
            try:
                print(stuck_report(self.pid, f"swarmkit {self.args[3]} (Cli.start)"), file=sys.stderr, flush=True)
            finally:
                self._saying = False

    def wait(self, timeout: float | None = None) -> int:
        try:
            return super().wait(timeout)
        except subprocess.TimeoutExpired:
            self._say(timeout)
            raise

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        try:
            return super().communicate(input, timeout)
        except subprocess.TimeoutExpired:
            self._say(timeout)
            raise


class Cli:
    """Runs `swarmkit` as a real subprocess against one store and workspace.

    A child that overstays is never killed in silence: run() raises helpers.Stuck (a TimeoutExpired)
    with its /proc state and Python stacks; start()'s Child says the same when a long wait runs out.
    """

    def __init__(self, store_url: str, workspace: Path):
        self.store_url = store_url
        self.workspace = workspace

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "swarmkit.cli", *args]

    def _with_store(self, args: tuple[str, ...]) -> list[str]:
        verb, rest = args[0], list(args[1:])
        return self.argv(verb, "--store", self.store_url, *rest)

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None, check: bool = False) -> subprocess.CompletedProcess:
        proc = run_child(self._with_store(args), timeout, f"swarmkit {' '.join(args)}", cwd=self.workspace, env=child_env(env))
        if check and proc.returncode != 0:
            raise AssertionError(f"swarmkit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def call(self, *args: str, env: dict[str, str] | None = None, check: bool = False):
        """The same verb through the same `main()` the script runs, but in this process.

        For tests of what a verb does and prints, where a separate process is not
        the point: it saves the ~1 s of CPU each `swarmkit` process spends importing.
        Returns what run() returns (args, returncode, stdout, stderr).

        A hang here is a hang of this process: pytest-timeout (method "thread") prints every
        thread's stack, and 20 s before it does, pytest_timeout_set_timer below says what this
        process's children (the agents of a run hosted here) are doing.
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
            return Child(
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


# --- the fast loop: `pytest -m "not slow"` ---------------------------------------------------------
# A test is `slow` when it starts real processes. The rule is mechanical, read off the test at
# collection: it asks for a fixture that starts them (SLOW_FIXTURES), or its own source names one of
# the ways this suite starts one (SLOW_WORDS). The rest run in this process: store, flows, the
# console under Textual's pilot, `Cli.call`.
SLOW_FIXTURES = {"cli", "serving", "pgbouncer", "pgbouncer_url", "own_pg"}
SLOW_WORDS = ("Cli(", "Served(", "subprocess", "Popen", ".start(", "WorkerProc", "PtyReader", "run_on_pty", "_start_demo", "loaded(", "SWARMKIT,", "console_argv", "Round(")
_slow_source: dict[Any, bool] = {}


def _starts_processes(item: pytest.Item) -> bool:
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    fn = getattr(item, "function", None)
    if fn is None:
        return False
    if fn not in _slow_source:
        import inspect

        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = ""
        _slow_source[fn] = any(word in source for word in SLOW_WORDS)
    return _slow_source[fn]


def pytest_configure(config):
    # A shell that starts pytest in the background without job control (`pytest &` in a script, CI
    # runners) hands it SIGINT ignored, and every child inherits that through exec: a `swarmkit
    # status -w` started by a test then rightly ignores the Ctrl-C the test sends it, and the test
    # hangs, but only in the xdist workers where no in-process `run` has yet reset SIGINT (asyncio's
    # remove_signal_handler does). The suite's children start as a terminal's foreground job's would.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _starts_processes(item):
            item.add_marker(pytest.mark.slow)


# --- a hang is never silent ---------------------------------------------------------------------
# pytest-timeout (pyproject: timeout = 300, method "thread") prints this process's threads and ends
# it. Twenty seconds before, say what each child of this process is doing, for a test blocked on one
# (a readline, a wait without a timeout): that report lands in the test's captured stderr, which
# pytest-timeout prints with its own.


def _say_children(nodeid: str) -> None:
    me = os.getpid()
    kids = [pid for pid, fields in proc_stats() if int(fields[1]) == me]  # each report covers its descendants
    print(f"\n--- {nodeid} is about to time out; the children of this test process:", file=sys.stderr)
    for pid in kids[:8]:
        print(stuck_report(pid, "a child of the test process"), file=sys.stderr)
    sys.stderr.flush()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    if settings.timeout and settings.timeout > 40:
        timer = threading.Timer(settings.timeout - 20, _say_children, (item.nodeid,))
        timer.daemon = True
        timer.start()
        item._children_watch = timer
    return None  # pytest-timeout's own timer is set as well


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item):
    timer = getattr(item, "_children_watch", None)
    if timer is not None:
        timer.cancel()
    return None
