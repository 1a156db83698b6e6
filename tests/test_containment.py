"""Containment: nothing an agent starts outlives its node, its cancel or its host's lease.

Real `swarmkit run` and `swarmkit worker` processes, real agents that escape
their process group (setsid, a double-forked daemon), ignore SIGTERM, or leave
a FIFO where the host reads their output. Every process an agent starts
records its pid and its start time (field 22 of /proc/PID/stat) in a ledger
the test owns, so that a pid the kernel handed to someone else is never taken
for the agent. After each end the test checks, through /proc, that none of
them is alive, that nothing more lands in the workspace or the test's folder,
and that the run's trail has no event after its ending one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability import LEASE_S, with_store

from .conftest import Cli, release, wait_for, write_flow
from .helpers import CANCELLED_WITHIN_S, FAST_ENV, checkpoints, events, job, read
from .test_crash import pause_outside_a_transaction

TERM_GRACE_S = float(FAST_ENV["SWARMKIT_TERM_GRACE"])
INTERRUPT_GRACE_S = float(FAST_ENV["SWARMKIT_INTERRUPT_GRACE"])
# runtime/agent_process.py: how long output may drain after the agent's supervisor exits.
DRAIN_S = 2.0
# How long the test watches for writes after an end.
QUIET_S = 0.5
# The contract's deadline for a node whose command exited, three times over: its strays get SIGTERM,
# SWARMKIT_TERM_GRACE, SIGKILL, and its output drains for DRAIN_S at most.
ENDED_WITHIN_S = 3 * (TERM_GRACE_S + DRAIN_S)
ENDED_WITHIN_WHY = "3x SWARMKIT_TERM_GRACE + the output's drain, runtime/agent_process.DRAIN_S"


# --- processes, by pid and start time --------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (index 0 is field 3, the state)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def alive(pid: int, start: str) -> bool:
    """Process `pid` is running and is the one that started at `start` (field 22): missing, a zombie, or
    a reused pid is dead."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X") and fields[19] == start


# A shell line that records the shell's pid and start time (the comm of `sh` holds no space, so cut works).
RECORD = "echo \"$$ $(cut -d' ' -f22 /proc/$$/stat)\" >> {pids}"


