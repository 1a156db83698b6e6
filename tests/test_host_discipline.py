"""Host discipline: what a host owes its runs when the world around it misbehaves.

A closed stdout, a worker shutting down (once, or twice in a hurry), a second
Ctrl-C, an agent that prints without end, an agent that reports nonsense: none
of these is the run's fault or the store's, and none may end a run in a state
that lies about it. Real stores, real `swarmkit` processes, agents held on gate
files so that no test depends on timing.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.reliability import end_process, has_traceback, kill_group_of, sql, with_store

from .conftest import Cli, child_env, hold, release, wait_for, write_flow
from .helpers import LEASE_S, LOST_WITHIN_S, audit, checkpoints, events, job, workspaces

# Every test here is about leases and lost hosts: their hosts run with a 2 s lease.
pytestmark = pytest.mark.short_lease



# --- helpers -----------------------------------------------------------------


def submit(cli: Cli, flow: Path, inputs: dict[str, str] | None = None) -> str:
    """Queue a run through the control function `swarmkit run --detach` calls (no process start per run)."""
    from swarmkit.runtime import control
    from swarmkit.runtime.flow import load_flow

    async def go(store):
        return (await control.submit(store, load_flow(flow), inputs or {}, actor="tester@ci")).id

    return with_store(cli.store_url, cli.workspace, go)


def mark_lost_now(cli: Cli) -> list[str]:
    """What any looker (status, a worker, the console) does: mark running rows past the lease lost."""
    from swarmkit.runtime import control

    return with_store(cli.store_url, cli.workspace, lambda s: control.mark_lost(s, LEASE_S))


class WorkerProc:
    """A `swarmkit worker` process, its short id, and what it prints (read by threads, so no pipe fills)."""

    def __init__(self, cli: Cli, *args: str, env: dict[str, str] | None = None):
        self.proc = cli.start("worker", *args, env=env)
        self.pid = self.proc.pid
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self._readers:
            t.start()
        try:
            first = wait_for(lambda: self.out[:1] or self.proc.poll() is not None, timeout=30, what="the worker to start")
        except AssertionError:
            self.kill()
            raise
        m = re.match(r"(?:\S+Z )?worker ([0-9a-f]{8}) ", self.out[0] if self.out else "")  # after the line's time
        if not m:
            self.kill()
            raise AssertionError(f"the worker did not start: {first!r}\n{self.text()}")
        self.id = m.group(1)

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def text(self) -> str:
        return "".join(self.out) + "".join(self.err)

    def shutdown(self) -> None:
        """SIGTERM, then wait until the worker says it heard it: after that its drain is in force."""
        seen = len(self.out)
        self.proc.send_signal(signal.SIGTERM)
        wait_for(
            lambda: any(k in line.lower() for line in self.out[seen:] for k in ("shut", "signal again", "stopping its runs")),
            timeout=15, what="the worker to acknowledge SIGTERM",
        )

    def wait_exit(self, timeout: float, what: str) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{what} did not exit within {timeout}s:\n{self.text()[-3000:]}") from None
        for t in self._readers:
            t.join(timeout=5)
        return code

    def kill(self) -> None:
        kill_group_of(self.proc)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def end(self) -> None:
        end_process(self.proc, timeout=15)
        self.kill()


def wait_exit(proc: subprocess.Popen, timeout: float, what: str) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group_of(proc)
        out, errs = proc.communicate(timeout=10)
        raise AssertionError(f"{what} did not exit within {timeout}s:\n{out[-2000:]}\n{errs[-2000:]}") from None


def cleanup(*workers: WorkerProc | None) -> None:
    for w in workers:
        if w is not None:
            w.end()


def processes_of_run(run_id: str) -> list[int]:
    """Live processes whose environment carries SWARMKIT_RUN_ID=run_id (an agent of the run, or anything it started)."""
    needle = f"SWARMKIT_RUN_ID={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if needle in env and stat[stat.rfind(")") + 2 :].split()[0] != "Z":
            found.append(int(entry))
    return found


def vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def gated_flow(folder: Path, name: str, nodes: list[str], marks: Path, gates: Path) -> Path:
    """Each node writes its run id to marks/<node> (so a node run twice shows), then waits for release(gates, node)."""
    marks.mkdir(parents=True, exist_ok=True)
    body = f'name = "{name}"\n'
    for node in nodes:
        body += f'\n[[agents]]\nname = "{node}"\ncommand = "echo $SWARMKIT_RUN_ID >> {marks}/{node}; echo at {node}; {hold(gates, node)}"\n'
    return write_flow(folder, name, body)


def ran(marks: Path, node: str, run_id: str) -> int:
    path = marks / node
    return path.read_text().split().count(run_id) if path.exists() else 0


def row(cli: Cli, ref: str):
    return job(cli.store_url, cli.workspace, ref)


# --- 7. a closed stdout ----------------------------------------------------------


def test_a_closed_stdout_never_changes_the_runs_fate(cli: Cli, tmp_path: Path):
    """`swarmkit run flow.toml | head -1`: the echo of agent lines is best effort.

    Before the fix the echo's print raised BrokenPipeError inside the host, which
    took it for the store going away: "left to its lease: the store is out of
    reach", the process gave up hosting, and the row stayed `running` until it
    showed `lost`, though the store was fine and the run had nothing wrong.
    """
    gates = tmp_path / "gates"
    nodes = ["n0", "n1", "n2", "n3"]
    lines = 5000
    body = 'name = "chatty"\n'
    for i, node in enumerate(nodes):
        wait = f"{hold(gates, 'go')}; " if i == 0 else ""
        body += f'\n[[agents]]\nname = "{node}"\ncommand = "{wait}seq 1 {lines}; echo {node} done >&2"\n'
    flow = write_flow(tmp_path, "chatty", body)
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            cli.argv("run", "--store", cli.store_url, str(flow)), cwd=cli.workspace, env=child_env(),
            stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True,
        )
        try:
            first = proc.stdout.readline()
            assert " running " in first, first + err_path.read_text()
            short = first.split()[0]
            proc.stdout.close()  # head -1 has read its line and gone
            release(gates, "go")
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"swarmkit run with a closed stdout did not end; the run reads {row(cli, short).status}") from None
        finally:
            kill_group_of(proc)
    errs = err_path.read_text()
    r = row(cli, short)
    assert r.status == "completed", (r.status, r.error, errs[-2000:])
    assert proc.returncode == 0, f"a completed run exits 0 even when nobody reads its echo ({proc.returncode}):\n{errs[-2000:]}"
    assert r.step == len(nodes) and r.epoch == 1
    evs = events(cli.store_url, cli.workspace, r.id)
    assert [e.node for e in evs if e.kind == "node.finished"] == nodes, "every node ran, once"
    assert len(checkpoints(cli.store_url, cli.workspace, r.id)) >= len(nodes)
    # The store is the truth: every line is there though nobody read stdout.
    for node in nodes:
        # Its stdout lines, in order (the `done` line is stderr's: a pump of its own, interleaved anywhere).
        logged = [e.text for e in evs if e.kind == "log" and e.node == node]
        out = [t for t in logged if t != f"{node} done"]
        assert out == [str(i) for i in range(1, lines + 1)], f"{node}: {len(out)} stdout lines in the store"
        assert logged.count(f"{node} done") == 1
    blame = ("could not reach the store", "store error", "lost the store", "out of reach", "faulted", "traceback")
    for phrase in blame:
        assert phrase not in errs.lower(), f"stderr says {phrase!r} for a closed stdout:\n{errs[-2000:]}"
    assert not has_traceback(errs), errs[-3000:]


def test_a_stdout_nobody_reads_does_not_hold_the_run_back(cli: Cli, tmp_path: Path):
    """A terminal paused with Ctrl-S (here: a pipe nobody reads) stops taking the echo; the run goes on.

    The run reaches `completed` in the store while its stdout is still unread;
    only then are the lines drained and the process exits. Before the fix the
    echo was a plain print from the host: once the pipe's buffer was full the
    host's event loop blocked in write() with the run `running`, its heartbeat
    silent, on its way to `lost`.
    """
    nodes = ["n0", "n1", "n2"]
    body = 'name = "unread"\n' + "".join(f'\n[[agents]]\nname = "{n}"\ncommand = "seq 1 20000"\n' for n in nodes)
    flow = write_flow(tmp_path, "unread", body)
    proc = cli.start("run", str(flow))
    try:
        first = proc.stdout.readline()
        assert " running " in first, first
        short = first.split()[0]
        # 60,000 lines of echo against a 64 KiB pipe buffer: nobody reads them yet.
        # 60,000 log lines into the store: on PostgreSQL on a loaded machine that took more than
        # 30 s once (CI, 2026-12-02). A host blocked on its stdout never ends the run at all.
        wait_for(lambda: row(cli, short).status != "running", timeout=90, interval=0.2, what="the run to end with its stdout unread")
        r = row(cli, short)
        assert r.status == "completed" and r.step == len(nodes) and r.epoch == 1, (r.status, r.error)
        out, errs = wait_exit(proc, 30, "swarmkit run once its stdout is read")
    finally:
        kill_group_of(proc)
    assert not has_traceback(errs), errs[-3000:]
    logged = sql(cli.store_url, cli.workspace, "SELECT count(*) FROM events WHERE job_id = :j AND kind = 'log'", {"j": r.id})[0][0]
    assert logged == 20000 * len(nodes), "every line is in the store, whatever the echo dropped"


# --- 8. a worker's shutdown parks, it does not stop ---------------------------------


def test_sigterm_to_one_of_two_workers_parks_its_run_and_the_other_completes_it(cli: Cli, tmp_path: Path):
    """SIGTERM to a worker parks its runs back in the queue for any worker; it is not a person's stop.

    Before the fix the worker's drain called `stop` as "worker X shutdown": the
    run ended `stopped` with that as the stop's requester, and it sat there
    until a human resumed it, although nobody had asked for a stop and another
    worker was alive to take it.
    """
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    flow = gated_flow(tmp_path, "park", ["a", "b", "c"], marks, gates)
    blocker_flow = gated_flow(tmp_path, "blocker", ["blocker"], marks, gates)
    release(gates, "b", "c")
    a = b = None
    try:
        # B is busy with another run, so the parked run can be seen waiting in the queue.
        blocker = submit(cli, blocker_flow)
        b = WorkerProc(cli, "--concurrency", "1")
        wait_for(lambda: ran(marks, "blocker", blocker) == 1, what="worker B to take the blocker run")
        run_id = submit(cli, flow)
        a = WorkerProc(cli, "--concurrency", "2")
        wait_for(lambda: ran(marks, "a", run_id) == 1, what="worker A to start agent a")
        assert row(cli, run_id).pid == a.pid
        a.shutdown()  # from here the park is pending at the next boundary
        release(gates, "a")
        assert a.wait_exit(30, "worker A after SIGTERM") == 0, a.text()
        r = row(cli, run_id)
        assert r.status == "queued", f"parked runs go back to the queue, not {r.status}"
        assert r.step == 1 and r.current_node == "b", (r.step, r.current_node)
        assert r.stop_requested_at is None
        assert [c.step for c in checkpoints(cli.store_url, cli.workspace, run_id)][-1] == 1, "parked from its checkpoint"
        release(gates, "blocker")
        wait_for(lambda: row(cli, run_id).status == "completed", timeout=30, what="worker B to complete the parked run")
    finally:
        release(gates, "a", "b", "c", "blocker")
        cleanup(a, b)
    assert row(cli, run_id).pid == b.pid
    r = row(cli, run_id)
    assert r.epoch == 2, "claimed once by A, once by B"
    assert r.stop_requested_at is None and r.stop_requested_by is None, "a park is not a stop"
    assert [ran(marks, n, run_id) for n in "abc"] == [1, 1, 1], "resumed from the checkpoint: nothing ran twice"
    acts = audit(cli.store_url, cli.workspace, run_id)
    assert "run.stopped" not in [x.action for x in acts] and "run.stop_requested" not in [x.action for x in acts]
    parked = [x for x in acts if x.action == "run.parked"]
    assert len(parked) == 1, [(x.action, x.actor) for x in acts]
    assert "worker" in parked[0].actor and a.id in parked[0].actor, parked[0].actor
    assert parked[0].detail.get("boundary") == "b", parked[0].detail
    evs = events(cli.store_url, cli.workspace, run_id)
    kinds = [e.kind for e in evs]
    assert "run.stopped" not in kinds
    park_events = [e for e in evs if e.kind == "run.parked"]
    assert len(park_events) == 1 and a.id in park_events[0].text, [e.text for e in park_events]
    assert kinds.index("run.parked") < len(kinds) - 1 - kinds[::-1].index("run.claimed"), "B claimed it after the park"
    assert [e.node for e in evs if e.kind == "node.finished"] == ["a", "b", "c"]


def test_a_run_whose_stop_was_requested_ends_stopped_when_its_worker_shuts_down(cli: Cli, tmp_path: Path):
    """A person's stop wins over the worker's park: the run ends `stopped`, requested by that person.

    This held before the fix too (the drain's own stop lost the race to the
    person's, already recorded); it guards the fix, which must not turn a
    requested stop into a park.
    """
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    flow = gated_flow(tmp_path, "stopme", ["a", "b"], marks, gates)
    run_id = submit(cli, flow)
    w = None
    try:
        w = WorkerProc(cli)
        wait_for(lambda: ran(marks, "a", run_id) == 1, what="the worker to start agent a")
        res = cli.call("stop", run_id[:8])
        assert res.returncode == 0 and "stop requested" in res.stdout, res.stdout + res.stderr
        w.shutdown()
        release(gates, "a")
        assert w.wait_exit(30, "the worker after SIGTERM") == 0, w.text()
    finally:
        release(gates, "a", "b")
        cleanup(w)
    r = row(cli, run_id)
    assert r.status == "stopped", (r.status, r.error)
    assert r.stop_requested_by == "tester@ci" and r.current_node == "b" and r.step == 1
    acts = [(x.action, x.actor) for x in audit(cli.store_url, cli.workspace, run_id)]
    assert ("run.stopped", "tester@ci") in acts, acts
    assert "run.parked" not in [a for a, _ in acts], acts
    assert ran(marks, "b", run_id) == 0


def test_a_rolling_restart_of_two_workers_completes_every_run_without_a_human(cli: Cli, tmp_path: Path):
    """Two workers, four runs of four nodes: SIGTERM A, start A2, SIGTERM B, start B2; every run completes.

    Before the fix each SIGTERM stopped its worker's runs (`run.stopped` in the
    audit, requested by "worker ... shutdown"), so a routine deploy left half
    the runs `stopped` until someone resumed them by hand.
    """
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    nodes = ["s0", "s1", "s2", "s3"]
    flow = gated_flow(tmp_path, "rolling", nodes, marks, gates)
    ids = [submit(cli, flow, {"n": str(i)}) for i in range(4)]
    a = b = a2 = b2 = None
    try:
        a = WorkerProc(cli, "--concurrency", "2")
        b = WorkerProc(cli, "--concurrency", "2")
        wait_for(lambda: all(ran(marks, "s0", i) == 1 for i in ids), what="all four runs in s0")
        on_a = [i for i in ids if row(cli, i).pid == a.pid]
        on_b = [i for i in ids if row(cli, i).pid == b.pid]
        assert len(on_a) == len(on_b) == 2, (on_a, on_b)

        a.shutdown()
        release(gates, "s0")  # A's runs park at s1; B's go on into s1 and wait there
        assert a.wait_exit(30, "worker A after SIGTERM") == 0, a.text()
        assert all(ran(marks, "s1", i) == 0 for i in on_a), "a parked run runs nothing more on its way out"
        a2 = WorkerProc(cli, "--concurrency", "2")
        wait_for(lambda: all(ran(marks, "s1", i) == 1 for i in ids), what="A2 to take A's runs into s1")

        b.shutdown()
        release(gates, "s1")  # B's runs park at s2; A2's go on into s2
        assert b.wait_exit(30, "worker B after SIGTERM") == 0, b.text()
        b2 = WorkerProc(cli, "--concurrency", "2")
        wait_for(lambda: all(ran(marks, "s2", i) == 1 for i in ids), what="B2 to take B's runs into s2")
        release(gates, "s2", "s3")
        wait_for(lambda: all(row(cli, i).status == "completed" for i in ids), timeout=30, what="every run to complete")
    finally:
        release(gates, *nodes)
        cleanup(a, b, a2, b2)
    for i in ids:
        r = row(cli, i)
        assert r.status == "completed" and r.step == 4 and r.stop_requested_at is None, (i[:8], r.status)
        assert r.epoch == 2, f"{i[:8]}: parked once, claimed twice (epoch {r.epoch})"
        assert r.pid == (a2.pid if i in on_a else b2.pid)
        assert [ran(marks, n, i) for n in nodes] == [1, 1, 1, 1], f"{i[:8]}: a node ran twice or not at all"
        acts = audit(cli.store_url, cli.workspace, i)
        assert not [x for x in acts if x.action in ("run.stopped", "run.stop_requested")], [(x.action, x.actor) for x in acts]
        parked = [x for x in acts if x.action == "run.parked"]
        assert len(parked) == 1 and (a.id if i in on_a else b.id) in parked[0].actor, [(x.action, x.actor) for x in parked]
    everything = sql(cli.store_url, cli.workspace, "SELECT count(*) FROM audit WHERE action = 'run.stopped'")
    assert everything[0][0] == 0


def test_a_second_signal_leaves_the_runs_at_once_and_they_become_lost_and_resumable(cli: Cli, tmp_path: Path):
    """A second SIGTERM: the worker leaves now; its runs show `lost` within the lease and resume elsewhere.

    This is the escape hatch for a drain that would wait on a long node: the
    agent in flight is ended with the worker (nothing of the run keeps
    running), and the row is never ended for good. It held before the fix too;
    it guards the new park from swallowing the second signal.
    """
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    flow = gated_flow(tmp_path, "leave", ["a", "b"], marks, gates)
    release(gates, "b")
    run_id = submit(cli, flow)
    w = None
    try:
        w = WorkerProc(cli)
        wait_for(lambda: ran(marks, "a", run_id) == 1 and processes_of_run(run_id), what="the worker to start agent a")
        w.shutdown()
        w.proc.send_signal(signal.SIGTERM)
        w.wait_exit(10, "the worker after a second signal")
        left = time.monotonic()
        wait_for(lambda: not processes_of_run(run_id), timeout=30, what="the agent to end with its worker")
        r = row(cli, run_id)
        assert r.status == "running", f"a worker that leaves says nothing for the run ({r.status}); its lease says it"
        wait_for(lambda: run_id in mark_lost_now(cli) or row(cli, run_id).status == "lost", timeout=LEASE_S + 30, interval=0.1, what="the run to be marked lost")
        took = time.monotonic() - left
        assert took < LOST_WITHIN_S, f"lost {took:.1f}s after its worker left: the lease's deadline is SWARMKIT_LEASE ({LEASE_S:g}s), bounded here at {LOST_WITHIN_S:g}s"
        r = row(cli, run_id)
        assert r.status == "lost" and r.step == 0 and r.epoch == 1
        release(gates, "a")
        res = cli.call("run", "--resume", run_id[:8])
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        release(gates, "a", "b")
        cleanup(w)
    r = row(cli, run_id)
    assert r.status == "completed" and r.epoch == 2
    assert ran(marks, "a", run_id) == 2, "the node in flight runs again from its start"
    assert ran(marks, "b", run_id) == 1
    assert "run.stopped" not in [x.action for x in audit(cli.store_url, cli.workspace, run_id)]


def test_a_host_never_marks_lost_a_run_it_hosts_itself_however_late_its_heartbeat(cli: Cli, tmp_path: Path):
    """The one looking is alive: a worker whose run's heartbeat is late (a loaded machine) does not mark that
    run lost, where it judges the same lapse in any other host's run, or in an earlier epoch of its own."""
    from swarmkit.runtime import control
    from swarmkit.store.queries import lease_expired
    from swarmkit.store.reads import get_job

    run_id = submit(cli, write_flow(tmp_path, "late", 'name = "late"\n[[agents]]\nname = "a"\ncommand = "true"\n'))

    async def go(store):
        (claimed,) = await control.claim_queued(store, 1, worker="tester", lease_s=LEASE_S)  # claimed, then no heartbeat at all
        deadline = time.monotonic() + LEASE_S + 10
        while not await store.run_read(lambda conn: lease_expired(conn, LEASE_S)):  # what any looker sees as lapsed
            assert time.monotonic() < deadline, "the claimed run's lease never lapsed"
            await asyncio.sleep(0.1)
        itself = await control.mark_lost(store, LEASE_S, {run_id: claimed.epoch})
        stays = (await store.run_read(lambda conn: get_job(conn, run_id))).status
        an_earlier_epoch = await control.mark_lost(store, LEASE_S, {run_id: claimed.epoch - 1})
        return itself, stays, an_earlier_epoch

    itself, stays, an_earlier_epoch = with_store(cli.store_url, cli.workspace, go)
    assert (itself, stays) == ([], "running")
    assert an_earlier_epoch == [run_id]
    assert row(cli, run_id).status == "lost"
    assert "marked lost by " in " ".join(e.text for e in events(cli.store_url, cli.workspace, run_id) if e.kind == "run.lost")


