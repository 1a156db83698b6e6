"""`swarmkit-console demo`: within a minute, live, stopping, stopped, deferred and completed runs, really run; quitting stops them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from swarmkit.console.demo_session import DemoSession
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.queries import events_after, latest_checkpoint, list_jobs, workspaces_for

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


async def partial_of(session: DemoSession, job_id: str) -> str:
    store = await Store.open(session.store_url, session.folder, create=False)
    try:
        cp = await store.run_read(lambda c: latest_checkpoint(c, job_id))
        return cp.partial if cp and cp.partial else ""
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
        # triage-tickets: the director's stop lands at a boundary inside its command agent's tool loop.
        while time.monotonic() < deadline + 30 and not any(j.flow == "triage-tickets" and j.status == "stopped" for j in jobs):
            time.sleep(0.5)
            jobs, _, _ = asyncio.run(look(session))
        triage = next(j for j in jobs if j.flow == "triage-tickets")
        assert (triage.status, triage.current_node, triage.step) == ("stopped", "triage", 1)
        assert asyncio.run(partial_of(session, triage.id)).startswith('{"done":')
    finally:
        session.stop(say=lambda m: None)
    assert session.worker is not None and session.worker.poll() is not None
    assert session.director is not None and session.director.poll() is not None


def _demo_worker(folder: Path) -> int | None:
    """The pid of the demo's worker process (its command line names the demo folder)."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "worker" in cmd and str(folder) in cmd:
            return proc.info["pid"]
    return None


def _start_demo(folder: Path):
    import sys

    from tests.reliability import env_for_children
    from tests.test_contention import PtyReader

    demo = PtyReader([sys.executable, "-m", "swarmkit.console.cli", "demo", str(folder)], folder.parent, dict(env_for_children(), TERM="xterm-256color"))
    deadline = time.monotonic() + 60
    while (pid := _demo_worker(folder)) is None:
        assert demo.proc.poll() is None, bytes(demo.out[-2000:])
        assert time.monotonic() < deadline, "the demo's worker never started"
        time.sleep(0.2)
    while b"workers" not in demo.out:  # the console has painted
        assert time.monotonic() < deadline, bytes(demo.out[-2000:])
        time.sleep(0.2)
    return demo, pid


def _gone(pid: int, timeout: float) -> bool:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.2)
    return False


def test_the_demo_exits_0_on_q_and_its_worker_ends_however_the_console_ends(tmp_path):
    import os
    import signal

    demo, worker = _start_demo(tmp_path / "q")
    assert demo.quit(b"q", timeout=40) == 0, bytes(demo.out[-2000:])
    assert _gone(worker, 5), "the demo's worker outlived `q`"

    # A closed terminal: SIGHUP to the console ends it like `q`, demo and all.
    demo, worker = _start_demo(tmp_path / "hup")
    os.kill(demo.proc.pid, signal.SIGHUP)
    assert demo.quit(b"", timeout=40) is not None, "the console did not end on SIGHUP"
    assert _gone(worker, 10), "the demo's worker outlived a closed terminal"

    # A terminal that closes with no SIGHUP reaching the console (it has no controlling terminal:
    # here it runs in a session of its own): it sees the terminal hung up and ends, demo and all.
    # It used to spin a core at 100 % for as long as nobody killed it, its worker hosting the demo.
    demo, worker = _start_demo(tmp_path / "closed")
    assert demo.close_terminal(timeout=30) is not None, "the console outlived its closed terminal"
    assert _gone(worker, 20), "the demo's worker outlived a closed terminal"

    # kill -9 of the console: nobody cleans up, and still nothing of the demo is left running.
    demo, worker = _start_demo(tmp_path / "kill")
    os.kill(demo.proc.pid, signal.SIGKILL)
    demo.quit(b"", timeout=10)
    assert _gone(worker, 10), "the demo's worker outlived a killed console"


def test_the_demos_parting_hints_name_commands_that_run_from_here(tmp_path, monkeypatch):
    """Started as `.venv/bin/swarmkit-console demo` with the virtualenv not activated, `swarmkit-console DIR`
    and `swarmkit worker DIR` are not on PATH: the hints give their paths (a new user, by hand)."""
    import sys

    from swarmkit.console.cli import command

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("swarmkit-console", "swarmkit"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(bin_dir / "swarmkit-console"), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command("swarmkit") == str(bin_dir / "swarmkit")
    assert command("swarmkit-console") == str(bin_dir / "swarmkit-console")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # activated: the names are enough
    assert command("swarmkit") == "swarmkit" and command("swarmkit-console") == "swarmkit-console"
