"""Issue 31: an idle worker is woken for new runs and stop flags by PostgreSQL's LISTEN/NOTIFY where its
connection allows it, and polls where it does not (PgBouncer in transaction mode, SQLite).

Each path stops a run through it. On the LISTEN path the worker's fallbacks are an hour away (its
look for queued runs, its runs' heartbeats): a claim or a stop that lands at all came by a wakeup.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import Cli, wait_for, write_flow
from .helpers import job

LONG = 'name = "long"\n[[agents]]\nname = "wait"\ncommand = "sleep 600"\n'
# Nothing but a wakeup can bring a claim or a heard stop within the test: the next look for queued
# runs and the next heartbeat are an hour away (a lease of 4 h keeps the margin inside it).
HOUR_AWAY = {"SWARMKIT_POLL": "3600", "SWARMKIT_HEARTBEAT": "3600", "SWARMKIT_LEASE": "14400"}


def _in_node(cli: Cli, run_id: str) -> bool:
    j = job(cli.store_url, cli.workspace, run_id)
    return j is not None and j.status == "running" and j.current_node == "wait"


@pytest.mark.parametrize("store_url", ["postgresql", "pgbouncer"], indirect=True)
def test_a_worker_is_woken_for_new_runs_and_stops_by_listen_or_polls_behind_pgbouncer(cli: Cli, tmp_path: Path):
    listening = "pgbouncer=true" not in cli.store_url
    flow = write_flow(tmp_path, "long", LONG)
    first = cli.call("run", "--detach", str(flow), check=True).stdout.strip()
    log = tmp_path / "worker.log"
    worker = cli.start("worker", "--concurrency", "2", env=HOUR_AWAY if listening else None, log=log)
    try:
        # Claimed by the worker's first look, which it makes as it starts: it is past it now.
        wait_for(lambda: _in_node(cli, first), timeout=60, what="the first run to be claimed and in its node")
        said = log.read_text(errors="replace")
        assert ("woken by the store (LISTEN)" in said) == listening, said
        assert ("polling every" in said) != listening, said
        second = cli.call("run", "--detach", str(flow), check=True).stdout.strip()
        wait_for(lambda: _in_node(cli, second), timeout=60, what="the second run, queued while the worker idled, to be claimed")
        res = cli.call("stop", "--now", first[:8])
        assert res.returncode == 0, res.stderr
        wait_for(lambda: job(cli.store_url, cli.workspace, first).status == "stopped", timeout=60, what="the stop --now to be heard and the run parked stopped")
        res = cli.call("cancel", second[:8])
        assert res.returncode == 0, res.stderr
        wait_for(lambda: job(cli.store_url, cli.workspace, second).status == "cancelled", timeout=60, what="the cancel to be heard and the run ended cancelled")
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a run left in its node holds the drain: a failed test's cleanup only
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate(timeout=30)
    stopped = job(cli.store_url, cli.workspace, first)
    assert stopped.stop_now and stopped.step == 0, stopped