# --- 9. a second Ctrl-C keeps the workspace and says where it is ------------------------


def test_a_second_ctrl_c_cancels_keeping_the_workspace_and_says_where_it_is(cli: Cli, tmp_path: Path):
    """The second Ctrl-C on a foreground run cancels it keeping its workspace, and prints the path.

    Before the fix the second Ctrl-C cancelled without keep: the workspace, with
    whatever the interrupted agent had made, was destroyed, though the design
    says a Ctrl-C keeps it and says where it is.
    """
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    marks.mkdir()
    flow = write_flow(
        tmp_path, "keepme",
        f'name = "keepme"\n[[agents]]\nname = "a"\ncommand = "echo precious > made.txt; touch {marks}/a; {hold(gates, "a")}"\n'
        f'[[agents]]\nname = "b"\ncommand = "touch {marks}/b"\n',
    )
    proc = cli.start("run", str(flow), str(cli.workspace))
    try:
        first = proc.stdout.readline()
        assert " running " in first, first
        short = first.split()[0]
        wait_for(lambda: (marks / "a").exists(), what="agent a to start")
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: row(cli, short).stop_requested_at is not None, what="the first Ctrl-C's stop")
        proc.send_signal(signal.SIGINT)
        out, errs = wait_exit(proc, 30, "swarmkit run after a second Ctrl-C")
    finally:
        release(gates, "a")
        kill_group_of(proc)
    r = row(cli, short)
    assert r.status == "cancelled", (r.status, out, errs)
    assert r.cancel_keep is True or r.cancel_keep == 1, r.cancel_keep
    assert not (marks / "b").exists()
    ws = workspaces(cli.store_url, cli.workspace, r.id)
    assert ws, "the run had a workspace"
    path = Path(ws[0].path)
    assert ws[0].state == "kept", [(w.path, w.state) for w in ws]
    assert path.is_dir() and (path / "made.txt").read_text() == "precious\n"
    assert str(path) in out + errs, f"the process does not say where the workspace is:\n{out}\n{errs}"
    assert not has_traceback(errs), errs


