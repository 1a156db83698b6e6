"""A read-only store shows what it holds, its own runs, or says plainly that it may be stale.

The store's folder is made read-only with a read-only bind mount over it (we
run as root, whom permission bits do not stop): the way a store on a
read-only mount, or a backup restored read-only, is seen.

1. Rows a writer committed to the WAL but did not checkpoint (a reader held a
   snapshot, so they could not be) are shown: the run that completed is
   `completed`, not the `queued 0/N` of the store file alone.
2. A read-only store whose -shm is missing (a copy of the file and its WAL)
   cannot be read with its WAL: what it shows is the last checkpoint, and
   `swarmkit` says so once on stderr, `--once --json` carries `stale_warning`,
   the console's header shows it.
3. A path goes into SQLite's `file:` URI escaped: a workspace named `pc%41`
   shows its own runs, not those of `pcA`; `#` and `?` in a path work.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarmkit.console.app import make_app
from swarmkit.store.store_location import STALE_WARNING
from tests.reliability import env_for_children, try_mount, umount

from .conftest import wait_for, write_flow
from .helpers import need

STEPS = 6


@pytest.fixture
def read_only():
    """Makes a folder read-only with a bind mount over it; unmounted afterwards.

    Skips where mount is refused, except under CI (the same kind of machine), where that fails.
    """
    made: list[Path] = []

    def make(folder: Path) -> None:
        for args in (["--bind", str(folder), str(folder)], ["-o", "remount,bind,ro", str(folder)]):
            why = try_mount(args)
            need(why is None, f"a read-only bind mount is refused: {why}")
            if folder not in made:
                made.append(folder)
        try:
            (folder / "probe").write_text("x")
        except OSError:
            return
        pytest.fail(f"{folder} is still writable under a read-only bind mount")

    yield make
    for folder in reversed(made):
        umount(folder)


def swarmkit(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`swarmkit` as an operator types it: the store is the workspace's own, no --store."""
    return subprocess.run([sys.executable, "-m", "swarmkit.cli", *args], cwd=cwd, env=env_for_children(), capture_output=True, text=True, timeout=timeout)