@dataclass
class Ledger:
    """The test's folder: `pids` (pid and start time of every process an agent started), tick files,
    gates, and the agents' scripts."""

    root: Path

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def gates(self) -> Path:
        return self.root / "gates"

    def recorded(self) -> list[tuple[int, str]]:
        if not self.pids.exists():
            return []
        out = []
        for line in self.pids.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                out.append((int(parts[0]), parts[1]))
        return list(dict.fromkeys(out))

    def living(self, among: list[tuple[int, str]] | None = None) -> list[int]:
        return [pid for pid, start in (self.recorded() if among is None else among) if alive(pid, start)]

    def ticks(self, name: str) -> list[tuple[int, float]]:
        """(pid, wall time) of every whole tick line in `name`.tick."""
        path = self.root / f"{name}.tick"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                try:
                    out.append((int(parts[0]), float(parts[1])))
                except ValueError:
                    pass
        return out

    def ticker(self) -> Path:
        """tick.sh NAME [stubborn]: record itself, then append "pid time" to NAME.tick here and in its cwd
        (the run's workspace) every 50 ms, for ever. `stubborn` ignores SIGINT and SIGTERM."""
        path = self.root / "tick.sh"
        if not path.exists():
            path.write_text(
                '[ "$2" = stubborn ] && trap \'\' INT TERM\n'
                + RECORD.format(pids=self.pids) + "\n"
                + "while :; do\n"
                + "  now=$(date +%s.%N)\n"
                + f'  echo "$$ $now" >> {self.root}/"$1".tick\n'
                + '  echo "$$ $now" 2>/dev/null >> "$1".tick\n'
                + "  sleep 0.05\n"
                + "done\n"
            )
        return path

    def script(self, name: str, body: str) -> Path:
        path = self.root / f"{name}.sh"
        path.write_text(body)
        return path

    def kill_leftovers(self) -> None:
        for pid, start in self.recorded():
            if alive(pid, start):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger(tmp_path / "ledger")
    led.root.mkdir()
    try:
        yield led
    finally:
        # Whatever an agent left alive (the product failed a test) must not run on past it.
        led.kill_leftovers()


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """`swarmkit` processes a test starts: ended (by pid) when it is over, even when it failed."""
    procs: list[subprocess.Popen] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
            # A worker parks its runs at their next boundary on the first SIGTERM and leaves them on the
            # second; an agent that waits on a gate would hold the first for ever.
            for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
                if proc.poll() is not None:
                    break
                try:
                    proc.send_signal(sig)
                    proc.communicate(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
                except ProcessLookupError:
                    break
            if proc.poll() is None:
                proc.wait(timeout=10)


# --- the store, and quiet after an end ------------------------------------------------


def run_dir(cli: Cli, rid: str) -> Path:
    return cli.workspace / ".swarmkit" / "runs" / rid


def detach(cli: Cli, flow: Path) -> str:
    return cli.call("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()


def start_foreground(cli: Cli, started: list[subprocess.Popen], *args: str) -> tuple[subprocess.Popen, str]:
    proc = cli.start("run", *args, str(cli.workspace))
    started.append(proc)
    first = proc.stdout.readline()
    assert " running " in first or "claimed" in first or "resum" in first, first + proc.stderr.read()
    return proc, first.split()[0]


def full_id(cli: Cli, ref: str) -> str:
    row = job(cli.store_url, cli.workspace, ref)
    assert row is not None, ref
    return row.id


def last_event_id(cli: Cli, rid: str) -> int:
    evs = events(cli.store_url, cli.workspace, rid)
    return max((e.id for e in evs), default=0)


def sizes(*folders: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for folder in folders:
        if not folder.exists():
            continue
        for path in folder.rglob("*"):
            try:
                if path.is_file():
                    out[str(path)] = path.stat().st_size
            except OSError:
                pass
    return out


def assert_quiet_after_end(cli: Cli, rid: str, ending_kind: str, *folders: Path) -> None:
    """Right after the run's end: its ending event is its last, and in the next QUIET_S nothing is
    written for it, not in the store and not on disk (no file appears or grows)."""
    evs = events(cli.store_url, cli.workspace, rid)
    ends = [e for e in evs if e.kind == ending_kind]
    assert ends, f"no {ending_kind} event: {[(e.kind, e.text[:60]) for e in evs[-8:]]}"
    end_id = ends[-1].id
    last = max(e.id for e in evs)
    after_end = [(e.kind, e.text[:80]) for e in evs if e.id > end_id]
    assert not after_end, f"events after {ending_kind}: {after_end}"
    before = sizes(*folders)
    # Not a wait for a condition: what is tested is that nothing happens in this window.
    time.sleep(QUIET_S)
    after = sizes(*folders)
    grown = {p: (before.get(p), s) for p, s in after.items() if s > before.get(p, -1)}
    assert not grown, f"written after the run ended ({ending_kind}): {grown}"
    later = last_event_id(cli, rid)
    assert later == last, f"events written after {ending_kind}: {[(e.kind, e.text[:80]) for e in events(cli.store_url, cli.workspace, rid) if e.id > last]}"


def assert_all_dead(led: Ledger, what: str) -> None:
    left = led.living()
    assert not left, f"{what}: recorded processes still alive: {[(p, _stat_fields(p)[:3] if _stat_fields(p) else None) for p in left]}"


def looked_at(cli: Cli, rid: str) -> str:
    """The run's status as any reader sees it: it first marks runs whose host went silent lost."""
    from swarmkit.runtime import control
    from swarmkit.store.queries import get_job

    async def go(store):
        await control.mark_lost(store, LEASE_S)
        async with store.read() as conn:
            return (await conn.run_sync(get_job, rid)).status

    return with_store(cli.store_url, cli.workspace, go)


# --- 1. cancel reaches processes that left the group ------------------------------------


def escaping_flow(tmp_path: Path, led: Ledger) -> Path:
    tick = led.ticker()
    agent = led.script(
        "escape",
        RECORD.format(pids=led.pids) + "\n"
        # A child in a session of its own: another process group, out of reach of killpg.
        + f"setsid sh {tick} setsid &\n"
        # A double-forked daemon: its parent exits at once, so it is an orphan, in a session of its own.
        + f"( setsid sh {tick} daemon </dev/null >/dev/null 2>&1 & )\n"
        + "echo escaped\n"
        + f"sh {tick} main\n",
    )
    return write_flow(tmp_path, "escape", f'name = "escape"\n[[agents]]\nname = "escape"\ncommand = "sh {agent}"\n')


@pytest.mark.parametrize("host", ["run", "worker"])
def test_cancel_ends_a_setsid_child_and_a_double_forked_daemon(cli: Cli, tmp_path: Path, ledger: Ledger, started, host: str):
    """`swarmkit cancel` of a command agent that started a child with setsid and a double-forked
    daemon, both ticking into the workspace: the run reads cancelled, every recorded process is dead
    by then, and nothing is written afterwards. Under `swarmkit run` the cancel destroys the
    workspace; under a worker it is `--keep`, so that the workspace itself can be watched.

    Used to: the host interrupted the agent with killpg on its process group only; the setsid child
    and the daemon (other sessions) never got a signal and kept writing into the workspace after the
    run read cancelled (and into a destroyed workspace's path for ever)."""
    flow = escaping_flow(tmp_path, ledger)
    if host == "run":
        proc, short = start_foreground(cli, started, str(flow))
        rid = full_id(cli, short)
    else:
        rid = detach(cli, flow)
        started.append(cli.start("worker", "--concurrency", "2", str(cli.workspace)))
    wait_for(lambda: all(ledger.ticks(n) for n in ("main", "setsid", "daemon")) and len(ledger.recorded()) >= 4, timeout=30, what="the agent and its escaped children to tick")
    keep = ["--keep"] if host == "worker" else []
    res = cli.call("cancel", rid[:12], str(cli.workspace), *keep)
    assert res.returncode == 0 and "cancel requested" in res.stdout, res.stdout + res.stderr
    wait_for(lambda: job(cli.store_url, cli.workspace, rid).status == "cancelled", timeout=INTERRUPT_GRACE_S + TERM_GRACE_S + 10, what="the run to end cancelled")
    assert_all_dead(ledger, "at cancelled")
    assert_quiet_after_end(cli, rid, "run.cancelled", ledger.root, run_dir(cli, rid))
    if host == "run":
        out, errs = proc.communicate(timeout=10)
        assert f"{short} cancelled" in out, out + errs
        assert not run_dir(cli, rid).exists() or not any(run_dir(cli, rid).iterdir()), "the cancelled run's workspace was not destroyed"
    else:
        assert (run_dir(cli, rid) / "daemon.tick").exists(), "--keep: the workspace is kept, with what the agents wrote"


# --- 2 and 3. what a command leaves behind when it exits ---------------------------------------


def test_a_node_ends_when_its_command_exits_though_an_escaped_child_holds_stdout(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """The command exits 0 while a child it started with setsid keeps the agent's stdout open and never
    exits: the node still ends (the run completes, its next agent runs) within term grace + drain + a
    few seconds, and the child is dead by then.

    Used to: the host read the agent's stdout until end of file; the escaped child held the pipe, so
    the node (and the foreground `swarmkit run`) never ended, and the child ran on."""
    tick = ledger.ticker()
    agent = ledger.script(
        "holder",
        RECORD.format(pids=ledger.pids) + "\n"
        + f"setsid sh {tick} held &\n"  # inherits stdout and stderr: the host's pipes
        + f'while [ ! -s {ledger.root}/held.tick ]; do sleep 0.02; done\n'
        + "echo leaving\n"
        + f"date +%s.%N > {ledger.root}/exited.tmp; mv {ledger.root}/exited.tmp {ledger.root}/exited\n"
        + "exit 0\n",
    )
    flow = write_flow(
        tmp_path, "holder",
        f'name = "holder"\n[[agents]]\nname = "leave"\ncommand = "sh {agent}"\n[[agents]]\nname = "after"\ncommand = "echo after"\n',
    )
    proc, short = start_foreground(cli, started, str(flow))
    rid = full_id(cli, short)
    wait_for(lambda: (ledger.root / "exited").exists(), timeout=30, what="the command to exit")
    t_exit = time.monotonic()
    bound = ENDED_WITHIN_S
    try:
        out, errs = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the node did not end within {bound:g}s of its command's exit ({ENDED_WITHIN_WHY}): an escaped child holds its stdout") from None
    took = time.monotonic() - t_exit
    assert proc.returncode == 0 and f"{short} completed" in out, out + errs
    assert "after" in out, "the next agent ran"
    row = job(cli.store_url, cli.workspace, rid)
    assert row.status == "completed" and row.step == 2
    assert_all_dead(ledger, "at completed")
    assert len(ledger.recorded()) == 2
    assert_quiet_after_end(cli, rid, "run.completed", ledger.root)
    assert took <= bound, f"ended {took:.1f}s after its command's exit ({ENDED_WITHIN_WHY})"


def test_strays_that_ignore_sigterm_are_killed_after_the_grace(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """A command exits, leaving strays that ignore SIGTERM (`trap '' TERM`): one in its process group
    (holding stdout), one in a session of its own. They get SIGTERM, shrug it off, and are SIGKILLed
    after the term grace; the run completes, the strays are dead.

    Used to: after the command exited the supervisor sent its group one SIGTERM and nothing more:
    both strays ran on for ever, and the one holding stdout kept the node from ending."""
    tick = ledger.ticker()
    agent = ledger.script(
        "strays",
        RECORD.format(pids=ledger.pids) + "\n"
        + f"sh {tick} grouped stubborn &\n"
        + f"setsid sh {tick} session stubborn >/dev/null 2>&1 &\n"
        + f'while [ ! -s {ledger.root}/grouped.tick ] || [ ! -s {ledger.root}/session.tick ]; do sleep 0.02; done\n'
        + f"date +%s.%N > {ledger.root}/exited.tmp; mv {ledger.root}/exited.tmp {ledger.root}/exited\n"
        + "exit 0\n",
    )
    flow = write_flow(tmp_path, "strays", f'name = "strays"\n[[agents]]\nname = "leave"\ncommand = "sh {agent}"\n')
    proc, short = start_foreground(cli, started, str(flow))
    rid = full_id(cli, short)
    wait_for(lambda: (ledger.root / "exited").exists(), timeout=30, what="the command to exit")
    t_exit_wall = float((ledger.root / "exited").read_text())
    bound = ENDED_WITHIN_S
    try:
        out, errs = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the run did not end within {bound:g}s of its command's exit ({ENDED_WITHIN_WHY}): strays ignoring SIGTERM live on") from None
    assert proc.returncode == 0 and f"{short} completed" in out, out + errs
    assert job(cli.store_url, cli.workspace, rid).status == "completed"
    assert_all_dead(ledger, "at completed")
    assert len(ledger.recorded()) == 3
    # They really ignored SIGTERM (they ticked on past it) and were killed once the grace was over.
    for name in ("grouped", "session"):
        last = max(t for _, t in ledger.ticks(name))
        assert last - t_exit_wall >= TERM_GRACE_S * 0.5, f"{name}: its last tick {last - t_exit_wall:.2f}s after the exit: it did not outlive SIGTERM"
    assert_quiet_after_end(cli, rid, "run.completed", ledger.root)


# --- 4. a sync call agent is a process a cancel ends ----------------------------------------------


def test_cancel_ends_a_sync_call_agent_for_real(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """A sync `call` agent loops writing into the workspace: cancel it. The run ends cancelled, the
    agent's process is dead, nothing more is written, and the foreground `swarmkit run` prints
    "cancelled" and exits within seconds.

    Used to: a sync callable ran in a thread of the host; a cancel could not end it, so it went on
    writing after the run read cancelled, and the `swarmkit run` process never exited (its interpreter
    waits for that thread at shutdown)."""
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "loopmod.py").write_text(
        "import os, time\n"
        "from pathlib import Path\n"
        f"LEDGER = Path({str(ledger.root)!r})\n"
        "def _start():\n"
        "    stat = open('/proc/self/stat').read()\n"
        "    return stat[stat.rfind(')') + 2 :].split()[19]\n"
        "def loop(ctx):\n"
        "    with open(LEDGER / 'pids', 'a') as f:\n"
        "        f.write(f'{os.getpid()} {_start()}\\n')\n"
        "    while True:\n"
        "        line = f'{os.getpid()} {time.time():.6f}\\n'\n"
        "        for folder in (LEDGER, Path(ctx.workspace)):\n"
        "            try:\n"
        "                with open(folder / 'call.tick', 'a') as f:\n"
        "                    f.write(line)\n"
        "            except OSError:\n"
        "                pass\n"
        "        time.sleep(0.05)\n"
    )
    flow = write_flow(flows, "looping", 'name = "looping"\n[[agents]]\nname = "loop"\ncall = "loopmod:loop"\n')
    proc, short = start_foreground(cli, started, str(flow))
    rid = full_id(cli, short)
    wait_for(lambda: len(ledger.ticks("call")) >= 2 and ledger.recorded(), timeout=30, what="the call agent to tick")
    [(agent_pid, _)] = ledger.recorded()
    res = cli.call("cancel", short, str(cli.workspace))
    assert res.returncode == 0 and "cancel requested" in res.stdout, res.stdout + res.stderr
    bound = CANCELLED_WITHIN_S
    try:
        out, errs = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"`swarmkit run` did not exit within {bound:g}s of the cancel, 5x its graces (SWARMKIT_INTERRUPT_GRACE + SWARMKIT_TERM_GRACE) "
            f"(agent pid {agent_pid}, host pid {proc.pid})"
        ) from None
    assert f"{short} cancelled" in out, out + errs
    assert proc.returncode == 1
    assert job(cli.store_url, cli.workspace, rid).status == "cancelled"
    assert agent_pid != proc.pid, "the sync agent ran inside the host process"
    assert_all_dead(ledger, "at cancelled")
    assert_quiet_after_end(cli, rid, "run.cancelled", ledger.root, run_dir(cli, rid))


# --- 5. a frozen host's agents die before its run can be taken --------------------------------------


# The freeze outside a transaction is test_crash's: one implementation of it.
freeze_outside_a_transaction = pause_outside_a_transaction


def watch_until_lost(cli: Cli, rid: str, agents: list[tuple[int, str]], timeout: float) -> tuple[float | None, float]:
    """Poll, from this process, whether the agents live and what the run reads (marking lost as every
    reader does). Returns (when the last agent was first seen dead, when the run first read lost)."""
    from swarmkit.runtime import control
    from swarmkit.store import Store
    from swarmkit.store.queries import get_job

    async def go() -> tuple[float | None, float]:
        store = await Store.open(cli.store_url, cli.workspace)
        try:
            dead_at: float | None = None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if dead_at is None and not any(alive(p, s) for p, s in agents):
                    dead_at = time.monotonic()
                await control.mark_lost(store, LEASE_S)
                async with store.read() as conn:
                    status = (await conn.run_sync(get_job, rid)).status
                if status == "lost":
                    return dead_at, time.monotonic()
                assert status == "running", status
                await asyncio.sleep(0.02)
            raise AssertionError(f"the frozen worker's run was not lost within {timeout}s")
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.mark.short_lease
def test_a_frozen_hosts_agents_die_before_its_run_reads_lost(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """SIGSTOP a worker whose run's command agent (and a setsid child of it) tick into the workspace:
    the agents are dead before the run reads lost (their supervisor holds the lease and ends them a
    margin before it runs out). The run resumed with `swarmkit run --resume` runs a new agent that
    never overlaps the old one: every old tick precedes the new agent's first.

    Used to: the supervisor only watched for its parent dying; a frozen host is not dead, so its agents
    ticked on while the run read lost and was resumed, two agents working in one workspace at once."""
    tick = ledger.ticker()
    gate = ledger.gates / "done"
    agent = ledger.script(
        "frozen",
        RECORD.format(pids=ledger.pids) + "\n"
        + f"setsid sh {tick} child &\n"
        + f"while [ ! -e {gate} ]; do\n"
        + f'  echo "$$ $(date +%s.%N)" >> {ledger.root}/main.tick\n'
        + '  echo "$$ $(date +%s.%N)" >> main.tick\n'
        + "  sleep 0.05\n"
        + "done\n",
    )
    flow = write_flow(tmp_path, "frozen", f'name = "frozen"\n[[agents]]\nname = "work"\ncommand = "sh {agent}"\n')
    rid = detach(cli, flow)
    worker = cli.start("worker", "--concurrency", "1", str(cli.workspace))
    started.append(worker)
    try:
        wait_for(lambda: len(ledger.recorded()) >= 2 and ledger.ticks("main") and ledger.ticks("child"), timeout=30, what="the agent and its child to tick")
        old = ledger.recorded()
        freeze_outside_a_transaction(cli, worker)
        dead_at, lost_at = watch_until_lost(cli, rid, old, timeout=LEASE_S + 10)
        assert dead_at is not None, f"the run read lost while the frozen host's agents were alive: {ledger.living(old)}"
        assert dead_at < lost_at
        print(f"\nthe frozen host's agents were dead {lost_at - dead_at:.2f}s before the run read lost")
        assert not ledger.living(old)
        assert_quiet_after_end(cli, rid, "run.lost", ledger.root, run_dir(cli, rid))

        proc, _ = start_foreground(cli, started, "--resume", rid[:12])
        wait_for(lambda: len(ledger.recorded()) >= 4 and any(p not in {q for q, _ in old} for p, _ in ledger.ticks("main")), timeout=30, what="the resumed run's agent to tick")
        release(ledger.gates, "done")
        out, errs = proc.communicate(timeout=TERM_GRACE_S + DRAIN_S + 10)
        assert proc.returncode == 0 and "completed" in out, out + errs
    finally:
        if worker.poll() is None:
            worker.kill()  # a stopped process dies of SIGKILL too
            worker.wait(timeout=10)
    row = job(cli.store_url, cli.workspace, rid)
    assert row.status == "completed" and row.epoch == 2
    old_pids = {p for p, _ in old}
    ticks = ledger.ticks("main") + ledger.ticks("child")
    old_ticks = [t for p, t in ticks if p in old_pids]
    new_ticks = [t for p, t in ticks if p not in old_pids]
    assert old_ticks and new_ticks
    assert max(old_ticks) < min(new_ticks), f"the old agent ticked {max(old_ticks) - min(new_ticks):.3f}s into the resumed run's agent"
    assert_all_dead(ledger, "at completed")


# --- 6. a FIFO at $SWARMKIT_OUTPUT faults that run, not the host --------------------------------------


def test_a_fifo_at_the_output_faults_that_run_and_the_worker_carries_on(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """An agent leaves a FIFO at $SWARMKIT_OUTPUT while its worker hosts a second, healthy run: the FIFO
    run ends faulted with an error naming the file; the worker and the healthy run keep heart-beating
    (it never reads lost) and it completes with its output read.

    Used to: the host opened the output file with a blocking read on its event loop; a FIFO with no
    writer blocks open() for ever, so the worker froze: the FIFO run never ended and every other run
    it hosted went lost."""
    from sqlalchemy import select

    from swarmkit.store.models import workers

    healthy_tick = ledger.root / "healthy.tick"
    healthy = ledger.script(
        "healthy",
        RECORD.format(pids=ledger.root / "healthy.pids") + "\n"
        + f"while [ ! -e {ledger.gates}/healthy ]; do date +%s.%N >> {healthy_tick}; sleep 0.05; done\n"
        + "echo '{\"healthy\": true}' > \"$SWARMKIT_OUTPUT\"\n",
    )
    fifo = ledger.script(
        "fifo",
        RECORD.format(pids=ledger.pids) + "\n"
        + f"while [ ! -s {healthy_tick} ]; do sleep 0.02; done\n"
        + f'echo "$SWARMKIT_OUTPUT" > {ledger.root}/fifo_path\n'
        + 'rm -f "$SWARMKIT_OUTPUT"; mkfifo "$SWARMKIT_OUTPUT"\n'
        + "echo left a fifo\n",
    )
    ok_flow = write_flow(tmp_path, "healthy", f'name = "healthy"\n[[agents]]\nname = "work"\ncommand = "sh {healthy}"\n')
    fifo_flow = write_flow(tmp_path, "fifo", f'name = "fifo"\n[[agents]]\nname = "pipe"\ncommand = "sh {fifo}"\n[[agents]]\nname = "never"\ncommand = "echo never"\n')
    ok_id = detach(cli, ok_flow)
    fifo_id = detach(cli, fifo_flow)
    worker = cli.start("worker", "--concurrency", "2", str(cli.workspace))
    started.append(worker)

    def fifo_ended() -> bool:
        assert looked_at(cli, ok_id) in ("queued", "running"), "the healthy run left running while the FIFO run was read"
        return job(cli.store_url, cli.workspace, fifo_id).status not in ("queued", "running")

    wait_for(fifo_ended, timeout=30, interval=0.1, what="the FIFO run to end")
    row = job(cli.store_url, cli.workspace, fifo_id)
    path = (ledger.root / "fifo_path").read_text().strip()
    assert row.status == "faulted", (row.status, row.error)
    assert path in (row.error or "") and "FIFO" in row.error, row.error
    assert row.step == 0 and row.current_node == "pipe"
    assert len(ledger.recorded()) == 1
    assert_all_dead(ledger, "at faulted")
    assert_quiet_after_end(cli, fifo_id, "run.faulted", run_dir(cli, fifo_id))

    # The worker carries on: its own heartbeat and the healthy run's move on after the fault.
    def worker_beat():
        return read(cli.store_url, cli.workspace, lambda c: _scalar(c, select(workers.c.heartbeat_at)))

    faulted_at = row.ended_at
    wait_for(lambda: job(cli.store_url, cli.workspace, ok_id).heartbeat_at > faulted_at and looked_at(cli, ok_id) == "running", timeout=5, what="the healthy run's heartbeat after the fault")
    wait_for(lambda: worker_beat() > faulted_at, timeout=5, what="the worker's heartbeat after the fault")
    grew_from = healthy_tick.stat().st_size
    wait_for(lambda: healthy_tick.stat().st_size > grew_from, timeout=5, what="the healthy agent to go on working")
    release(ledger.gates, "healthy")

    def ok_ended() -> bool:
        status = looked_at(cli, ok_id)
        assert status != "lost", "the healthy run read lost"
        return status not in ("queued", "running")

    wait_for(ok_ended, timeout=20, interval=0.1, what="the healthy run to end")
    done = job(cli.store_url, cli.workspace, ok_id)
    assert done.status == "completed", (done.status, done.error)
    assert json.loads(checkpoints(cli.store_url, cli.workspace, ok_id)[-1].state)["healthy"] is True
    assert worker.poll() is None, "the worker died"
    assert not ledger.living(_pids_in(ledger.root / "healthy.pids"))


def _pids_in(path: Path) -> list[tuple[int, str]]:
    return [(int(a), b) for a, b in (line.split() for line in path.read_text().splitlines())]


async def _scalar(conn, stmt):
    return (await conn.execute(stmt)).scalar_one()


def test_a_command_ended_for_the_lease_is_a_lapsed_lease_not_a_park_of_its_own(tmp_path: Path):
    """The supervisor ends an agent whose host did not renew the lease and exits 75, the status a
    command exits with when it parks at a boundary of its own. The host must hear which it was: a
    lapsed lease leaves the run lost (resumable); a park with no stop asked fails it.

    Used to: a command ended for the lease was read as parked, and with no stop asked the run
    failed for good, its work lost, though its host was only late (the race round, a loaded
    machine: the heartbeat landed after the supervisor's deadline)."""
    from swarmkit.runtime.agent_process import LineSink
    from swarmkit.runtime.agents import ProcessHooks, run_command
    from swarmkit.runtime.errors import LeaseLapsedError, NodeParked
    from swarmkit.runtime.flow import Agent

    lines: list[str] = []

    async def room() -> None:
        return None

    def hooks(lease_s: float) -> ProcessHooks:
        deadline = time.monotonic() + lease_s
        return ProcessHooks(
            lines=LineSink(lines.append, room, lambda: False, lambda _n, _b: None), note=lines.append,
            interrupt_grace=1.0, term_grace=1.0, fence_grace=0.2, lease_deadline=lambda: deadline,
            register=lambda _p: None, unregister=lambda _p: None,
        )

    async def go(command: str, lease_s: float) -> BaseException | None:
        try:
            await run_command(Agent(name="work", command=command), run_id="r" * 32, step=1, state={}, workspace=tmp_path, hooks=hooks(lease_s))
        except (LeaseLapsedError, NodeParked) as exc:
            return exc
        return None

    lapsed = asyncio.run(go("sleep 30", lease_s=0.5))
    assert isinstance(lapsed, LeaseLapsedError), f"ended for the lease, read as {lapsed!r}; lines: {lines}"
    assert any("did not renew its lease" in line for line in lines), lines
    parked = asyncio.run(go("echo '{\"half\": 1}' > \"$SWARMKIT_OUTPUT\"; exit 75", lease_s=30))
    assert isinstance(parked, NodeParked) and parked.partial == {"half": 1}, f"a park of its own, read as {parked!r}"