# --- 10. a chatty agent ---------------------------------------------------------------------


def test_a_chatty_agent_is_capped_counted_and_the_host_stays_small(cli: Cli, tmp_path: Path):
    """`seq 1 3000000` (about 21 MB of short lines) under SWARMKIT_LOG_CAP=200000.

    Before the fix every line became an event in an unbounded buffer: the
    host's memory grew with the agent's output, the batches grew with it, the
    heartbeat waited behind them, and the run was marked `lost` while its host
    was busy writing lines (seen here: the row read `lost`).
    """
    cap = 200_000
    total = 3_000_000
    flow = write_flow(
        tmp_path, "chatty",
        f'name = "chatty"\n[[agents]]\nname = "talk"\ncommand = "seq 1 {total}"\n[[agents]]\nname = "after"\ncommand = "echo after"\n',
    )
    run_id = submit(cli, flow)
    w = None
    try:
        w = WorkerProc(cli, env={"SWARMKIT_LOG_CAP": str(cap)})
        wait_for(lambda: row(cli, run_id).status not in ("queued", "running"), timeout=90, interval=0.2, what="the chatty run to end")
        hwm_mib = vm_hwm_kib(w.pid) / 1024
    finally:
        cleanup(w)
    r = row(cli, run_id)
    assert r.status == "completed", (r.status, r.error)
    assert r.epoch == 1, "never lost, never taken over"
    size, kept = sql(cli.store_url, cli.workspace, "SELECT coalesce(sum(length(text)), 0), count(*) FROM events WHERE job_id = :j AND kind = 'log'", {"j": run_id})[0]
    assert int(size) <= cap, f"{size:,} characters of log text kept for a cap of {cap:,}"
    assert int(size) > cap // 2, "lines up to the cap are kept"
    evs = events(cli.store_url, cli.workspace, run_id)
    kinds = {e.kind for e in evs}
    assert "run.lost" not in kinds
    runtime = [e.text for e in evs if e.kind == "runtime"]
    assert any("cap" in t.lower() for t in runtime), runtime
    dropped = [int(m.group(1).replace(",", "")) for t in runtime if (m := re.search(r"dropped\s+([\d,]+)", t))]
    assert dropped, f"no event says how many lines were dropped: {runtime}"
    assert abs(sum(dropped) + int(kept) - total) <= total // 100, f"kept {kept:,} + dropped {sum(dropped):,} lines of {total:,}"
    assert hwm_mib < 300, f"the worker's peak RSS was {hwm_mib:.0f} MiB"


