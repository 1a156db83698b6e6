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
from pathlib import Path

import pytest

from tests.reliability import (
    LEASE_S,
    console_argv,
    env_for_children,
    group_alive,
    integrity_check,
    pg_backends_of,
    pg_terminate_backends_of,
    process_alive,
    scale,
    snapshot,
    sqlite_path,
    wait_until,
)
from tests.stress.flows import make_flows, read_ledger
from tests.stress.harness import RunFacts

from .conftest import Cli, write_flow
from .helpers import job

TERMINAL = ("completed", "failed", "faulted", "cancelled")


def submit(cli: Cli, flow: Path, seed: str = "alpha") -> str:
    return cli.run("run", "--detach", str(flow), str(cli.workspace), "--input", f"seed={seed}", check=True).stdout.strip()


def statuses(cli: Cli, ids: list[str]) -> dict[str, str]:
    """The runs' statuses as `swarmkit status --json` shows them (it also marks lost runs, as every reader does)."""
    res = cli.run("status", "--json", "--all", str(cli.workspace))
    assert res.returncode == 0, res.stderr
    return {v["id"]: v["status"] for v in json.loads(res.stdout) if v["id"] in ids}


def reference_states(cli: Cli, flows, names=("quick", "shell")) -> dict[str, tuple]:
    """Each flow run once, uninterrupted, in the foreground: the final state every other run must match."""
    out = {}
    for name in names:
        res = cli.run("run", str(flows[name].path), str(cli.workspace), "--input", "seed=alpha")
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
    """Agent process groups a dead host left behind (ours to clean up after the test looked at them)."""
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


def test_kill_9_a_worker_at_random_points_loses_no_completed_work(cli: Cli, tmp_path: Path):
    """SIGKILL a worker hosting four runs mid-node or mid-checkpoint, several times; each time its runs
    become lost within the lease, resume from their checkpoints and end exactly like an uninterrupted run."""
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows)
    rnd = random.Random(11)
    kills = max(2, int(3 * scale()))
    lost_after: list[float] = []
    resumed_ways = {"run --resume": 0, "resume + worker": 0}
    for round_no in range(kills):
        plan = {submit(cli, flows[name].path): name for name in ("quick", "shell", "quick", "shell")}
        ids = list(plan)
        worker = cli.start("worker", "--concurrency", "4", str(cli.workspace))
        try:
            wait_until(lambda: set(statuses(cli, ids).values()) <= {"running", "completed"} and "running" in statuses(cli, ids).values(), timeout=30, what="the runs to be hosted")
            # Somewhere in the middle: a shell agent sleeping, the quick runs checkpointing node after node.
            time.sleep(rnd.uniform(0.1, 1.2))
            os.kill(worker.pid, signal.SIGKILL)
            t_kill = time.monotonic()
            worker.wait(timeout=10)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        # What was committed when the host died (nothing of it writes any more).
        before = snapshot(cli.store_url, cli.workspace, ids)
        kill_leftover_agents(ledger, worker.pid)  # another test looks at these; here they would only add noise
        hosted = [i for i in ids if before["jobs"][i].status == "running"]
        seen_lost: dict[str, float] = {}

        def all_lost() -> bool:
            now = statuses(cli, ids)
            for i in hosted:
                if now[i] == "lost" and i not in seen_lost:
                    seen_lost[i] = time.monotonic() - t_kill
            return all(now[i] in ("lost",) + TERMINAL for i in hosted)

        wait_until(all_lost, timeout=LEASE_S + 20, interval=0.1, what="the dead worker's runs to be marked lost")
        for i in hosted:
            now = statuses(cli, [i])[i]
            assert now == "lost", f"{i[:8]} became {now}, not lost"
        lost_after.extend(seen_lost.values())
        check_integrity(cli)
        after_kill = snapshot(cli.store_url, cli.workspace, ids)
        # Resume: half in the foreground with `run --resume`, half queued for a new worker.
        lost = [i for i in ids if after_kill["jobs"][i].status == "lost"]
        for n, i in enumerate(lost):
            if n % 2 == 0:
                res = cli.run("run", "--resume", i[:12], str(cli.workspace))
                assert res.returncode == 0, (res.stdout, res.stderr)
                resumed_ways["run --resume"] += 1
            else:
                res = cli.run("resume", i[:12], str(cli.workspace))
                assert res.returncode == 0 and "(was lost)" in res.stdout, res.stdout
                resumed_ways["resume + worker"] += 1
        worker2 = cli.start("worker", "--concurrency", "4", str(cli.workspace))
        try:
            wait_until(lambda: all(s in TERMINAL for s in statuses(cli, ids).values()), timeout=90, interval=0.2, what="every resumed run to end")
        finally:
            worker2.send_signal(signal.SIGTERM)
            worker2.communicate(timeout=30)
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
            assert (cps[-1]["state"], row.tokens, row.cost, row.step) == refs[plan[i]], f"{i[:8]}: final state differs from the uninterrupted run"
            f = facts[i]
            problems = f.check_structure(True) + f.check_executions(__import__("collections").Counter()) + f.check_workspaces(cli.workspace / ".swarmkit" / "runs")
            assert not problems, (i[:8], problems)
            # A node checkpointed before the kill never ran again.
            committed = before["jobs"][i].step
            for x in f.execs:
                if x.step < committed:
                    assert x.epoch == 1, f"{i[:8]}: node {x.node}, committed before the kill, ran again in epoch {x.epoch}"
    print(f"\n{kills} kills: lost after {min(lost_after):.2f}-{max(lost_after):.2f}s (lease {LEASE_S}s); resumed {resumed_ways}")
    assert max(lost_after) <= LEASE_S + 2.5, f"runs became lost {max(lost_after):.2f}s after their host died (lease {LEASE_S}s)"


