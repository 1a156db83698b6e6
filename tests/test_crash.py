"""Crashes: hosts killed with SIGKILL, paused with SIGSTOP, and PostgreSQL connections killed under them.

What an operator must be able to rely on after a host dies: its runs become
`lost` within the lease, resume from their last checkpoint, and lose no
completed node's work; a host that comes back after its runs moved writes
nothing; a dropped connection is ridden out by hosts and readers alike.
The flows and the agents' ledger are the race harness's (tests/stress/flows.py),
and so are the per-run checks (tests/stress/harness.py: RunFacts).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.reliability import (
    LEASE_S,
    console_argv,
    env_for_children,
    group_alive,
    integrity_check,
    pg_backends_of,
    pg_kill_storm,
    pg_terminate_backends_of,
    process_alive,
    scale,
    snapshot,
    sql,
    sqlite_path,
    tcp_ports_of,
    wait_until,
    with_store,
)
from tests.stress.flows import make_flows, read_ledger
from tests.stress.harness import RunFacts

from .conftest import Cli, write_flow
from .helpers import LOST_WITHIN_S, job

# Every test here is about leases and lost hosts: their hosts run with a 2 s lease.
pytestmark = pytest.mark.short_lease

TERMINAL = ("completed", "failed", "faulted", "cancelled")


def submit(cli: Cli, flow: Path, seed: str = "alpha") -> str:
    """Queue a run (through the same control function `swarmkit run --detach` calls)."""
    from swarmkit.runtime import control
    from swarmkit.runtime.flow import load_flow

    async def go(store):
        return (await control.submit(store, load_flow(flow), {"seed": seed}, actor="tester@ci")).id

    return with_store(cli.store_url, cli.workspace, go)


def resume_queued(cli: Cli, run_id: str):
    """`swarmkit resume`'s control function: back to the queue for a worker."""
    from swarmkit.runtime import control

    return with_store(cli.store_url, cli.workspace, lambda store: control.resume(store, run_id, actor="tester@ci"))


def looked_at(cli: Cli, ids: list[str]) -> dict[str, str]:
    """The runs' statuses as any reader sees them: it first marks runs whose host went silent lost."""
    from swarmkit.runtime import control
    from swarmkit.store.queries import get_jobs

    async def go(store):
        await control.mark_lost(store, LEASE_S)
        async with store.read() as conn:
            return {j.id: j.status for j in await conn.run_sync(get_jobs, ids)}

    return with_store(cli.store_url, cli.workspace, go)


def statuses(cli: Cli, ids: list[str]) -> dict[str, str]:
    """The runs' statuses as `swarmkit status --json` shows them (it also marks lost runs, as every reader does)."""
    res = cli.call("status", "--json", "--all", str(cli.workspace))
    assert res.returncode == 0, res.stderr
    return {v["id"]: v["status"] for v in json.loads(res.stdout)["runs"] if v["id"] in ids}


def reference_states(cli: Cli, flows, names=("quick", "shell")) -> dict[str, tuple]:
    """Each flow run once, uninterrupted, in the foreground: the final state every other run must match."""
    out = {}
    for name in names:
        res = cli.call("run", str(flows[name].path), str(cli.workspace), "--input", "seed=alpha")
        assert res.returncode == 0, res.stderr
        row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
        snap = snapshot(cli.store_url, cli.workspace, [row.id])
        out[name] = (snap["checkpoints"][row.id][-1]["state"], row.tokens, row.cost, row.step)
    return out


def facts_for(cli: Cli, flows, ledger: Path, ids_flows: dict[str, str]) -> dict[str, RunFacts]:
    snap = snapshot(cli.store_url, cli.workspace, list(ids_flows))
    execs = read_ledger(ledger)
    out = {}
    for rid, fname in ids_flows.items():
        f = RunFacts(rid, snap["jobs"][rid], flows[fname], snap["events"].get(rid, []), snap["checkpoints"].get(rid, []), snap["workspaces"].get(rid, []), execs.get(rid, []))
        errs = f.attribute()
        assert not errs, (rid[:8], errs)
        out[rid] = f
    return out


def check_integrity(cli: Cli) -> None:
    db = sqlite_path(cli.store_url)
    if db is not None:
        assert integrity_check(db) == "ok"


