"""Stall thresholds (per flow, and per host through SWARMKIT_STALL_AFTER) and stops shown
"stop overdue": the same shown status in `status`, in SQL (the console's filter and counts) and
in the console's poller. Real stores, real `swarmkit` processes."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from swarmkit.console.poller import Poller
from swarmkit.console.store_link import StoreLink
from swarmkit.runtime.control import OVERDUE_FACTOR, OVERDUE_FLOOR_S
from swarmkit.runtime.run_columns import usual as median_of
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.queries import list_jobs, node_durations, shown_running_counts
from swarmkit.store.records import STALL_AFTER

from .conftest import Cli, hold, release, wait_for, write_flow
from .helpers import job


def shown(cli: Cli, ref: str) -> str:
    res = cli.call("status", ref, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["display_status"]


def sql_side(cli: Cli, text: str) -> tuple[dict[str, int], set[str]]:
    """The console's side: the shown counts of running rows and a filter by shown status, in SQL."""

    async def go():
        store = await Store.open(cli.store_url, cli.workspace)
        try:
            now = store_now()
            counts = await store.run_read(lambda c: shown_running_counts(c, now - STALL_AFTER))
            rows = await store.run_read(lambda c: list_jobs(c, text_filter=text, stall_cutoff=now - STALL_AFTER))
            return counts, {r.id for r in rows}
        finally:
            await store.close()

    return asyncio.run(go())


def poller_counts(cli: Cli) -> dict[str, int]:
    async def go():
        link = StoreLink(cli.store_url, cli.workspace)
        try:
            return (await Poller(link, clock=store_now, lease_s=60).poll()).counts
        finally:
            await link.close()

    return asyncio.run(go())


def test_the_stall_threshold_comes_from_the_flow_or_the_hosts_environment(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    quiet = f'command = "echo started; {hold(gates, "go")}"'
    by_flow = write_flow(tmp_path, "by-flow", f'name = "by-flow"\nstall_after = "1s"\n[[agents]]\nname = "quiet"\n{quiet}\n')
    plain = write_flow(tmp_path, "plain", f'name = "plain"\n[[agents]]\nname = "quiet"\n{quiet}\n')
    procs = [cli.start("run", str(by_flow)), cli.start("run", str(plain), env={"SWARMKIT_STALL_AFTER": "1"}), cli.start("run", str(plain))]
    try:
        a, b, c = (p.stdout.readline().split()[0] for p in procs)
        wait_for(lambda: shown(cli, a) == "stalled" and shown(cli, b) == "stalled", timeout=20, what="two runs to show stalled")
        assert shown(cli, c) == "running", "the default threshold (120 s) is not past"
        counts, matched = sql_side(cli, "stalled")
        assert counts == {"stalled": 2} and {job(cli.store_url, cli.workspace, r).id for r in (a, b)} == matched
        assert poller_counts(cli) == {"stalled": 2, "running": 1}
        assert "stalled" in cli.call("status").stdout
    finally:
        release(gates, "go")
        for p in procs:
            p.communicate(timeout=30)
    assert {job(cli.store_url, cli.workspace, r).status for r in (a, b, c)} == {"completed"}


def test_a_stop_not_taken_in_a_few_times_its_nodes_usual_time_shows_stop_overdue(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "hist", f'name = "hist"\n[[agents]]\nname = "work"\ncommand = "{hold(gates, "go")}"\n[[agents]]\nname = "after"\ncommand = "true"\n')
    release(gates, "go")
    assert cli.call("run", str(flow)).returncode == 0  # the history: `work` usually takes a moment

    async def usual():
        store = await Store.open(cli.store_url, cli.workspace)
        try:
            return await store.run_read(lambda c: median_of(node_durations(c, "hist", "work")))
        finally:
            await store.close()

    took = asyncio.run(usual())
    assert took > 0  # however long a loaded machine made it: the rule is checked against it below
    expected = max(OVERDUE_FLOOR_S, OVERDUE_FACTOR * took)
    (gates / "go").unlink()
    proc = cli.start("run", str(flow))
    try:
        short = proc.stdout.readline().split()[0]
        wait_for(lambda: (j := job(cli.store_url, cli.workspace, short)) and j.current_node == "work", what="work in flight")
        assert cli.call("stop", short).returncode == 0
        assert shown(cli, short) == "stopping"
        row = job(cli.store_url, cli.workspace, short)
        # A few times the node's usual time, never sooner than the floor (5 s after the request, for a
        # moment's work): the rule, computed from the history's own median, not a wall-clock bound.
        assert (row.stop_overdue_at - row.stop_requested_at).total_seconds() == pytest.approx(expected, abs=0.05)
        wait_for(lambda: shown(cli, short) == "stop overdue", timeout=expected + 30, what="the stop to show overdue")
        assert " stop overdue " in cli.call("status").stdout + " "
        counts, matched = sql_side(cli, "overdue")
        assert counts == {"stop overdue": 1} and matched == {row.id}
        assert poller_counts(cli) == {"stop overdue": 1, "completed": 1}
        res = cli.call("stop", "--now", short)  # what an operator does about it
        assert res.returncode == 0 and "stop --now requested" in res.stdout
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "stopped" and row.current_node == "work"
    release(gates, "go")
    assert cli.call("run", "--resume", short).returncode == 0
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed" and row.stop_overdue_at is None