# --- 11. bad agent output is the agent's failure ----------------------------------------------

BAD_AGENTS = '''
import asyncio
import datetime


async def returns_datetime_in_state(ctx):
    return {"when": datetime.datetime(2026, 1, 2, 3, 4, 5)}


async def returns_a_datetime(ctx):
    return datetime.datetime(2026, 1, 2, 3, 4, 5)


def returns_deep(ctx):
    d = {}
    for _ in range(100000):
        d = {"x": d}
    return {"deep": d}


async def negative_usage(ctx):
    ctx.add_usage(tokens=-5)
    await asyncio.sleep(0)
    return {"fine": True}
'''

# name -> (agent line, what the error must name besides the agent)
BAD_CASES = {
    "huge_tokens": ("command = '''echo '{\"_usage\": {\"tokens\": 1e20}}' > \"$SWARMKIT_OUTPUT\"'''", ["1e+20"]),
    "nan_cost": ("command = '''echo '{\"_usage\": {\"tokens\": 1, \"cost\": NaN}}' > \"$SWARMKIT_OUTPUT\"'''", ["nan"]),
    "negative_tokens": ("command = '''echo '{\"_usage\": {\"tokens\": -7}}' > \"$SWARMKIT_OUTPUT\"'''", ["-7"]),
    "datetime_state": ('call = "badagents:returns_datetime_in_state"', ["datetime", "json"]),
    "datetime_bare": ('call = "badagents:returns_a_datetime"', ["datetime"]),
    "deep_dict": ('call = "badagents:returns_deep"', ["json"]),
    "negative_add_usage": ('call = "badagents:negative_usage"', ["-5"]),
}