def kill_leftover_agents(ledger: Path, pid: int) -> list[int]:
    """Agent process groups a dead host left behind (killed here, and returned for the test to complain about)."""
    left = []
    for execs in read_ledger(ledger).values():
        for x in execs:
            if x.pid == pid and x.pgid and group_alive(x.pgid):
                left.append(x.pgid)
                try:
                    os.killpg(x.pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    return left


# --- kill -9 ----------------------------------------------------------------------


def store_is_free(cli: Cli, pid: int) -> bool:
    """True when process `pid` holds no write lock or open transaction on the store."""
    db = sqlite_path(cli.store_url)
    if db is not None:
        import sqlite3

        con = sqlite3.connect(str(db), timeout=0.3, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            con.close()
    return not any(state != "idle" for _, state, _ in pg_backends_of(pid))


def pause_outside_a_transaction(cli: Cli, proc: subprocess.Popen, tries: int = 200) -> None:
    """SIGSTOP a host at a moment it holds no lock (the frozen-mid-transaction case has its own test)."""
    for _ in range(tries):
        os.kill(proc.pid, signal.SIGSTOP)
        if store_is_free(cli, proc.pid):
            return
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.03)
    raise AssertionError("could not catch the worker outside a transaction")


def _rows(cli: Cli, ids: list[str]):
    snap = snapshot(cli.store_url, cli.workspace, ids)
    return snap["jobs"]


def test_kill_9_a_worker_at_random_points_loses_no_completed_work(cli: Cli, tmp_path: Path):
    """SIGKILL a worker hosting four runs mid-node or mid-checkpoint (once in CI, 2N-1 times at SWARMKIT_STRESS_SCALE=N); its runs
    become lost within the lease, resume from their checkpoints and end exactly like an uninterrupted run."""
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows, names=("marathon", "shell"))
    rnd = random.Random(11)
    kills = max(1, int(2 * scale()) - 1)
    lost_after: list[float] = []
    resumed_ways = {"run --resume": 0, "resume + worker": 0}
    for round_no in range(kills):
        plan = {submit(cli, flows[name].path): name for name in ("marathon", "shell", "marathon", "shell")}
        ids = list(plan)
        worker = cli.start("worker", "--concurrency", "4", str(cli.workspace))
        try:
            wait_until(lambda: all(j.status == "running" and j.step >= 1 for j in _rows(cli, ids).values()), timeout=30, what="the runs to be hosted")
            # Somewhere in the middle: a shell agent sleeping, the marathons checkpointing node after node.
            # (Not a wait for anything: a random moment to kill at, from the seeded generator.)
            time.sleep(rnd.uniform(0.0, 0.8))
            os.kill(worker.pid, signal.SIGKILL)
            t_kill = time.monotonic()
            worker.wait(timeout=10)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        # What was committed when the host died (nothing of it writes any more).
        before = snapshot(cli.store_url, cli.workspace, ids)
        hosted = [i for i in ids if before["jobs"][i].status == "running"]
        seen_lost: dict[str, float] = {}

        def all_lost() -> bool:
            now = looked_at(cli, ids)
            for i in hosted:
                if now[i] == "lost" and i not in seen_lost:
                    seen_lost[i] = time.monotonic() - t_kill
            return all(now[i] in ("lost",) + TERMINAL for i in hosted)

        wait_until(all_lost, timeout=LEASE_S + 20, interval=0.1, what="the dead worker's runs to be marked lost")
        # Nothing the dead host started works on (B2): its agents' groups are gone by the time its runs are lost.
        stray = kill_leftover_agents(ledger, worker.pid)
        assert not stray, f"the killed worker's agents (process groups {stray}) outlived it"
        shown = statuses(cli, ids)  # and the operator's view agrees
        for i in hosted:
            assert shown[i] == "lost", f"{i[:8]} became {shown[i]}, not lost"
        lost_after.extend(seen_lost.values())
        check_integrity(cli)
        after_kill = snapshot(cli.store_url, cli.workspace, ids)
        # Resume: one in the foreground with `swarmkit run --resume`, the rest queued for a new worker.
        lost = [i for i in ids if after_kill["jobs"][i].status == "lost"]
        for n, i in enumerate(lost):
            if n == 0:
                # A real process: the ledger attributes the agents' executions to their host by its pid and clock.
                res = cli.run("run", "--resume", i[:12], str(cli.workspace))
                assert res.returncode == 0, (res.stdout, res.stderr)
                resumed_ways["run --resume"] += 1
            else:
                res = resume_queued(cli, i)
                assert res.ok and "(was lost)" in res.message, res.message
                resumed_ways["resume + worker"] += 1
        worker2 = cli.start("worker", "--concurrency", "4", str(cli.workspace))
        ended = False
        try:
            wait_until(lambda: all(s in TERMINAL for s in looked_at(cli, ids).values()), timeout=90, interval=0.2, what="every resumed run to end")
            ended = True
        finally:
            worker2.send_signal(signal.SIGTERM)
            out, err = worker2.communicate(timeout=30)
            if not ended:
                print(f"runs: {looked_at(cli, ids)}\nthe second worker said:\n{out[-3000:]}{err[-3000:]}")
        check_integrity(cli)
        final = snapshot(cli.store_url, cli.workspace, ids)
        facts = facts_for(cli, flows, ledger, plan)
        for i in ids:
            row = final["jobs"][i]
            assert row.status == "completed", (i[:8], row.status, row.error)
            # The work committed before the kill is still there, unchanged, under the epoch that did it.
            pre = [(c["step"], c["state"], c["epoch"]) for c in before["checkpoints"][i]]
            post = [(c["step"], c["state"], c["epoch"]) for c in final["checkpoints"][i]]
            assert post[: len(pre)] == pre, f"{i[:8]}: checkpoints before the kill changed"
            cps = final["checkpoints"][i]
            f = facts[i]
            ref_state, ref_tokens, ref_cost, ref_step = refs[plan[i]]
            assert (cps[-1]["state"], row.step) == (ref_state, ref_step), f"{i[:8]}: final state differs from the uninterrupted run"
            # A node the dead host finished but never checkpointed ran again on resume; its first run's
            # usage (5 tokens, $0.125 a call node) may already have been on the row by a heartbeat: both were paid for.
            redone = sum(1 for x in f.execs if x.epoch == 1 and x.t_end is not None and x.step >= before["jobs"][i].step)
            extra = row.tokens - ref_tokens
            assert extra in range(0, 5 * redone + 1, 5), f"{i[:8]}: {row.tokens} tokens, the uninterrupted run {ref_tokens} ({redone} nodes redone)"
            assert row.cost == pytest.approx(ref_cost + extra / 5 * 0.125), f"{i[:8]}: cost {row.cost}, the uninterrupted run {ref_cost}"
            problems = f.check_structure(True) + f.check_executions(Counter()) + f.check_workspaces(cli.workspace / ".swarmkit" / "runs")
            assert not problems, (i[:8], problems)
            # A node checkpointed before the kill never ran again.
            committed = before["jobs"][i].step
            for x in f.execs:
                if x.step < committed:
                    assert x.epoch == 1, f"{i[:8]}: node {x.node}, committed before the kill, ran again in epoch {x.epoch}"
    print(f"\n{kills} kills: lost after {min(lost_after):.2f}-{max(lost_after):.2f}s (lease {LEASE_S}s); resumed {resumed_ways}")
    assert max(lost_after) <= LOST_WITHIN_S, (
        f"runs became lost {max(lost_after):.2f}s after their host died: the lease's deadline is SWARMKIT_LEASE ({LEASE_S:g}s), bounded here at {LOST_WITHIN_S:g}s"
    )


