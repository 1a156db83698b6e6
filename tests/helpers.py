"""Shared test helpers that read the store the way an operator's tools do."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from swarmkit.store import Store
from swarmkit.store.queries import audit_for, checkpoints_for, events_after, get_job, jobs_by_prefix, workspaces_for

ROOT = Path(__file__).resolve().parents[1]
PG_BASE = os.environ.get("SWARMKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# Fast timings so that heartbeats, leases and cancels happen within a test.
FAST_ENV = {
    "SWARMKIT_HEARTBEAT": "0.2",
    "SWARMKIT_LEASE": "2",
    "SWARMKIT_INTERRUPT_GRACE": "1",
    "SWARMKIT_TERM_GRACE": "1",
    "SWARMKIT_POLL": "0.1",
    "SWARMKIT_ACTOR": "tester@ci",
}


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def read(store_url: str, workspace: Path, fn) -> Any:
    """Open the store in a fresh loop, run `fn(conn)`, close it: a quick look from outside."""

    async def go():
        store = await Store.open(store_url, workspace)
        try:
            async with store.read() as conn:
                return await fn(conn)
        finally:
            await store.close()

    return asyncio.run(go())


def job(store_url: str, workspace: Path, ref: str):
    async def fn(conn):
        if len(ref) == 32:
            return await conn.run_sync(get_job, ref)
        found = await conn.run_sync(jobs_by_prefix, ref)
        return found[0] if len(found) == 1 else None

    return read(store_url, workspace, fn)


def events(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(events_after, job_id, 0, limit=100000))


def audit(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(audit_for, job_id))


def checkpoints(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(checkpoints_for, job_id))


def workspaces(store_url: str, workspace: Path, job_id: str):
    async def fn(conn):
        return (await conn.run_sync(workspaces_for, [job_id]))[job_id]

    return read(store_url, workspace, fn)


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every live process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces.
        yield int(entry), stat[stat.rfind(")") + 2 :].split()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid and fields[0] != "Z"]
