"""Shared pieces of the benchmarks: percentiles, target lines, throwaway stores, big stores built fast.

Not a benchmark itself. The scripts next to it import it as `_benchlib`
(`python bench/x.py` puts bench/ first on sys.path).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from swarmkit.store import Store  # noqa: E402
from swarmkit.store.models import events, jobs, workers  # noqa: E402

PG_DEFAULT = os.environ.get("SWARMKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


# --- figures -----------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank); p99 of 100 values is the largest but one."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(len(ordered) * p / 100.0 + 0.5)) - 1))
    return ordered[k]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def line(label: str, values: list[float], unit: str = "ms", target: str | None = None, ok: bool | None = None) -> str:
    """`label  n=..  p50=..  p99=..  max=..   target ..  MET`"""
    out = (
        f"  {label:<44} n={len(values):<6} p50={med(values):9.3f} {unit}  p99={pct(values, 99):9.3f} {unit}"
        f"  max={max(values) if values else float('nan'):9.3f} {unit}"
    )
    if target:
        out += f"   target {target}"
        if ok is not None:
            out += f"  {verdict(ok)}"
    return out


def loadavg() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def header(title: str) -> None:
    print(f"{title}\n  ({loadavg()}; python {sys.version.split()[0]})", flush=True)


PACKAGES = ("console", "runtime", "store", "widgets")


def compile_tree() -> None:
    """Write the tree's .pyc files, so a console or CLI started by a benchmark runs from
    bytecode, as an installed package does. With PYTHONDONTWRITEBYTECODE set (CI and this
    project's sandbox set it) no run writes them, and each start would compile every module
    of ours again: 80 ms of a console's first paint, measured on 2026-12-02."""
    import compileall

    for pkg in PACKAGES:
        compileall.compile_dir(str(ROOT / pkg), quiet=1)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


# --- stores -------------------------------------------------------------------


def pg_url(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


async def drop_pg_schema(base: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(base.replace("postgresql+asyncpg://", "postgresql://").split("?")[0], timeout=10)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@contextlib.contextmanager
def store_url(kind: str, workspace: str, pg_base: str = PG_DEFAULT) -> Iterator[str]:
    """A fresh store URL: SQLite in the workspace, or a new PostgreSQL schema dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{workspace}/.swarmkit/store.db"
        return
    schema = "bench_" + uuid.uuid4().hex[:10]
    try:
        yield pg_url(pg_base, schema)
    finally:
        asyncio.run(drop_pg_schema(pg_base, schema))


def sqlite_path(url: str) -> Path | None:
    return Path(url.split(":///", 1)[1]) if url.startswith("sqlite") else None


# --- a big store, built with bulk inserts ----------------------------------------

FLOW_SOURCE = "\n".join(
    ['name = "bench"', ""] + [f'[[agents]]\nname = "step-{i}"\ncommand = "true"\n' for i in range(6)]
)
FLOWS = ["nightly-report", "research-crawl", "index-docs", "release", "train-eval", "lint-fix", "ingest", "bulk-rename"]
NODES = ["plan", "fetch", "read", "summarise", "cite", "publish"]
# The mix of 2,000 active runs (of 100,000).
ACTIVE_MIX = (("running", 0.5), ("queued", 0.2), ("stopped", 0.1), ("deferred", 0.1), ("lost", 0.1))
ENDED_MIX = (("completed", 0.9), ("failed", 0.05), ("cancelled", 0.04), ("faulted", 0.01))


@dataclass
class BigStore:
    url: str
    workspace: str
    runs: int
    active: int
    running_ids: list[str]
    active_ids: list[str]
    ended_ids: list[str]
    build_s: float


def _split(total: int, mix) -> list[str]:
    out: list[str] = []
    for i, (status, share) in enumerate(mix):
        n = total - len(out) if i == len(mix) - 1 else int(round(total * share))
        out += [status] * n
    return out


def _job_row(rng: random.Random, job_id: str, status: str, now: datetime, ended_recent: bool) -> dict:
    steps = 6
    flow = rng.choice(FLOWS)
    if status in ("completed", "failed", "cancelled", "faulted"):
        # Ended over the last 30 days; a few in the last minutes, so the default view shows some.
        ago = timedelta(seconds=rng.uniform(5, 540)) if ended_recent else timedelta(seconds=rng.uniform(900, 30 * 86400))
        ended = now - ago
        created = ended - timedelta(seconds=rng.uniform(30, 7200))
        step = steps if status == "completed" else rng.randrange(steps)
        return dict(
            id=job_id, flow=flow, flow_path=None, flow_source=FLOW_SOURCE, inputs="{}", status=status,
            created_at=created, updated_at=ended, started_at=created + timedelta(seconds=1), ended_at=ended,
            stop_requested_at=None, stop_requested_by=None,
            cancel_requested_at=ended if status == "cancelled" else None, cancel_requested_by="ops@bench" if status == "cancelled" else None,
            cancel_keep=False, epoch=1, host="bench-host", pid=4242, heartbeat_at=ended, last_event_at=ended, current_node=None,
            step=step, steps=steps, tokens=rng.randrange(100, 200_000), cost=round(rng.uniform(0, 3), 4),
            error="agent failed: exit status 2" if status == "failed" else ("runtime fault: harness lost" if status == "faulted" else None),
            pending_gate=None, approved_step=None, workspace_root="/bench",
        )
    created = now - timedelta(seconds=rng.uniform(60, 6 * 3600))
    step = rng.randrange(steps)
    row = dict(
        id=job_id, flow=flow, flow_path=None, flow_source=FLOW_SOURCE, inputs="{}", status=status,
        created_at=created, updated_at=now - timedelta(seconds=rng.uniform(20, 3000)), started_at=None, ended_at=None,
        stop_requested_at=None, stop_requested_by=None, cancel_requested_at=None, cancel_requested_by=None,
        cancel_keep=False, epoch=0, host=None, pid=None, heartbeat_at=None, last_event_at=None, current_node=None,
        step=0, steps=steps, tokens=0, cost=0.0, error=None, pending_gate=None, approved_step=None, workspace_root="/bench",
    )
    if status != "queued":
        row.update(epoch=1, host="bench-host", pid=4242, started_at=created + timedelta(seconds=1), step=step,
                   current_node=NODES[step], tokens=rng.randrange(100, 50_000), cost=round(rng.uniform(0, 1), 4))
    if status == "running":
        # Heart-beating hosts: a console with the default lease would mark them lost
        # after it; the benchmarks open it with a long lease instead.
        row.update(heartbeat_at=now, last_event_at=now - timedelta(seconds=rng.uniform(1, 60)))
    elif status == "stopped":
        row.update(stop_requested_at=row["updated_at"], stop_requested_by="ops@bench")
    elif status == "deferred":
        row.update(pending_gate=NODES[step])
    elif status == "lost":
        row.update(heartbeat_at=row["updated_at"], last_event_at=row["updated_at"])
    return row


async def build_big_store(url: str, workspace: str, runs: int = 100_000, active: int = 2_000, *, seed: int = 5, batch: int = 10_000) -> BigStore:
    """`runs` rows in `jobs` (of which `active` active, half of those running), by executemany in big batches."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    now = datetime.now(UTC)
    statuses = _split(active, ACTIVE_MIX) + _split(runs - active, ENDED_MIX)
    recent_ended = min(50, runs - active)
    store = await Store.open(url, workspace)
    running_ids: list[str] = []
    active_ids: list[str] = []
    ended_ids: list[str] = []
    try:
        rows: list[dict] = []
        for i, status in enumerate(statuses):
            job_id = uuid.UUID(int=rng.getrandbits(128)).hex
            ended_recent = i >= active and i < active + recent_ended
            rows.append(_job_row(rng, job_id, status, now, ended_recent))
            (active_ids if i < active else ended_ids).append(job_id)
            if status == "running":
                running_ids.append(job_id)
            if len(rows) >= batch:
                async with store.write() as conn:
                    await conn.execute(insert(jobs), rows)
                rows = []
        if rows:
            async with store.write() as conn:
                await conn.execute(insert(jobs), rows)
        async with store.write() as conn:
            await conn.execute(insert(workers).values(id=uuid.uuid4().hex, host="bench-host", pid=4242, concurrency=64, started_at=now, heartbeat_at=now))
    finally:
        await store.close()
    return BigStore(url, workspace, runs, active, running_ids, active_ids, ended_ids, time.perf_counter() - t0)


async def add_events_bulk(url: str, workspace: str, job_id: str, count: int, *, batch: int = 50_000, node: str = "read") -> float:
    """`count` log events for one run, by executemany; returns seconds taken."""
    t0 = time.perf_counter()
    store = await Store.open(url, workspace)
    base = datetime.now(UTC) - timedelta(seconds=count / 1000)
    try:
        done = 0
        while done < count:
            n = min(batch, count - done)
            rows = [
                dict(job_id=job_id, at=base + timedelta(milliseconds=done + k), kind="log", node=node, step=2,
                     text=f"line {done + k}: fetched page {(done + k) % 977} of the corpus, 3 links, {((done + k) * 37) % 4096} bytes")
                for k in range(n)
            ]
            async with store.write() as conn:
                await conn.execute(insert(events), rows)
            done += n
    finally:
        await store.close()
    return time.perf_counter() - t0


def write_json(path: str | None, data: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str))