def test_kill_9_a_worker_mid_cancel_ends_the_run_cancelled(cli: Cli, tmp_path: Path):
    """The host dies while it escalates a cancel (its agent shrugs off SIGINT): the run must not sit in
    "cancelling" or come back as resumable: it ends cancelled, audited, its workspace destroyed."""
    flow = write_flow(
        tmp_path, "stubborn",
        'name = "stubborn"\n[[agents]]\nname = "first"\ncommand = "echo done"\n'
        "[[agents]]\nname = \"hang\"\ncommand = \"trap '' INT; read -r a b c d pg rest < /proc/$$/stat; echo $pg > pgid; echo hanging; while true; do sleep 0.1; done\"\n",
    )
    rid = submit(cli, flow)
    worker = cli.start("worker", "--concurrency", "2", str(cli.workspace))
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, rid).current_node == "hang" and job(cli.store_url, cli.workspace, rid).step == 1, timeout=30, what="the stubborn agent")
        ws = cli.workspace / ".swarmkit" / "runs" / rid
        pgid = int(wait_until(lambda: (ws / "pgid").exists() and (ws / "pgid").read_text().strip(), what="its pgid"))
        res = cli.call("cancel", rid[:10], str(cli.workspace), env={"SWARMKIT_ACTOR": "carol@ops"})
        assert res.returncode == 0 and "cancel requested" in res.stdout
        from .helpers import events

        wait_until(lambda: any(e.kind == "runtime" and "SIGINT" in e.text for e in events(cli.store_url, cli.workspace, rid)), timeout=10, what="the host to send SIGINT")
        os.kill(worker.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    try:
        wait_until(lambda: looked_at(cli, [rid])[rid] != "running", timeout=LEASE_S + 10, interval=0.1, what="the run to leave running")
        took = time.monotonic() - t_kill
        row = job(cli.store_url, cli.workspace, rid)
        assert row.status == "cancelled", f"a run whose cancel was requested ended {row.status} when its host died"
        assert took <= LOST_WITHIN_S, f"ended {took:.1f}s after its host died: the lease's deadline is SWARMKIT_LEASE ({LEASE_S:g}s), bounded here at {LOST_WITHIN_S:g}s"
        from .helpers import audit, workspaces

        acts = [(a.action, a.actor) for a in audit(cli.store_url, cli.workspace, rid)]
        assert ("run.cancel_requested", "carol@ops") in acts and ("run.cancelled", "carol@ops") in acts, acts
        wss = workspaces(cli.store_url, cli.workspace, rid)
        assert [w.state for w in wss] == ["destroyed"], wss
        res = cli.call("resume", rid[:10], str(cli.workspace))
        assert res.returncode == 1 and "it is cancelled" in res.stderr
        check_integrity(cli)
        # And no work runs on: the agent that shrugged off SIGINT is gone with its host (B2).
        wait_until(lambda: not group_alive(pgid), timeout=10, what="the stubborn agent to be gone")
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_killed_hosts_agents_do_not_outlive_it(sqlite_url: str, workspace: Path, tmp_path: Path):
    """kill -9 of a host mid-command: its agent's process group must be gone by the time the run is lost
    (else the resumed run's agent and the old one work in the same workspace at once). Processes do
    not depend on the store: SQLite only."""
    cli = Cli(sqlite_url, workspace)
    flow = write_flow(
        tmp_path, "sleeper",
        'name = "sleeper"\n[[agents]]\nname = "nap"\ncommand = "read -r a b c d pg rest < /proc/$$/stat; echo $pg > pgid; sleep 30; echo woke"\n',
    )
    rid = submit(cli, flow)
    worker = cli.start("worker", "--concurrency", "1", str(cli.workspace))
    ws = cli.workspace / ".swarmkit" / "runs" / rid
    pgid = int(wait_until(lambda: (ws / "pgid").exists() and (ws / "pgid").read_text().strip(), timeout=30, what="the agent"))
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    try:
        wait_until(lambda: looked_at(cli, [rid])[rid] == "lost", timeout=LEASE_S + 10, interval=0.1, what="the run to be lost")
        assert not group_alive(pgid), f"the dead host's agent (process group {pgid}) is still running: {group_alive(pgid)}"
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- a host that wakes late ------------------------------------------------------------


def test_a_worker_that_hosts_late_never_hosts_a_run_claimed_since(cli: Cli, tmp_path: Path):
    """A worker claims a run (epoch 1) and is starved before it starts hosting it (found under the
    16-writer contention test: a heartbeat 2 s late). Meanwhile the run is marked lost, resumed and
    claimed by another worker (epoch 2). When the first worker gets to host it, as `Worker._host` does,
    it must host nothing: its epoch is gone. No node may run twice, nothing may fault."""
    from swarmkit.runtime import control
    from swarmkit.runtime.executor import host_claimed
    from swarmkit.runtime.settings import Settings

    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows, names=("shell",))
    rid = submit(cli, flows["shell"].path)

    async def claim(store):
        return await control.claim_queued(store, 1, lease_s=LEASE_S)  # the lease it would fence itself by

    mine = with_store(cli.store_url, cli.workspace, claim)  # this process is "worker A"
    assert [j.id for j in mine] == [rid] and mine[0].epoch == 1
    claimed_epoch = mine[0].epoch
    # A is starved past the lease before it starts hosting: the run reads lost once the lease has passed.
    wait_until(lambda: looked_at(cli, [rid])[rid] == "lost", timeout=LEASE_S + 30, interval=0.1, what="the starved claim's run to read lost")
    assert resume_queued(cli, rid).ok
    worker_b = cli.start("worker", str(cli.workspace))
    try:
        wait_until(lambda: (j := job(cli.store_url, cli.workspace, rid)).status == "running" and j.epoch == 2, timeout=30, what="worker B to claim it")
        settings = Settings.from_env()

        async def late(store):
            return await host_claimed(store, rid, claimed_epoch, settings=settings)

        old = dict(os.environ)
        os.environ.update({k: v for k, v in env_for_children().items() if k.startswith("SWARMKIT_")})
        try:
            outcome = with_store(cli.store_url, cli.workspace, late)
        finally:
            os.environ.clear()
            os.environ.update(old)
        wait_until(lambda: job(cli.store_url, cli.workspace, rid).status in TERMINAL, timeout=60, what="the run to end")
    finally:
        worker_b.send_signal(signal.SIGTERM)
        worker_b.communicate(timeout=30)
    mine_ran = [x for x in read_ledger(ledger).get(rid, []) if x.pid == os.getpid()]
    row = job(cli.store_url, cli.workspace, rid)
    assert not mine_ran, f"the late worker ran {[x.node for x in mine_ran]} beside worker B (it hosted: {outcome})"
    assert outcome == "fenced", outcome
    assert row.status == "completed", (row.status, row.error)
    final = snapshot(cli.store_url, cli.workspace, [rid])
    assert (final["checkpoints"][rid][-1]["state"], row.tokens, row.cost, row.step) == refs["shell"]


