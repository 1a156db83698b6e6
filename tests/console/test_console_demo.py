"""`swarmkit-console demo`: within a minute, live, stopping, stopped, deferred and completed runs, really run; quitting stops them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from swarmkit.console.demo_session import DemoSession
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.queries import events_after, list_jobs, workspaces_for

WANTED = {"running", "stopping", "stopped", "deferred", "completed", "failed"}


async def look(session: DemoSession):
    store = await Store.open(session.store_url, session.folder, create=False)
    try:
        async with store.read() as conn:
            jobs = await conn.run_sync(list_jobs)
            wss = await conn.run_sync(workspaces_for, [j.id for j in jobs])
            logs = {j.id: len(await conn.run_sync(events_after, j.id, 0, 10_000)) for j in jobs}
        return jobs, wss, logs
    finally:
        await store.close()


def test_demo_shows_every_state_within_a_minute_and_stops_what_it_started(tmp_path):
    session = DemoSession(tmp_path / "demo")
    seen: dict[str, set[str]] = {}
    try:
        session.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs, wss, logs = asyncio.run(look(session))
            now = store_now()
            for job in jobs:
                seen.setdefault(job.display_status(now), set()).add(job.flow)
            if WANTED <= set(seen):
                break
            assert session.worker_problem() is None
            time.sleep(0.5)
        assert WANTED <= set(seen), f"saw only {sorted(seen)}"
        assert "train-eval" in seen["stopping"] and "index-docs" in seen["stopped"] and "release" in seen["deferred"]
        by_flow = {j.flow: j for j in jobs}
        assert by_flow["index-docs"].stop_requested_by == "demo"
        assert any(j.tokens > 0 and j.cost > 0 for j in jobs)  # usage, from callables and from a command's $SWARMKIT_OUTPUT
        assert all(logs[j.id] > 3 for j in jobs if j.status != "queued")
        kept = [w for ws in wss.values() for w in ws if w.state in ("active", "kept")]
        assert any(any(p.is_file() for p in Path(w.path).rglob("*")) for w in kept)  # agents wrote files
    finally:
        session.stop(say=lambda m: None)
    assert session.worker is not None and session.worker.poll() is not None
    assert session.director is not None and session.director.poll() is not None