def console_once(ws: Path, *rest: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swarmkit.console.cli", str(ws), "--once", *rest], cwd=ws, env=env_for_children(), capture_output=True, text=True, timeout=120)


def steps_flow(folder: Path, name: str) -> Path:
    body = f'name = "{name}"\n' + "".join(f'[[agents]]\nname = "n{i}"\ncommand = "echo line-{i}"\n' for i in range(STEPS))
    return write_flow(folder, name, body)


def db_of(ws: Path) -> Path:
    return ws / ".swarmkit" / "store.db"


def status_of(ws: Path, run_id: str) -> str:
    conn = sqlite3.connect(f"file:{db_of(ws)}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT status FROM jobs WHERE id LIKE ?", (run_id + "%",)).fetchone()[0]
    finally:
        conn.close()


class Holder:
    """A reader holding a snapshot from before the writes: no checkpoint gets past it, so they stay in the WAL."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT count(*) FROM jobs").fetchone()

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def completed_in_the_wal(tmp_path: Path, ws: Path) -> tuple[str, Holder]:
    """A run queued (and checkpointed into the store file), then hosted to completion by a worker while a reader pins the WAL."""
    flow = steps_flow(tmp_path, "six")
    queued = swarmkit("run", "--detach", str(flow), str(ws), cwd=ws)
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    assert not Path(f"{db_of(ws)}-wal").exists() or Path(f"{db_of(ws)}-wal").stat().st_size == 0
    holder = Holder(db_of(ws))
    worker = subprocess.Popen([sys.executable, "-m", "swarmkit.cli", "worker", str(ws)], cwd=ws, env=env_for_children(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: status_of(ws, run_id) == "completed", timeout=60, what="the worker to complete the run")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
    assert Path(f"{db_of(ws)}-wal").stat().st_size > 0, "the writes were checkpointed: the test would prove nothing"
    return run_id[:8], holder


def test_a_read_only_store_shows_what_its_wal_holds(tmp_path: Path, read_only):
    ws = tmp_path / "ws"
    ws.mkdir()
    run_id, holder = completed_in_the_wal(tmp_path, ws)
    try:
        read_only(ws / ".swarmkit")
        res = swarmkit("status", run_id, str(ws), "--json", cwd=ws)
        assert res.returncode == 0, res.stderr
        view = json.loads(res.stdout)
        assert (view["status"], view["step"], view["steps"]) == ("completed", STEPS, STEPS), res.stdout
        assert "stale" not in res.stderr, res.stderr
        logs = swarmkit("logs", run_id, str(ws), cwd=ws)
        assert logs.returncode == 0 and f"line-{STEPS - 1}" in logs.stdout, logs.stdout + logs.stderr
        dump = console_once(ws, "--json")
        assert dump.returncode == 0, dump.stderr
        data = json.loads(dump.stdout)
        assert [r["status"] for r in data["runs"]] == ["completed"] and "stale_warning" not in data
    finally:
        umount(ws / ".swarmkit")
        holder.close()


async def header_of(ws: Path) -> str:
    app = make_app(None, ws, read_only=True, poll_interval=0.1)
    async with app.run_test(size=(400, 30)):
        deadline = time.monotonic() + 20
        while getattr(app.screen, "polls", 0) < 1:
            assert time.monotonic() < deadline, "the console never polled"
            await asyncio.sleep(0.05)
        return str(app.screen.query_one("#header").render())


def test_a_read_only_store_without_its_wal_index_says_it_may_be_stale(tmp_path: Path, read_only, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    run_id, holder = completed_in_the_wal(tmp_path, ws)
    # A copy of the store file and its WAL, without the -shm: nothing can rebuild the index on a read-only mount.
    copy = tmp_path / "copy"
    (copy / ".swarmkit").mkdir(parents=True)
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{db_of(ws)}{suffix}", f"{db_of(copy)}{suffix}")
    holder.close()
    read_only(copy / ".swarmkit")
    res = swarmkit("status", str(copy), cwd=copy)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("may be stale") == 1, res.stderr
    assert STALE_WARNING in res.stderr
    assert f"1/{STEPS}" in res.stdout, res.stdout  # what the checkpoint holds (queued before its first node), said to be possibly stale
    dump = console_once(copy, "--json")
    assert dump.returncode == 0, dump.stderr
    assert json.loads(dump.stdout)["stale_warning"] == STALE_WARNING
    text = console_once(copy)
    assert text.returncode == 0 and "may be stale" in text.stderr, text.stderr
    monkeypatch.delenv("SWARMKIT_STORE", raising=False)
    assert "may be stale" in asyncio.run(header_of(copy))
    # A store with no WAL at all (closed cleanly) is whole: no warning.
    umount(copy / ".swarmkit")
    os.unlink(f"{db_of(copy)}-wal")
    read_only(copy / ".swarmkit")
    res = swarmkit("status", str(copy), cwd=copy)
    assert res.returncode == 0 and "stale" not in res.stderr, res.stderr


@pytest.mark.parametrize("held", [True, False], ids=["with-wal", "checkpointed"])
def test_a_path_is_escaped_in_the_sqlite_uri(tmp_path: Path, read_only, held: bool):
    names = {"pcA": "flow-of-pcA", "pc%41": "flow-of-pc-percent-41", "a#b?c": "flow-of-hash-and-query"}
    holders: list[Holder] = []
    folders: list[Path] = []
    try:
        for folder, flow_name in names.items():
            ws = tmp_path / folder
            ws.mkdir()
            ran = swarmkit("run", str(steps_flow(tmp_path, flow_name)), str(ws), cwd=ws)
            assert ran.returncode == 0, ran.stderr
            if held:
                holders.append(Holder(db_of(ws)))
                again = swarmkit("run", str(steps_flow(tmp_path, flow_name)), str(ws), cwd=ws)
                assert again.returncode == 0, again.stderr
            folders.append(ws / ".swarmkit")
            read_only(ws / ".swarmkit")
        for folder, flow_name in names.items():
            ws = tmp_path / folder
            res = swarmkit("status", str(ws), cwd=ws)
            assert res.returncode == 0, f"{folder}: {res.stderr}"
            assert flow_name in res.stdout, f"{folder} did not show its own runs:\n{res.stdout}"
            others = [n for f, n in names.items() if f != folder]
            assert not [n for n in others if n in res.stdout], f"{folder} showed another workspace's runs:\n{res.stdout}"
            assert res.stdout.count(flow_name) == (2 if held else 1), res.stdout
            assert "stale" not in res.stderr
    finally:
        for folder in folders:
            umount(folder)
        for holder in holders:
            holder.close()