# --- SIGSTOP ------------------------------------------------------------------------


def test_a_paused_worker_holding_several_runs_writes_nothing_after_they_moved(cli: Cli, tmp_path: Path):
    """SIGSTOP a worker hosting three runs; they are marked lost and resumed elsewhere (one in the
    foreground, two by a second worker) and complete; then SIGCONT: the old worker writes nothing,
    starts no agent, and the store is byte-for-byte what the new hosts left."""
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows, names=("shell",))
    plan = {submit(cli, flows["shell"].path): "shell" for _ in range(3)}
    ids = list(plan)
    old = cli.start("worker", "--concurrency", "3", str(cli.workspace))
    fg = None
    try:
        wait_until(lambda: all(job(cli.store_url, cli.workspace, i).status == "running" and job(cli.store_url, cli.workspace, i).step >= 1 for i in ids), timeout=30, what="three runs past their first agent")
        pause_outside_a_transaction(cli, old)
        wait_until(lambda: all(s == "lost" for s in looked_at(cli, ids).values()), timeout=LEASE_S + 10, interval=0.1, what="the paused worker's runs to be lost")
        fg = cli.start("run", "--resume", ids[0], str(cli.workspace))
        assert cli.call("resume", ids[1], str(cli.workspace)).returncode == 0
        assert resume_queued(cli, ids[2]).ok
        new = cli.start("worker", "--concurrency", "3", str(cli.workspace))
        try:
            wait_until(lambda: all(s == "completed" for s in looked_at(cli, ids).values()), timeout=60, interval=0.2, what="the runs to complete elsewhere")
        finally:
            new.send_signal(signal.SIGTERM)
            new.communicate(timeout=30)
        fg.communicate(timeout=30)
        assert fg.returncode == 0
        moved = snapshot(cli.store_url, cli.workspace, ids)
        os.kill(old.pid, signal.SIGCONT)
        t_cont = time.time()
        # Long enough for its heartbeats, its agents' ends and its checkpoints to try to land. Not a
        # wait for a condition: what is tested is that nothing of the old worker lands in this window.
        time.sleep(max(3.0, 10 * float(os.environ.get("SWARMKIT_HEARTBEAT", "0.2"))))
        assert old.poll() is None, "the old worker died instead of fencing its runs"
    finally:
        if old.poll() is None:
            os.kill(old.pid, signal.SIGCONT)
            old.send_signal(signal.SIGTERM)
        out, errs = old.communicate(timeout=30)
        if fg is not None and fg.poll() is None:
            fg.kill()
    after = snapshot(cli.store_url, cli.workspace, ids)
    for i in ids:
        assert after["jobs"][i] == moved["jobs"][i], f"{i[:8]}: the row changed after the old worker came back"
        for table in ("events", "checkpoints", "audit", "workspaces"):
            assert after[table].get(i) == moved[table].get(i), f"{i[:8]}: {table} changed after the old worker came back"
        cps = after["checkpoints"][i]
        assert (cps[-1]["state"], after["jobs"][i].tokens, after["jobs"][i].cost, after["jobs"][i].step) == refs["shell"]
    # It started no agent once it was continued.
    late = [x for execs in read_ledger(ledger).values() for x in execs if x.pid == old.pid and x.t_start > t_cont]
    assert not late, f"the old worker started agents after it came back: {[(x.run[:8], x.node) for x in late]}"
    assert "Traceback" not in errs, errs[-3000:]
    facts = facts_for(cli, flows, ledger, plan)
    for i, f in facts.items():
        problems = f.check_structure(True)
        assert not problems, (i[:8], problems)
    check_integrity(cli)


