"""Helpers for the reliability tests (crash, contention, bad input, security, the race harness).

Everything here looks at real things: the store through its own queries, the
processes through /proc, PostgreSQL's backends through pg_stat_activity, a
terminal through a real pty. No mocks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.helpers import LEASE_S, PG_BASE, ROOT, group_alive, proc_stats, timing_env, wait_for  # noqa: F401  (LEASE_S: tests import it from here)


def scale() -> float:
    """SWARMKIT_STRESS_SCALE multiplies counts and durations of the CI-sized rounds (default 1)."""
    try:
        return max(0.1, float(os.environ.get("SWARMKIT_STRESS_SCALE", "1") or 1))
    except ValueError:
        return 1.0


def env_for_children(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(timing_env())
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SWARMKIT_STORE", None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def swarmkit_argv(verb: str, store_url: str, *rest: str) -> list[str]:
    return [sys.executable, "-m", "swarmkit.cli", verb, "--store", store_url, *rest]


def console_argv(store_url: str, *rest: str) -> list[str]:
    return [sys.executable, "-m", "swarmkit.console.cli", "--store", store_url, *rest]


# --- reading the store -------------------------------------------------------


def run_async(coro_fn, *args, **kwargs):
    return asyncio.run(coro_fn(*args, **kwargs))


async def _with_store(store_url: str, workspace: Path, fn, *, migrate: bool = True):
    from swarmkit.store import Store

    store = await Store.open(store_url, workspace, migrate=migrate)
    try:
        return await fn(store)
    finally:
        await store.close()


def with_store(store_url: str, workspace: Path, fn, *, migrate: bool = True):
    """Open the store in a fresh loop, run `await fn(store)`, close it."""
    return asyncio.run(_with_store(store_url, workspace, fn, migrate=migrate))


def sql(store_url: str, workspace: Path, statement: str, params: dict | None = None, *, write: bool = False) -> list[tuple]:
    """One raw SQL statement against an existing store, as an operator with a SQL shell would run it (no migration)."""
    from sqlalchemy import text

    async def fn(store):
        ctx = store.write() if write else store.read()
        async with ctx as conn:
            res = await conn.execute(text(statement), params or {})
            return [tuple(r) for r in res] if res.returns_rows else []

    return with_store(store_url, workspace, fn, migrate=False)


async def snapshot_async(store, ids: Iterable[str] | None = None) -> dict[str, Any]:
    """Every row the store holds about some runs: jobs, events, checkpoints, audit, workspaces."""
    from sqlalchemy import select

    from swarmkit.store.models import JOB_COLUMNS, audit, checkpoints, events, jobs, workspaces
    from swarmkit.store.records import JobRecord

    out: dict[str, Any] = {"jobs": {}, "events": {}, "checkpoints": {}, "audit": {}, "workspaces": {}}
    async with store.read() as conn:
        stmt = select(*[jobs.c[name] for name in JOB_COLUMNS])
        id_list = list(ids) if ids is not None else None
        if id_list is not None:
            stmt = stmt.where(jobs.c.id.in_(id_list))
        for r in await conn.execute(stmt):
            j = JobRecord(**r._mapping)
            out["jobs"][j.id] = j
        wanted = set(out["jobs"])
        for r in await conn.execute(select(events).order_by(events.c.id)):
            if r.job_id in wanted:
                out["events"].setdefault(r.job_id, []).append(r._asdict())
        for r in await conn.execute(select(checkpoints).order_by(checkpoints.c.job_id, checkpoints.c.step)):
            if r.job_id in wanted:
                out["checkpoints"].setdefault(r.job_id, []).append(r._asdict())
        for r in await conn.execute(select(audit).order_by(audit.c.id)):
            d = r._asdict()
            try:
                d["detail"] = json.loads(d["detail"] or "{}")
            except ValueError:
                pass
            out["audit"].setdefault(r.job_id, []).append(d)
        for r in await conn.execute(select(workspaces).order_by(workspaces.c.id)):
            if r.job_id in wanted:
                out["workspaces"].setdefault(r.job_id, []).append(r._asdict())
    return out


def snapshot(store_url: str, workspace: Path, ids: Iterable[str] | None = None) -> dict[str, Any]:
    return with_store(store_url, workspace, lambda s: snapshot_async(s, ids))


def sqlite_path(store_url: str) -> Path | None:
    if store_url.startswith("sqlite"):
        return Path(store_url.split(":///", 1)[1])
    return None


def integrity_check(db: Path) -> str:
    """PRAGMA integrity_check on a SQLite store, read with the sqlite3 module (no Swarmkit code)."""
    con = sqlite3.connect(str(db), timeout=30)
    try:
        rows = con.execute("PRAGMA integrity_check").fetchall()
        fk = con.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        con.close()
    text = "; ".join(str(r[0]) for r in rows)
    if fk:
        text += f"; foreign key violations: {fk[:5]}"
    return text


# --- PostgreSQL backends -----------------------------------------------------


def pg_dsn() -> str:
    return PG_BASE.replace("postgresql+asyncpg://", "postgresql://")


def pg_query(statement: str, *args) -> list[tuple]:
    async def go():
        import asyncpg

        conn = await asyncpg.connect(pg_dsn(), timeout=10)
        try:
            return [tuple(r) for r in await conn.fetch(statement, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())


def tcp_ports_of(pid: int) -> set[int]:
    """Local ports of the TCP sockets a process holds (from /proc: its fds' inodes, then /proc/net/tcp*)."""
    inodes: set[str] = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[9] in inodes:
                        ports.add(int(parts[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


def pg_backends_of(pid: int) -> list[tuple[int, str, str]]:
    """(backend pid, state, query) of every PostgreSQL backend serving process `pid`."""
    ports = sorted(tcp_ports_of(pid))
    if not ports:
        return []
    return pg_query(
        "SELECT pid, coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
        ports,
    )


def pg_terminate_backends_of(pid: int, only_active: bool = False) -> int:
    """Kill the PostgreSQL connections of a process (as a DBA or a failover would); returns how many."""
    ports = sorted(tcp_ports_of(pid))
    if not ports:
        return 0
    cond = " AND state = 'active'" if only_active else ""
    rows = pg_query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()" + cond,
        ports,
    )
    return sum(1 for r in rows if r[0])


def pg_kill_storm(pid: int, seconds: float, *, every: float = 0.005, only_active: bool = True, idle_every: float = 0.5) -> dict[str, int]:
    """Kill process `pid`'s PostgreSQL connections for `seconds`: the ones running a statement the moment
    they are seen (polled every `every` s, so a query is cut mid-flight), and every `idle_every` s all of
    them. Returns how many of each were killed."""

    async def go() -> dict[str, int]:
        import asyncpg

        conn = await asyncpg.connect(pg_dsn(), timeout=10)
        killed = {"active": 0, "any": 0}
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        last_idle = loop.time()
        try:
            while loop.time() < end and process_alive(pid):
                ports = sorted(tcp_ports_of(pid))
                if ports:
                    rows = await conn.fetch(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1::int[]) "
                        "AND pid <> pg_backend_pid() AND state = 'active'",
                        ports,
                    )
                    killed["active"] += sum(1 for r in rows if r[0])
                    if not only_active or loop.time() - last_idle >= idle_every:
                        last_idle = loop.time()
                        rows = await conn.fetch(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
                            ports,
                        )
                        killed["any"] += sum(1 for r in rows if r[0])
                await asyncio.sleep(every)
        finally:
            await conn.close()
        return killed

    return asyncio.run(go())


# --- processes ---------------------------------------------------------------


def run_group_alive(pgid: int, run_id: str) -> list[int]:
    """Live processes of group `pgid` that belong to run `run_id` (by SWARMKIT_RUN_ID in their
    environment), so that a pid reused by an unrelated process is not mistaken for the run's."""
    out = []
    needle = f"SWARMKIT_RUN_ID={run_id}".encode()
    for pid in group_alive(pgid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            out.append(pid)
    return out


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def children_of(pid: int) -> list[int]:
    return [child for child, fields in proc_stats() if int(fields[1]) == pid and fields[0] != "Z"]


def end_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    """Stop a process this test started (and only it): the signal, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def kill_group_of(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of a process this test started in its own session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


wait_until = wait_for


# --- terminals -----------------------------------------------------------------


def run_on_pty(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 60, columns: int = 200, rows: int = 50) -> tuple[int, bytes]:
    """Run a command with stdout and stderr on a real pty; return its exit code and every byte it wrote."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = dict(env)
    env.setdefault("TERM", "xterm-256color")
    env["COLUMNS"], env["LINES"] = str(columns), str(rows)
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                kill_group_of(proc)
                raise AssertionError(f"{argv[2:5]} did not finish on the pty within {timeout}s")
            r, _, _ = select.select([master], [], [], min(left, 0.5))
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                # Drain what is left, then stop.
                try:
                    while True:
                        r, _, _ = select.select([master], [], [], 0.2)
                        if not r:
                            break
                        data = os.read(master, 65536)
                        if not data:
                            break
                        chunks.append(data)
                except OSError:
                    pass
                break
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    return code, b"".join(chunks)


_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def terminal_hazards(raw: bytes) -> list[str]:
    """What in these bytes a terminal would act on: ESC, other C0 but tab/newline/CR, C1, bidi controls, bad UTF-8."""
    problems: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"invalid UTF-8 at byte {exc.start}: {raw[max(0, exc.start - 20): exc.start + 20]!r}")
        text = raw.decode("utf-8", errors="replace")
    for i, ch in enumerate(text):
        code = ord(ch)
        bad = None
        if ch == "\x1b":
            bad = "ESC"
        elif code < 0x20 and ch not in "\t\n\r":
            bad = f"C0 {code:#04x}"
        elif code == 0x7F:
            bad = "DEL"
        elif 0x80 <= code <= 0x9F:
            bad = f"C1 {code:#04x}"
        elif ch in _BIDI:
            bad = f"bidi {unicodedata.name(ch, hex(code))}"
        if bad:
            problems.append(f"{bad} at {i}: {text[max(0, i - 30): i + 30]!r}")
            if len(problems) > 20:
                break
    return problems


def strip_pty_newlines(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n")


# --- mounts ----------------------------------------------------------------------


def try_mount(args: list[str]) -> str | None:
    """Run mount(8); None on success, else why not (for a skip reason)."""
    try:
        proc = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount is not available here: {exc}"
    if proc.returncode != 0:
        return f"mount {' '.join(args)} was refused: {proc.stderr.strip()}"
    return None


def umount(path: Path) -> None:
    for _ in range(20):
        proc = subprocess.run(["umount", str(path)], capture_output=True, text=True)
        if proc.returncode == 0 or "not mounted" in proc.stderr:
            return
        time.sleep(0.25)
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def wal_size(db: Path) -> int:
    try:
        return (db.parent / (db.name + "-wal")).stat().st_size
    except FileNotFoundError:
        return 0


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")


def has_traceback(text: str) -> bool:
    return bool(_TRACEBACK.search(text or ""))


class Ran:
    """What a command printed and returned (like subprocess.CompletedProcess)."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str):
        self.args, self.returncode, self.stdout, self.stderr = argv, returncode, stdout, stderr


def in_process(main, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """Run a command's `main(argv)` in this process (fast, for big matrices of bad input).

    The same entry point the installed script runs; an exception that escapes
    it is what a user would see as a traceback, so it is printed as one.
    """
    import contextlib
    import io
    import traceback

    out, err = io.StringIO(), io.StringIO()
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    os.environ.update(timing_env())
    os.environ.pop("SWARMKIT_STORE", None)
    if env:
        os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int) and exc.code is not None:
                    print(exc.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        _forget_modules_from_outside(saved_modules)
    return Ran(argv, code if code is not None else 0, out.getvalue(), err.getvalue())


def _forget_modules_from_outside(before: set[str]) -> None:
    """Drop the modules a command imported from outside the project and its environment (a flow's
    `call` modules beside its file), so a later test's module of the same name is imported afresh."""
    keep = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, ROOT})
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("swarmkit", "tests"):
            continue
        mod = sys.modules.get(name)
        origin = getattr(getattr(mod, "__spec__", None), "origin", None) or getattr(mod, "__file__", None)
        if origin in ("built-in", "frozen"):
            continue
        if not origin or not str(Path(origin).resolve()).startswith(keep):  # beside a flow, or made from source
            sys.modules.pop(name, None)


def swarmkit_in_process(verb: str, store_url: str, *rest: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    from swarmkit.cli import main

    return in_process(main, [verb, "--store", store_url, *rest], env=env, cwd=cwd)


def console_in_process(store_url: str, *rest: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    from swarmkit.console.cli import main

    return in_process(main, ["--store", store_url, *rest], env=env, cwd=cwd)
