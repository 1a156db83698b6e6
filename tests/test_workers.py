"""Workers and hosts: many runs in one process, racing claims, leases, zombies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import ALSO_PGBOUNCER, Cli, hold, release, wait_for, write_flow
from .helpers import LEASE_S, LOST_WITHIN_S, checkpoints, events, job


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_a_worker_hosting_three_runs_stops_one_and_completes_the_others(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    agents = "".join(f'[[agents]]\nname = "s{i}"\ncommand = "{hold(gates, "go") if i == 1 else "true"}; echo step {i}"\n' for i in range(4))
    flow = write_flow(tmp_path, "steps", 'name = "steps"\n' + agents)
    ids = [cli.call("run", "--detach", str(flow), check=True).stdout.strip() for _ in range(3)]
    worker = cli.start("worker", "--concurrency", "3")
    try:
        wait_for(lambda: all(job(cli.store_url, cli.workspace, i).current_node == "s1" for i in ids), what="all three running s1")
        assert len({job(cli.store_url, cli.workspace, i).pid for i in ids}) == 1, "one process hosts all three"
        res = cli.call("stop", ids[1][:8])
        assert res.returncode == 0 and "stop requested" in res.stdout
        release(gates, "go")
        wait_for(lambda: all(job(cli.store_url, cli.workspace, i).status in ("completed", "stopped") for i in ids), timeout=60, what="the runs to end")
    finally:
        stop_worker(worker)
    statuses = [job(cli.store_url, cli.workspace, i).status for i in ids]
    assert statuses == ["completed", "stopped", "completed"]
    stopped = job(cli.store_url, cli.workspace, ids[1])
    assert stopped.step == 2 and stopped.current_node == "s2"


def test_two_workers_racing_for_queued_runs_host_each_exactly_once(cli: Cli, tmp_path: Path):
    ledger = tmp_path / "ledger"
    flow = write_flow(tmp_path, "once", f'name = "once"\n[[agents]]\nname = "mark"\ncommand = "echo $SWARMKIT_RUN_ID $SWARMKIT_HOST_PID >> {ledger}"\n')
    ids = [cli.call("run", "--detach", str(flow), check=True).stdout.strip() for _ in range(8)]
    workers = [cli.start("worker", "--concurrency", "4") for _ in range(2)]
    try:
        wait_for(lambda: all(job(cli.store_url, cli.workspace, i).status == "completed" for i in ids), timeout=60, what="every run to complete")
    finally:
        for w in workers:
            stop_worker(w)
    lines = ledger.read_text().split()
    ran = lines[0::2]
    for i in ids:
        assert ran.count(i) == 1, f"{i[:8]} ran {ran.count(i)} times"
        row = job(cli.store_url, cli.workspace, i)
        assert row.epoch == 1
        claims = [e for e in events(cli.store_url, cli.workspace, i) if e.kind == "run.claimed"]
        assert len(claims) == 1


@pytest.mark.short_lease
def test_a_zombie_host_writes_nothing_after_its_run_is_resumed_elsewhere(cli: Cli, tmp_path: Path):
    flow = write_flow(
        tmp_path, "zombie",
        'name = "zombie"\n[[agents]]\nname = "slow"\ncommand = "sleep 1.5; echo from $SWARMKIT_HOST_PID"\n[[agents]]\nname = "second"\ncommand = "echo second from $SWARMKIT_HOST_PID"\n',
    )
    zombie = cli.start("run", str(flow))
    short = zombie.stdout.readline().split()[0]
    wait_for(lambda: job(cli.store_url, cli.workspace, short).current_node == "slow", what="the first agent to start")
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        # Past the lease (2 s in tests), another process resumes it: it is marked lost and claimed at epoch 2.
        wait_for(lambda: json.loads(cli.call("status", short, "--json").stdout)["status"] == "lost", timeout=LEASE_S + 30, interval=0.1, what="the frozen host's run to read lost")
        res = cli.call("run", "--resume", short)
        assert res.returncode == 0, res.stderr
        assert "(was lost)" in res.stdout
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    out, errs = zombie.communicate(timeout=30)
    assert zombie.returncode == 1
    assert "hosted elsewhere" in errs
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed" and row.epoch == 2
    texts = [e.text for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "log"]
    assert f"from {zombie.pid}" not in texts, "the zombie's line reached the store"
    assert sum(t.startswith("from ") for t in texts) == 1
    cps = checkpoints(cli.store_url, cli.workspace, row.id)
    assert [c.epoch for c in cps if c.step > 0] == [2, 2]
    # It stays as the live host left it (the zombie has exited: nothing of it can write any more).
    assert job(cli.store_url, cli.workspace, short).status == "completed"


@pytest.mark.short_lease
def test_a_run_whose_host_died_becomes_lost_and_resumes_from_its_checkpoint(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    marks.mkdir()
    # The second agent hangs the first time only, so the resumed run can finish.
    second = f"if [ -e {marks}/second ]; then echo x >> {marks}/second; else echo x >> {marks}/second; sleep 30; fi"
    flow = write_flow(
        tmp_path, "dies",
        f'name = "dies"\n[[agents]]\nname = "first"\ncommand = "echo x >> {marks}/first"\n'
        f'[[agents]]\nname = "second"\ncommand = "{second}"\n[[agents]]\nname = "third"\ncommand = "echo x >> {marks}/third"\n',
    )
    host = cli.start("run", str(flow))
    short = host.stdout.readline().split()[0]
    wait_for(lambda: (marks / "second").exists(), what="the second agent")
    os.kill(host.pid, signal.SIGKILL)
    host.communicate()
    t0 = time.monotonic()
    wait_for(lambda: "lost" in cli.call("status").stdout, timeout=LEASE_S + 30, what="the run to be marked lost")
    took = time.monotonic() - t0
    assert took < LOST_WITHIN_S, f"lost {took:.1f}s after its host died: the lease's deadline is SWARMKIT_LEASE ({LEASE_S:g}s), bounded here at {LOST_WITHIN_S:g}s"
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "lost" and row.step == 1
    res = cli.call("run", "--resume", short)
    assert res.returncode == 0, res.stderr
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed" and row.step == 3 and row.epoch == 2
    assert (marks / "first").read_text() == "x\n", "a completed agent is not run again"
    assert (marks / "second").read_text() == "x\nx\n", "the agent in flight runs again from the checkpoint"
    assert (marks / "third").read_text() == "x\n"


def test_approve_records_the_gate_and_a_worker_finishes_the_run(cli: Cli, tmp_path: Path):
    flow = write_flow(
        tmp_path, "gated",
        'name = "gated"\n[[agents]]\nname = "prepare"\ncommand = "echo ready"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "echo shipped"\n',
    )
    res = cli.call("run", str(flow), check=True)
    short = res.stdout.split()[0]
    assert "waiting for approval at ship" in res.stdout
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "deferred" and row.pending_gate == "ship" and row.step == 1
    res = cli.call("approve", short, env={"SWARMKIT_ACTOR": "carol@desk"})
    assert res.returncode == 0 and "approved 'ship'" in res.stdout
    worker = cli.start("worker")
    try:
        wait_for(lambda: job(cli.store_url, cli.workspace, short).status == "completed", timeout=60, what="the approved run to complete")
    finally:
        stop_worker(worker)
    from .helpers import audit

    acts = [(a.action, a.actor) for a in audit(cli.store_url, cli.workspace, row.id)]
    assert ("gate.approved", "carol@desk") in acts and ("run.resumed", "carol@desk") in acts
    texts = [e.text for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "log"]
    assert texts == ["ready", "shipped"], "the gate runs once, after approval"


@ALSO_PGBOUNCER
def test_logs_follow_until_the_run_ends(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "talk", 'name = "talk"\n[[agents]]\nname = "say"\ncommand = "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"\n')
    run = cli.start("run", str(flow))
    short = run.stdout.readline().split()[0]
    follow = cli.start("logs", short, "-f")
    out, errs = follow.communicate(timeout=60)
    run.communicate(timeout=60)
    assert follow.returncode == 0, errs
    for i in range(1, 6):
        assert f"say | line {i}" in out
    assert out.rstrip().endswith(f"-- {short} is completed --")


def test_a_worker_drains_on_sigterm_parking_its_runs_back_to_the_queue(cli: Cli, tmp_path: Path):
    """A worker's shutdown is not a person's stop: its runs go back to `queued` at their next
    boundary, for any worker. (It used to park them `stopped`, so a rolling restart needed a
    human to resume every run.)"""
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "long", f'name = "long"\n[[agents]]\nname = "a"\ncommand = "{hold(gates, "a")}"\n[[agents]]\nname = "b"\ncommand = "true"\n')
    short = cli.call("run", "--detach", str(flow), check=True).stdout.strip()[:8]
    worker = cli.start("worker")
    wait_for(lambda: job(cli.store_url, cli.workspace, short).current_node == "a", what="the run to start")
    worker.send_signal(signal.SIGTERM)
    heard = worker.stdout.readline()
    while "shutting down" not in heard and heard:
        heard = worker.stdout.readline()
    release(gates, "a")
    out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "queued" and row.stop_requested_at is None and row.step == 1, row
    parked = [e for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "run.parked"]
    assert parked and "worker " in parked[0].text and "before 2/2 b by worker" in parked[0].text
    # Any worker takes it from its checkpoint and completes it.
    again = cli.start("worker")
    try:
        wait_for(lambda: job(cli.store_url, cli.workspace, short).status == "completed", timeout=30, what="another worker to complete the parked run")
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=30)