# --- PostgreSQL connections killed -------------------------------------------------------


# What only PostgreSQL's connections show: these tests are made for PostgreSQL alone, so no SQLite
# variant is collected only to skip (a skip is no test, under CI least of all).
PG_ONLY = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)


def _pg_only(store_url: str) -> None:
    assert store_url.startswith("postgres"), "a PG_ONLY test"


def _kill_loop(pid: int, seconds: float, every: float, only_active: bool = False) -> int:
    killed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and process_alive(pid):
        killed += pg_terminate_backends_of(pid, only_active=only_active)
        time.sleep(every)
    return killed


@PG_ONLY
def test_a_worker_rides_out_its_postgresql_connections_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """pg_terminate_backend on every connection of a worker, again and again, while it hosts runs
    (as a failover or a DBA would): the runs complete, every node ran once with all its lines, nothing
    is lost and nothing is written twice."""
    _pg_only(store_url)
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows, names=("marathon", "shell"))
    plan = {submit(cli, flows[name].path): name for name in ("marathon", "shell", "marathon", "shell")}
    ids = list(plan)
    worker = cli.start("worker", "--concurrency", "4", str(cli.workspace))
    try:
        wait_until(lambda: pg_backends_of(worker.pid), timeout=30, what="the worker's connections")
        wait_until(lambda: any(j.status == "running" for j in _rows(cli, ids).values()), timeout=30, what="a run to start")
        # Now and then (every 0.3 s): whatever statement is running, else every connection it holds.
        storm = pg_kill_storm(worker.pid, seconds=8 * scale(), every=0.3, only_active=False, idle_every=0.3)
        killed = storm["active"] + storm["any"]
        assert killed > 0, storm
        wait_until(lambda: all(s in TERMINAL + ("lost",) for s in looked_at(cli, ids).values()), timeout=90, interval=0.25, what="the runs to end")
        assert worker.poll() is None, "the worker died"
    finally:
        worker.send_signal(signal.SIGTERM)
        out, errs = worker.communicate(timeout=30)
    final = snapshot(cli.store_url, cli.workspace, ids)
    bad = {i[:8]: (final["jobs"][i].status, final["jobs"][i].error) for i in ids if final["jobs"][i].status != "completed"}
    assert not bad, f"killed connections ({killed}) ended runs other than completed: {bad}\n{errs[-3000:]}"
    facts = facts_for(cli, flows, ledger, plan)
    for i in ids:
        row = final["jobs"][i]
        assert (final["checkpoints"][i][-1]["state"], row.tokens, row.cost, row.step) == refs[plan[i]]
        problems = facts[i].check_structure(True) + facts[i].check_executions(__import__("collections").Counter())
        assert not problems, (i[:8], problems)
    assert "Traceback" not in errs, errs[-3000:]
    print(f"\nkilled {killed} connections under the worker ({storm['active']} mid-statement); {len(ids)} runs completed intact")