def test_kill_9_a_worker_mid_cancel_ends_the_run_cancelled(cli: Cli, tmp_path: Path):
    """The host dies while it escalates a cancel (its agent shrugs off SIGINT): the run must not sit in
    "cancelling" or come back as resumable: it ends cancelled, audited, its workspace destroyed."""
    flow = write_flow(
        tmp_path, "stubborn",
        'name = "stubborn"\n[[agents]]\nname = "first"\ncommand = "echo done"\n'
        "[[agents]]\nname = \"hang\"\ncommand = \"trap '' INT; echo $$ > pgid; echo hanging; while true; do sleep 0.1; done\"\n",
    )
    rid = cli.run("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()
    worker = cli.start("worker", "--concurrency", "2", str(cli.workspace))
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, rid).current_node == "hang" and job(cli.store_url, cli.workspace, rid).step == 1, timeout=30, what="the stubborn agent")
        ws = cli.workspace / ".swarmkit" / "runs" / rid
        pgid = int(wait_until(lambda: (ws / "pgid").exists() and (ws / "pgid").read_text().strip(), what="its pgid"))
        res = cli.run("cancel", rid[:10], str(cli.workspace), env={"SWARMKIT_ACTOR": "carol@ops"})
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
        wait_until(lambda: statuses(cli, [rid])[rid] != "running", timeout=LEASE_S + 10, interval=0.1, what="the run to leave running")
        took = time.monotonic() - t_kill
        row = job(cli.store_url, cli.workspace, rid)
        assert row.status == "cancelled", f"a run whose cancel was requested ended {row.status} when its host died"
        assert took <= LEASE_S + 2.5
        from .helpers import audit, workspaces

        acts = [(a.action, a.actor) for a in audit(cli.store_url, cli.workspace, rid)]
        assert ("run.cancel_requested", "carol@ops") in acts and ("run.cancelled", "carol@ops") in acts, acts
        wss = workspaces(cli.store_url, cli.workspace, rid)
        assert [w.state for w in wss] == ["destroyed"], wss
        res = cli.run("resume", rid[:10], str(cli.workspace))
        assert res.returncode == 1 and "it is cancelled" in res.stdout
        check_integrity(cli)
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.xfail(strict=True, reason="BUG B2: a killed host's agent processes outlive it and run beside the resumed run (tests/BUGS_FOUND.md)")
def test_a_killed_hosts_agents_do_not_outlive_it(cli: Cli, tmp_path: Path):
    """kill -9 of a host mid-command: its agent's process group must be gone by the time the run is lost
    (else the resumed run's agent and the old one work in the same workspace at once)."""
    flow = write_flow(
        tmp_path, "sleeper",
        'name = "sleeper"\n[[agents]]\nname = "nap"\ncommand = "echo $$ > pgid; sleep 30; echo woke"\n',
    )
    rid = cli.run("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()
    worker = cli.start("worker", "--concurrency", "1", str(cli.workspace))
    ws = cli.workspace / ".swarmkit" / "runs" / rid
    pgid = int(wait_until(lambda: (ws / "pgid").exists() and (ws / "pgid").read_text().strip(), timeout=30, what="the agent"))
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    try:
        wait_until(lambda: statuses(cli, [rid])[rid] == "lost", timeout=LEASE_S + 10, interval=0.1, what="the run to be lost")
        assert not group_alive(pgid), f"the dead host's agent (process group {pgid}) is still running: {group_alive(pgid)}"
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


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
        os.kill(old.pid, signal.SIGSTOP)
        t_stop = time.time()
        wait_until(lambda: all(s == "lost" for s in statuses(cli, ids).values()), timeout=LEASE_S + 10, interval=0.1, what="the paused worker's runs to be lost")
        fg = cli.start("run", "--resume", ids[0], str(cli.workspace))
        for i in ids[1:]:
            assert cli.run("resume", i, str(cli.workspace)).returncode == 0
        new = cli.start("worker", "--concurrency", "3", str(cli.workspace))
        try:
            wait_until(lambda: all(s == "completed" for s in statuses(cli, ids).values()), timeout=60, interval=0.2, what="the runs to complete elsewhere")
        finally:
            new.send_signal(signal.SIGTERM)
            new.communicate(timeout=30)
        fg.communicate(timeout=30)
        assert fg.returncode == 0
        moved = snapshot(cli.store_url, cli.workspace, ids)
        os.kill(old.pid, signal.SIGCONT)
        t_cont = time.time()
        # Long enough for its heartbeats, its agents' ends and its checkpoints to try to land.
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


def _pg_only(store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("PostgreSQL connections only")


def _kill_loop(pid: int, seconds: float, every: float, only_active: bool = False) -> int:
    killed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and process_alive(pid):
        killed += pg_terminate_backends_of(pid, only_active=only_active)
        time.sleep(every)
    return killed


def test_a_worker_rides_out_its_postgresql_connections_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """pg_terminate_backend on every connection of a worker, again and again, while it hosts runs
    (as a failover or a DBA would): the runs complete, every node ran once with all its lines, nothing
    is lost and nothing is written twice."""
    _pg_only(store_url)
    ledger = tmp_path / "ledger"
    flows = make_flows(tmp_path / "flows", ledger)
    refs = reference_states(cli, flows)
    plan = {submit(cli, flows[name].path): name for name in ("quick", "shell", "quick", "shell")}
    ids = list(plan)
    worker = cli.start("worker", "--concurrency", "4", str(cli.workspace))
    try:
        wait_until(lambda: pg_backends_of(worker.pid), timeout=30, what="the worker's connections")
        wait_until(lambda: any(s == "running" for s in statuses(cli, ids).values()), timeout=30, what="a run to start")
        killed = _kill_loop(worker.pid, seconds=6 * scale(), every=0.25)
        assert killed > 0
        wait_until(lambda: all(s in TERMINAL + ("lost",) for s in statuses(cli, ids).values()), timeout=90, interval=0.25, what="the runs to end")
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
    print(f"\nkilled {killed} connections under the worker; {len(ids)} runs completed intact")


def test_logs_follow_rides_out_its_postgresql_connection_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """`swarmkit logs -f` (a long-running reader) has its connection killed again and again while the
    run talks: it carries on, prints every line exactly once, and ends when the run ends."""
    _pg_only(store_url)
    flow = write_flow(tmp_path, "talk", 'name = "talk"\n[[agents]]\nname = "say"\ncommand = "i=0; while [ $i -lt 60 ]; do echo line $i; i=$((i+1)); sleep 0.1; done"\n')
    run = cli.start("run", str(flow), str(cli.workspace))
    short = run.stdout.readline().split()[0]
    follow = cli.start("logs", short, "-f", str(cli.workspace))
    try:
        wait_until(lambda: pg_backends_of(follow.pid) or follow.poll() is not None, timeout=30, what="the follower's connection")
        killed = _kill_loop(follow.pid, seconds=5, every=0.3)
        out, errs = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
        run.communicate(timeout=60)
    assert killed > 0
    assert follow.returncode == 0, f"logs -f died when its connection was killed ({killed} times):\n{errs[-2000:]}"
    lines = [l.split("| ", 1)[1] for l in out.splitlines() if "say | " in l]
    assert lines == [f"line {i}" for i in range(60)], f"lines lost or doubled: {len(lines)} lines"
    assert out.rstrip().endswith(f"-- {short} is completed --")


def test_the_console_rides_out_its_postgresql_connection_being_killed(store_url: str, cli: Cli, tmp_path: Path):
    """The interactive console on a real pty, its connection killed again and again: it stays up,
    connects again, keeps polling, and quits cleanly on `q`."""
    _pg_only(store_url)
    from tests.reliability import run_on_pty  # noqa: F401  (the pty plumbing lives there)
    import fcntl
    import select
    import struct
    import termios

    cli.run("run", str(write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "a"\ncommand = "echo hi"\n')), str(cli.workspace), check=True)
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
            killed += pg_terminate_backends_of(proc.pid)
            pump(0.4)
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
