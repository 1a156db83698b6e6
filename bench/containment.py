"""Containment: from a cancel to the last process of the agent gone, and from a host freezing to its agents dead.

    python bench/containment.py [--tries 20] [--store URL]

One `swarmkit worker` process hosts each run. For each kind of agent (a plain
command, a command that ignores SIGINT and SIGTERM, a command with a child
that escaped into a session of its own, a sync and an async callable), the
agent records the pid of every process it starts; `control.cancel` is called
from here, and the clock stops when /proc shows none of them alive (for the
async callable, which lives in the worker, when it has left its `finally`).
Then the worker is frozen with SIGSTOP while a command agent works, and the
clock stops when the agent is dead. Graces are the environment's
(SWARMKIT_INTERRUPT_GRACE, SWARMKIT_TERM_GRACE; 0.5 s each here unless set).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _benchlib import header, line, store_url

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.queries import get_job

AGENTS = textwrap.dedent(
    """
    import asyncio, os, time

    def sync_loop(ctx):
        with open(os.path.join(os.environ["BENCH_PIDS_DIR"], ctx.run_id), "a") as f:
            f.write(f"{os.getpid()}\\n")
        while True:
            time.sleep(0.05)

    async def async_loop(ctx):
        path = os.path.join(os.environ["BENCH_PIDS_DIR"], ctx.run_id)
        with open(path, "a") as f:
            f.write("async\\n")
        try:
            while True:
                await asyncio.sleep(0.05)
        finally:
            with open(path + ".ended", "w") as f:
                f.write(str(time.monotonic()))
    """
)

KINDS = {
    "plain command": 'command = "echo $$ >> $BENCH_PIDS_DIR/$SWARMKIT_RUN_ID; sleep 600"',
    "command ignoring INT and TERM": "command = \"trap '' INT TERM; echo $$ >> $BENCH_PIDS_DIR/$SWARMKIT_RUN_ID; while :; do sleep 0.05; done\"",
    "command with an escaped child": "command = \"setsid sh -c 'echo $$ >> $BENCH_PIDS_DIR/$SWARMKIT_RUN_ID; exec sleep 600' & echo $$ >> $BENCH_PIDS_DIR/$SWARMKIT_RUN_ID; wait\"",
    "sync callable": 'call = "benchcontain:sync_loop"',
    "async callable": 'call = "benchcontain:async_loop"',
}


# Agents inherit only what their flow lists (runtime/agent_env.py): the pid folder is passed by name.
PASS_ENV = 'env = ["BENCH_PIDS_DIR"]\n'


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def pids_in(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split() if x.isdigit()]
    except OSError:
        return []


async def job_of(url: str, ws: str, job_id: str):
    store = await Store.open(url, ws)
    try:
        async with store.read() as conn:
            return await conn.run_sync(get_job, job_id)
    finally:
        await store.close()


async def submit(url: str, ws: str, flow_path: Path) -> str:
    store = await Store.open(url, ws)
    try:
        return (await control.submit(store, load_flow(flow_path), {})).id
    finally:
        await store.close()


async def cancel(url: str, ws: str, job_id: str) -> None:
    store = await Store.open(url, ws)
    try:
        await control.cancel(store, job_id, actor="bench")
    finally:
        await store.close()


def wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def one_cancel(url: str, ws: Path, kind: str, env: dict[str, str], tries: int) -> list[float]:
    flow = ws / f"k{abs(hash(kind)) % 10**6}.toml"
    flow.write_text(f'name = "contain"\n{PASS_ENV}[[agents]]\nname = "a"\n{KINDS[kind]}\n')
    worker = subprocess.Popen([sys.executable, "-m", "swarmkit.cli", "worker", "--store", url, "--concurrency", "2", str(ws)], env=env, stdout=subprocess.DEVNULL, stderr=open(ws / "worker.err", "a"))
    out: list[float] = []
    try:
        for i in range(tries):
            job_id = asyncio.run(submit(url, str(ws), flow))
            pids = Path(env["BENCH_PIDS_DIR"]) / job_id
            want = 2 if "escaped" in kind else 1
            wait(lambda: len(pids_in(pids)) + pids.read_text().count("async") >= want if pids.exists() else False, 30, "the agent to start")
            t0 = time.monotonic()
            asyncio.run(cancel(url, str(ws), job_id))
            if kind == "async callable":
                ended = Path(str(pids) + ".ended")
                # Written once it is open: an empty file is a write still on its way (seen under load in CI).
                wait(lambda: ended.exists() and ended.read_text().strip(), 30, "the async agent to end")
                out.append((float(ended.read_text()) - t0) * 1000)
            else:
                found = pids_in(pids)
                wait(lambda: not any(alive(p) for p in found), 30, "the agent's processes to be gone")
                out.append((time.monotonic() - t0) * 1000)
            wait(lambda: asyncio.run(job_of(url, str(ws), job_id)).status == "cancelled", 30, "the run to read cancelled")
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
    return out


def one_freeze(url: str, ws: Path, env: dict[str, str], tries: int, lease: float) -> list[float]:
    flow = ws / "freeze.toml"
    flow.write_text(f'name = "freeze"\n{PASS_ENV}[[agents]]\nname = "a"\ncommand = "echo $$ >> $BENCH_PIDS_DIR/$SWARMKIT_RUN_ID; sleep 600"\n')
    out = []
    for i in range(tries):
        worker = subprocess.Popen([sys.executable, "-m", "swarmkit.cli", "worker", "--store", url, str(ws)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            job_id = asyncio.run(submit(url, str(ws), flow))
            pids = Path(env["BENCH_PIDS_DIR"]) / job_id
            wait(lambda: bool(pids_in(pids)), 30, "the agent to start")
            time.sleep(lease / 2)
            (pid,) = pids_in(pids)
            t0 = time.monotonic()
            worker.send_signal(signal.SIGSTOP)
            wait(lambda: not alive(pid), lease * 3, "the frozen host's agent to die")
            out.append((time.monotonic() - t0) * 1000)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.send_signal(signal.SIGCONT)
            worker.wait()
        # Only once the host is dead: frozen inside a write transaction (a heartbeat's, a few
        # ms of every 200), it holds SQLite's write lock until it dies, and this cancel would
        # wait out the 30 s busy timeout and fail with "database is locked" (seen once in a
        # loaded full run's smoke round).
        asyncio.run(cancel(url, str(ws), job_id))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--store", default="sqlite", help="sqlite, pg, or a URL")
    ap.add_argument("--smoke", action="store_true", help="two tries of each: proves the script runs")
    args = ap.parse_args()
    tries = 2 if args.smoke else args.tries
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "benchcontain.py").write_text(AGENTS)
        pid_dir = ws / "pids"
        pid_dir.mkdir()
        env = dict(os.environ)
        env.setdefault("SWARMKIT_HEARTBEAT", "0.2")
        env.setdefault("SWARMKIT_LEASE", "2")
        env.setdefault("SWARMKIT_INTERRUPT_GRACE", "0.5")
        env.setdefault("SWARMKIT_TERM_GRACE", "0.5")
        env.setdefault("SWARMKIT_POLL", "0.1")
        env["BENCH_PIDS_DIR"] = str(pid_dir)
        env["PYTHONPATH"] = os.pathsep.join([str(ws), *filter(None, [env.get("PYTHONPATH")])])
        kind_of_store = args.store if "://" not in args.store else "url"
        with store_url(kind_of_store if kind_of_store in ("sqlite", "pg") else "sqlite", str(ws)) as url:
            url = args.store if "://" in args.store else url
            header(
                f"containment on {url.split('://')[0]}: heartbeat {env['SWARMKIT_HEARTBEAT']} s, lease {env['SWARMKIT_LEASE']} s, "
                f"graces {env['SWARMKIT_INTERRUPT_GRACE']} + {env['SWARMKIT_TERM_GRACE']} s, {tries} tries each"
            )
            print("from the cancel to the last process gone:")
            for kind in KINDS:
                print(line(kind, one_cancel(url, ws, kind, env, tries)), flush=True)
            print("from the host frozen (SIGSTOP) to its agent dead:")
            freezes = tries if args.smoke else max(3, tries // 4)  # a worker started, frozen and killed each: two under --smoke too
            print(line("command agent of a frozen worker", one_freeze(url, ws, env, freezes, float(env["SWARMKIT_LEASE"]))), flush=True)


if __name__ == "__main__":
    main()