@PG_ONLY
def test_a_store_outage_leaves_runs_resumable_never_faulted(store_url: str, cli: Cli, tmp_path: Path):
    """PostgreSQL unreachable for the worker for a few seconds (every statement it starts is killed, as in a
    failover): its runs may carry on or be marked lost, but none may end faulted (terminal, not
    resumable) for an outage that passed. Lost ones resume and end exactly like an uninterrupted run."""
    _pg_only(store_url)
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows, names=("marathon", "shell"))
    plan = {submit(cli, flows[name].path): name for name in ("marathon", "shell", "marathon", "shell")}
    ids = list(plan)
    worker = cli.start("worker", "--concurrency", "4", str(cli.workspace))
    try:
        wait_until(lambda: all(j.status == "running" and j.step >= 1 for j in _rows(cli, ids).values()), timeout=30, what="the runs to be hosted")
        storm = pg_kill_storm(worker.pid, seconds=LEASE_S + 1.5, every=0.005, only_active=False, idle_every=0.005)
        assert storm["any"] > 0, storm
        wait_until(lambda: all(s in TERMINAL + ("lost",) for s in looked_at(cli, ids).values()), timeout=90, interval=0.25, what="the runs to end or be lost")
    finally:
        worker.send_signal(signal.SIGTERM)
        out, errs = worker.communicate(timeout=30)
    after = _rows(cli, ids)
    bad = {i[:8]: (j.status, (j.error or "")[:200]) for i, j in after.items() if j.status not in ("completed", "lost")}
    assert not bad, f"a {LEASE_S + 1.5:.1f}s outage ended runs for good: {bad}"
    for i, j in after.items():
        if j.status == "lost":
            assert resume_queued(cli, i).ok
    w2 = cli.start("worker", "--concurrency", "4", str(cli.workspace))
    try:
        wait_until(lambda: all(s in TERMINAL for s in looked_at(cli, ids).values()), timeout=90, interval=0.25, what="the resumed runs to end")
    finally:
        w2.send_signal(signal.SIGTERM)
        w2.communicate(timeout=30)
    final = snapshot(cli.store_url, cli.workspace, ids)
    execs = read_ledger(ledger)
    for i in ids:
        row = final["jobs"][i]
        assert row.status == "completed", (i[:8], row.status, row.error)
        ref_state, ref_tokens, ref_cost, ref_step = refs[plan[i]]
        assert (final["checkpoints"][i][-1]["state"], row.step) == (ref_state, ref_step), f"{i[:8]}: final state differs from the uninterrupted run"
        # As after a kill (above): a node that finished during the outage but was never checkpointed ran again
        # on resume, and its first run's usage (5 tokens, $0.125 a call node) may already have reached the row
        # by a heartbeat: both were paid for. Nothing else may differ.
        finished = Counter(x.step for x in execs.get(i, []) if x.t_end is not None)
        redone = sum(n - 1 for n in finished.values() if n > 1)
        extra = row.tokens - ref_tokens
        assert extra in range(0, 5 * redone + 1, 5), f"{i[:8]}: {row.tokens} tokens, the uninterrupted run {ref_tokens} ({redone} nodes redone)"
        assert row.cost == pytest.approx(ref_cost + extra / 5 * 0.125), f"{i[:8]}: cost {row.cost}, the uninterrupted run {ref_cost}"