def test_bad_agent_output_fails_the_run_naming_the_agent_and_never_faults_it(cli: Cli, tmp_path: Path):
    """Usage of 1e20 tokens, a NaN cost, negative tokens, a datetime, a dict 100,000 deep, add_usage(-5).

    Before the fix these reached the row or the checkpoint: 1e20 tokens
    overflowed the tokens column (`faulted`, "runtime fault: OverflowError" on
    SQLite, "value out of int64 range" on PostgreSQL); a NaN cost faulted the
    run on SQLite (NOT NULL constraint on jobs.cost) and was stored as the
    row's cost on PostgreSQL, the run `completed`; negative tokens and
    add_usage(tokens=-5) completed with the usage going down; a datetime or a
    dict too deep for JSON ended `faulted` ("runtime fault: TypeError" /
    "RecursionError") as if the runtime had broken.
    """
    (tmp_path / "badagents.py").write_text(BAD_AGENTS, encoding="utf-8")
    good = "name = \"good\"\ncommand = '''echo '{\"ok\": 1, \"_usage\": {\"tokens\": 10, \"cost\": 0.01}}' > \"$SWARMKIT_OUTPUT\"'''"
    ids: dict[str, str] = {}
    for name, (line, _) in BAD_CASES.items():
        flow = write_flow(tmp_path, name, f'name = "{name}"\n\n[[agents]]\n{good}\n\n[[agents]]\nname = "{name}"\n{line}\n\n[[agents]]\nname = "never"\ncommand = "echo never"\n')
        ids[name] = submit(cli, flow)
    w = None
    try:
        w = WorkerProc(cli, "--concurrency", str(len(ids)))
        wait_for(lambda: all(row(cli, i).status not in ("queued", "running") for i in ids.values()), timeout=60, interval=0.2, what="every bad run to end")
        assert w.proc.poll() is None, "the worker survived its agents' nonsense"
    finally:
        cleanup(w)
    problems = []
    for name, run_id in ids.items():
        r = row(cli, run_id)
        err = r.error or ""
        must = BAD_CASES[name][1]
        if r.status != "failed":
            problems.append(f"{name}: {r.status} ({err[:300]})")
            continue
        rest = err.lower().replace(name, "")
        if name not in err or not all(m in rest for m in must):
            problems.append(f"{name}: the error does not name the agent and {must}: {err[:300]}")
        if len(err) > 2000:
            problems.append(f"{name}: an error of {len(err):,} characters")
        if not (r.tokens == 10 and isinstance(r.cost, float) and math.isfinite(r.cost) and r.cost == pytest.approx(0.01)):
            problems.append(f"{name}: usage on the row is {r.tokens!r} tokens, {r.cost!r} cost (the good node reported 10, 0.01)")
        if r.step != 1 or r.current_node != name:
            problems.append(f"{name}: ended at step {r.step} node {r.current_node}")
        kinds = [e.kind for e in events(cli.store_url, cli.workspace, run_id)]
        if "run.faulted" in kinds or "run.failed" not in kinds:
            problems.append(f"{name}: events {kinds}")
        if any(e.text == "never" for e in events(cli.store_url, cli.workspace, run_id)):
            problems.append(f"{name}: the node after the bad one ran")
    assert not problems, "\n".join(problems)


