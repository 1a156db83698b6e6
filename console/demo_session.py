"""`swarmkit-console demo`: a store of its own, a real worker, demo flows, and runs in every state within a minute.

The console process submits the runs and starts two children: a worker
(`swarmkit worker`) that hosts them, and a director that asks for three stops
(one lands at a boundary inside a command agent's tool loop) the way an operator would (through `runtime.control.stop`, as "demo"). The
store is the only channel between them. Quitting the console stops both.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from swarmkit.runtime import control
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.queries import get_job

DEMO_FLOWS = Path(__file__).with_name("demo")

# (flow file, inputs); submitted in this order, the last ones wait in the
# queue until the worker has a free slot.
PLAN: list[tuple[str, dict[str, str]]] = [
    ("research_crawl.toml", {"topic": "agent run control"}),
    ("train_eval.toml", {"model": "small"}),
    ("index_docs.toml", {}),
    ("release.toml", {"version": "1.4.0"}),
    ("nightly_report.toml", {"region": "eu"}),
    ("nightly_report.toml", {"region": "us"}),
    ("flaky_check.toml", {}),
    ("triage_tickets.toml", {}),
]
CONCURRENCY = 6


@dataclass
class Submitted:
    store_url: str
    ids: dict[str, list[str]]  # flow file -> run ids


async def submit_all(store_url: str, folder: Path) -> Submitted:
    store = await Store.open(store_url, folder)
    ids: dict[str, list[str]] = {}
    try:
        for name, inputs in PLAN:
            job = await control.submit(store, load_flow(DEMO_FLOWS / name), inputs, actor="demo")
            ids.setdefault(name, []).append(job.id)
    finally:
        await store.close()
    return Submitted(store_url, ids)


class DemoSession:
    def __init__(self, folder: str | os.PathLike | None = None):
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="swarmkit-demo-"))
        else:
            self.folder = Path(folder).resolve()
            self.folder.mkdir(parents=True, exist_ok=True)
        self.store_url = f"sqlite:///{self.folder / '.swarmkit' / 'store.db'}"
        self.worker: subprocess.Popen | None = None
        self.director: subprocess.Popen | None = None

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.folder / log_name, "ab")
        env = dict(os.environ)
        env.pop("SWARMKIT_STORE", None)
        try:
            # Its own session: the terminal's Ctrl-C goes to the console only,
            # and the console decides how its children end.
            return subprocess.Popen(
                [sys.executable, *args], cwd=self.folder, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def start(self) -> Submitted:
        submitted = asyncio.run(submit_all(self.store_url, self.folder))
        self.worker = self._spawn(
            ["-m", "swarmkit.cli", "worker", "--store", self.store_url, "--concurrency", str(CONCURRENCY), str(self.folder)],
            "worker.log",
        )
        stop_early = submitted.ids["index_docs.toml"][0]
        stop_in_flight = submitted.ids["train_eval.toml"][0]
        stop_inside = submitted.ids["triage_tickets.toml"][0]
        self.director = self._spawn(
            [
                "-m", "swarmkit.console.demo_session", "--store", self.store_url, "--stop-early", stop_early, "--stop-in-flight", stop_in_flight,
                "--stop-inside", stop_inside, str(self.folder),
            ],
            "director.log",
        )
        return submitted

    def worker_problem(self) -> str | None:
        if self.worker is not None and self.worker.poll() is not None:
            tail = (self.folder / "worker.log").read_text(errors="replace")[-2000:]
            return f"the demo worker exited with status {self.worker.returncode}:\n{tail}"
        return None

    def stop(self, say=print) -> None:
        """SIGTERM, wait, then the worker's "leave now" second signal, then SIGKILL."""
        if self.director is not None and self.director.poll() is None:
            self.director.terminate()
            _wait(self.director, 3) or self.director.kill()
        proc = self.worker
        if proc is None or proc.poll() is not None:
            return
        say("stopping the demo worker: its runs go back to the queue at their next agent boundary…")
        proc.send_signal(signal.SIGTERM)
        if _wait(proc, 4):
            return
        # Runs still mid-node are left; they become lost after the lease and resume later.
        proc.send_signal(signal.SIGTERM)
        if _wait(proc, 8):
            return
        proc.kill()
        _wait(proc, 5)


def _die_with_parent() -> None:
    """In the child: a console that dies without cleaning up (kill -9, a lost terminal) takes its demo along.

    SIGKILL, because nobody is left to wait for a graceful drain; the agents'
    supervisors see their host go and end them, and the runs show lost, resumable.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the console's own exit path still stops it


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


# --- the director: a child process that asks for two stops ---------------------


async def _wait_for_node(store: Store, run_id: str, node: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        async with store.read() as conn:
            job = await conn.run_sync(get_job, run_id)
        if job is None or job.status not in ("queued", "running"):
            return False
        if job.status == "running" and job.current_node == node:
            return True
        await asyncio.sleep(0.3)
    return False


async def direct(store_url: str, folder: str, stop_early: str, stop_in_flight: str, stop_inside: str | None = None) -> None:
    store = await Store.open(store_url, folder)
    deadline = time.monotonic() + 120
    try:
        # index-docs: stopped during its first short node, so it parks within seconds.
        if await _wait_for_node(store, stop_early, "split", deadline):
            await asyncio.sleep(1.0)
            print((await control.stop(store, stop_early, actor="demo")).message, flush=True)
        # train-eval: stopped a few seconds into its minute-long `train`, so it shows "stopping".
        if await _wait_for_node(store, stop_in_flight, "train", deadline):
            await asyncio.sleep(3.0)
            print((await control.stop(store, stop_in_flight, actor="demo")).message, flush=True)
        # triage-tickets: stopped a few tickets into its long `triage`, which parks at its own boundary.
        if stop_inside and await _wait_for_node(store, stop_inside, "triage", deadline):
            await asyncio.sleep(4.0)
            print((await control.stop(store, stop_inside, actor="demo")).message, flush=True)
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m swarmkit.console.demo_session", description="the demo's director")
    p.add_argument("workspace")
    p.add_argument("--store", required=True)
    p.add_argument("--stop-early", required=True)
    p.add_argument("--stop-in-flight", required=True)
    p.add_argument("--stop-inside")
    args = p.parse_args(argv)
    asyncio.run(direct(args.store, args.workspace, args.stop_early, args.stop_in_flight, args.stop_inside))
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