@PG_ONLY
def test_logs_follow_rides_out_its_postgresql_connection_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """`swarmkit logs -f` (a long-running reader) has its connection killed again and again, mid-query,
    while it catches up on a long trail and follows the rest: it carries on, prints every line exactly
    once, and ends when the run ends."""
    _pg_only(store_url)
    flow = write_flow(
        tmp_path, "talk",
        'name = "talk"\n[[agents]]\nname = "say"\n'
        'command = "i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done; while [ $i -lt 20040 ]; do echo line $i; i=$((i+1)); sleep 0.1; done"\n',
    )
    short = submit(cli, flow)[:8]
    # Hosts it (a foreground run would echo 20000 lines into a pipe). Its output goes to a file:
    # nobody reads it while the lines are written (once, in a full run, no 20000 lines came in 180 s).
    worker_log = tmp_path / "worker.log"
    run = cli.start("worker", str(cli.workspace), log=worker_log)
    follow = None
    try:
        # Inside the try: a wait that times out must not leave the worker running (it did once, for 45 minutes).
        try:
            wait_until(lambda: sql(cli.store_url, cli.workspace, "SELECT count(*) FROM events WHERE kind = 'log'")[0][0] >= 20000, timeout=180, what="the first 20000 lines")
        except AssertionError as exc:
            said = sql(cli.store_url, cli.workspace, "SELECT status, host, count(*) FROM jobs GROUP BY status, host")
            raise AssertionError(f"{exc}; runs {said}; the worker said:\n{worker_log.read_text(errors='replace')[-3000:]}") from None
        follow = cli.start("logs", short, str(cli.workspace), "-f")
        # From its first connection on: its catch-up reads (2000 events each) are cut mid-query.
        wait_until(lambda: tcp_ports_of(follow.pid) or follow.poll() is not None, timeout=30, interval=0.002, what="the follower's connection")
        storm = pg_kill_storm(follow.pid, seconds=5 * scale(), every=0.002, idle_every=0.3)
        out, errs = follow.communicate(timeout=120)
    finally:
        if follow is not None and follow.poll() is None:
            follow.kill()
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=60)
    assert storm["active"] + storm["any"] > 0, storm
    assert follow.returncode == 0, f"logs -f died when its connection was killed ({storm}):\n{errs[-2000:]}"
    lines = [l.split("| ", 1)[1] for l in out.splitlines() if "say | " in l]
    assert lines == [f"line {i}" for i in range(20040)], f"lines lost or doubled: {len(lines)} lines"
    assert out.rstrip().endswith(f"-- {short} is completed --")