def test_a_host_whose_lease_lapses_says_where_its_heartbeat_was():
    """A self-fencing host names the time gone: its last renewal, the phase its heartbeat was stuck in
    (asleep, reading the store's clock, writing) and how late the check itself woke. A 2 s test lease
    once lapsed beside two CPU hogs with only "could not renew its lease in time" to go on."""
    from swarmkit.runtime.host_lease import LeaseKeeping
    from swarmkit.runtime.settings import Settings

    class Host(LeaseKeeping):
        def __init__(self) -> None:
            now = time.monotonic()
            self.settings = Settings(heartbeat_s=0.05, lease_s=0.4)
            self._fenced = False
            self.lease_deadline = now + 0.1
            self._last_renewal = now - 0.2
            self._beat_phase = ("writing", now - 0.15)
            self.said: list[str] = []

        def warn_once(self, fault: str, text: str) -> None:
            self.said.append(text)

        def fence(self, why: str | None = None) -> None:
            self._fenced = True

    host = Host()
    asyncio.run(host._lease_watch())
    (said,) = host.said
    assert host._lease_lapsed and host._fenced
    assert re.fullmatch(
        r"this host could not renew its lease in time \(last renewed \d+\.\ds ago, lease 0\.4s; its heartbeat writing for \d+\.\ds; "
        r"this check woke \d+\.\d\ds late\): its agents are ended and it stops hosting the run \(it will show lost, resumable\)",
        said,
    ), said