@PG_ONLY
def test_the_console_rides_out_its_postgresql_connection_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """The interactive console on a real pty, its connection killed again and again: it stays up,
    connects again, keeps polling, and quits cleanly on `q`."""
    _pg_only(store_url)
    import fcntl
    import select
    import struct
    import termios

    from tests.reliability import run_on_pty  # noqa: F401  (the pty plumbing lives there)

    cli.call("run", str(write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "a"\ncommand = "echo hi"\n')), str(cli.workspace), check=True)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    env = env_for_children({"TERM": "xterm-256color"})
    proc = subprocess.Popen(console_argv(cli.store_url, str(cli.workspace)), cwd=cli.workspace, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:
                    return

    try:
        deadline = time.monotonic() + 30
        while not pg_backends_of(proc.pid):
            assert proc.poll() is None, bytes(seen[-2000:])
            assert time.monotonic() < deadline, "the console never connected"
            pump(0.2)
        killed = 0
        for _ in range(int(12 * scale())):
            # Cut its statements mid-flight for a moment, then every connection it holds.
            storm = pg_kill_storm(proc.pid, seconds=0.3, every=0.002, idle_every=0.3)
            killed += storm["active"] + storm["any"] + pg_terminate_backends_of(proc.pid)
            pump(0.3)
            assert proc.poll() is None, f"the console died after its connection was killed: {bytes(seen[-2000:])!r}"
        assert killed > 0
        # It connects again by itself and carries on polling.
        deadline = time.monotonic() + 20
        while not pg_backends_of(proc.pid):
            assert time.monotonic() < deadline, "the console never connected again"
            pump(0.2)
        os.write(master, b"q")
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            pump(0.2)
        assert proc.returncode == 0, f"the console did not quit cleanly on q (exit {proc.returncode})"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    assert b"Traceback" not in bytes(seen)


# A host frozen *inside* a write transaction.

FROZEN = """
import asyncio, os, signal, sys
from sqlalchemy import text
from swarmkit.store import Store

async def go():
    store = await Store.open(sys.argv[1], sys.argv[2])
    async with store.write() as conn:
        # What a host's heartbeat does, frozen half-way: the row is locked, nothing is committed.
        await conn.execute(text("UPDATE jobs SET heartbeat_at = heartbeat_at WHERE id = :i"), {"i": sys.argv[3]})
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
asyncio.run(go())
"""


def _freeze_a_writer(cli: Cli, tmp_path: Path) -> tuple[str, subprocess.Popen]:
    """A run whose host died, and a process frozen holding that run's row inside a write transaction."""
    flow = write_flow(tmp_path, "slow", 'name = "slow"\n[[agents]]\nname = "a"\ncommand = "sleep 60"\n')
    rid = submit(cli, flow)
    worker = cli.start("worker", str(cli.workspace))
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, rid).status == "running", timeout=30, what="the run to start")
    finally:
        os.kill(worker.pid, signal.SIGKILL)  # its host is gone; a frozen process now holds the row
        worker.wait()
    frozen = subprocess.Popen([sys.executable, "-c", FROZEN, cli.store_url, str(cli.workspace), rid], cwd=cli.workspace, env=env_for_children(), stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert frozen.stdout.readline().strip() == "locked"
    return rid, frozen


def _shown(cli: Cli, rid: str, timeout: float) -> str:
    try:
        r = cli.run("status", rid, "--json", str(cli.workspace), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"`swarmkit status RUN` hung for more than {timeout:.0f}s behind the frozen transaction") from None
    assert r.returncode == 0, r.stderr[-500:]
    return json.loads(r.stdout)["status"]


@PG_ONLY
def test_a_host_frozen_inside_a_write_transaction_does_not_freeze_the_store(store_url: str, cli: Cli, tmp_path: Path):
    """A host paused (SIGSTOP, a frozen VM, a debugger) while it holds a write transaction: readers
    carry on, and its run is still marked lost within a bound. PostgreSQL can do this: the server may
    end a session idle in a transaction. (SQLite cannot: see the next test and L1 in BUGS_FOUND.md.)"""
    _pg_only(store_url)
    rid, frozen = _freeze_a_writer(cli, tmp_path)
    try:
        # Looking answers behind the frozen transaction (its host died a moment ago: on a loaded
        # machine the lease may already have passed by the time this first look gets in).
        assert _shown(cli, rid, LEASE_S + 10) in ("running", "lost")
        deadline = time.monotonic() + LEASE_S + 20
        while _shown(cli, rid, LEASE_S + 10) != "lost":
            assert time.monotonic() < deadline, "the run was never marked lost"
            time.sleep(0.5)
    finally:
        os.killpg(frozen.pid, signal.SIGKILL)
        frozen.wait()


def test_sqlite_carries_on_the_moment_a_frozen_writer_dies(sqlite_url: str, workspace: Path, tmp_path: Path):
    """SQLite's write lock is the frozen process's until it runs or dies (L1, a documented limit). While
    it is frozen, looking works (within the lease); the moment it dies, the store is whole and usable,
    and the run whose host died is marked lost at once."""
    cli = Cli(sqlite_url, workspace)
    rid, frozen = _freeze_a_writer(cli, tmp_path)
    try:
        assert _shown(cli, rid, 10) == "running"
    finally:
        # Let the frozen writer's lease lapse while it still holds the lock. Not a wait for a condition:
        # nothing can be seen to change (no one can write "lost" behind the lock); the clock must pass.
        time.sleep(LEASE_S + 0.5)
        os.killpg(frozen.pid, signal.SIGKILL)
        frozen.wait()
    # The lock is gone with its holder: the next look marks the run lost at once. `_shown` still
    # bounds it by 20 s, short of the 30 s busy timeout (store.engine.SQLITE_BUSY_TIMEOUT_S) a reader
    # stuck behind a lock would wait out: an ordering check, not a speed one.
    assert _shown(cli, rid, 20) == "lost"
    check_integrity(cli)
