"""Shared test helpers that read the store the way an operator's tools do."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit.store import Store
from swarmkit.store.queries import audit_for, checkpoints_for, events_after, get_job, jobs_by_prefix, workspaces_for

ROOT = Path(__file__).resolve().parents[1]
PG_BASE = os.environ.get("SWARMKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# Fast timings so that heartbeats, polls and cancels happen within a test. The lease is roomy: a test's host
# that is not about leases must not fence itself because the suite's own load (four test processes and their
# children on two CPUs) stretched its heartbeats past a short lease; with 2 s it did, a few times a CI run,
# in tests of console keys, resumes and full disks. Tests about leases and loss are marked `short_lease`
# (tests/conftest.py) and their hosts get SHORT_LEASE instead.
FAST_ENV = {
    "SWARMKIT_HEARTBEAT": "0.5",
    "SWARMKIT_LEASE": "15",
    "SWARMKIT_INTERRUPT_GRACE": "1",
    "SWARMKIT_TERM_GRACE": "1",
    "SWARMKIT_POLL": "0.1",
    "SWARMKIT_ACTOR": "tester@ci",
}
SHORT_LEASE = {"SWARMKIT_HEARTBEAT": "0.2", "SWARMKIT_LEASE": "2"}
_lease_env: dict[str, str] = {}


def use_short_lease(short: bool) -> None:
    """Set by conftest for each test, from its `short_lease` mark."""
    _lease_env.clear()
    if short:
        _lease_env.update(SHORT_LEASE)


def timing_env() -> dict[str, str]:
    """The timings a test's hosts run with: FAST_ENV, with SHORT_LEASE for a test marked `short_lease`."""
    return {**FAST_ENV, **_lease_env}


# A test bounds a wait by wall clock only where the contract sets a deadline, and then at three times
# that period or more (a loaded CI machine must not make it cry wolf); the rest wait on conditions.
# LEASE_S is the lease of a `short_lease` test's hosts.
LEASE_S = float(SHORT_LEASE["SWARMKIT_LEASE"])
# For a run hosted with a lease of its own: room for a loaded machine (four test processes beside
# two CPU hogs stretched heartbeats to 3.9 s and a write to PostgreSQL past 0.8 s, and the 2 s lease lapsed).
ROOMY_LEASE = {"SWARMKIT_LEASE": "15", "SWARMKIT_HEARTBEAT": "0.5"}
# The lease: a run whose host died (or stopped heart-beating) reads lost once SWARMKIT_LEASE has passed.
LOST_WITHIN_S = 4 * LEASE_S
# A cancel: SIGINT, SWARMKIT_INTERRUPT_GRACE, SIGTERM, SWARMKIT_TERM_GRACE, SIGKILL; then the run is cancelled.
GRACES_S = float(FAST_ENV["SWARMKIT_INTERRUPT_GRACE"]) + float(FAST_ENV["SWARMKIT_TERM_GRACE"])
CANCELLED_WITHIN_S = 5 * GRACES_S


def need(ok: object, why: str) -> None:
    """A test that needs a tool or a capability this machine may lack (`ok` falsy: it lacks it).

    Skipped, saying `why`, on a developer's machine; under CI (the env var CI set) a failure:
    .ci/run installs everything the suite needs, so a skip there is a test that silently never ran.
    The one rule for every such skip (PostgreSQL, PgBouncer, zsh, fish, libfaketime, mounts, ...).
    """
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}", pytrace=False)
        pytest.skip(why)


# How far apart the looks of a long wait grow: most predicates open the store (`job`, `events`), and
# twenty looks a second through a wait of seconds, on four test processes, spent much of the suite's
# CPU (the suite is CPU-bound on two CPUs): a condition that comes quickly is still seen quickly.
_LOOK_GROWTH, _LOOK_MOST_S = 1.5, 0.25


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Until `predicate()` holds (its value), looking first after `interval`, then further apart, up to a
    quarter second (or `interval`, if longer); an AssertionError naming `what` past `timeout`."""
    deadline = time.monotonic() + timeout
    most = max(interval, _LOOK_MOST_S)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
        interval = min(most, interval * _LOOK_GROWTH)


def read(store_url: str, workspace: Path, fn) -> Any:
    """Open the store in a fresh loop, run `fn(conn)`, close it: a quick look from outside.

    On PostgreSQL the look skips the schema check (`migrate=False`, as reliability.sql does): tests
    poll with these looks every 50 ms, and the check cost more than the rest of the look (about 20 ms
    of the server's CPU and 6 ms of this process's, each time, beside 15 ms for the rest). Where the
    look without it fails (a schema not made yet, or any other fault), it is made again as before,
    schema check and all, and that one's answer (or error) is the look's.
    """

    async def look(migrate: bool):
        store = await Store.open(store_url, workspace, migrate=migrate)
        try:
            async with store.read() as conn:
                return await fn(conn)
        finally:
            await store.close()

    async def go():
        if store_url.startswith("postgres"):
            try:
                return await look(migrate=False)
            except Exception:
                pass  # the look as before, below, says what is wrong (or makes the schema, as it did)
        return await look(migrate=True)

    return asyncio.run(go())


def job(store_url: str, workspace: Path, ref: str):
    async def fn(conn):
        if len(ref) == 32:
            return await conn.run_sync(get_job, ref)
        found = await conn.run_sync(jobs_by_prefix, ref)
        return found[0] if len(found) == 1 else None

    return read(store_url, workspace, fn)


def events(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(events_after, job_id, 0, limit=100000))


def audit(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(audit_for, job_id))


def checkpoints(store_url: str, workspace: Path, job_id: str):
    return read(store_url, workspace, lambda c: c.run_sync(checkpoints_for, job_id))


def workspaces(store_url: str, workspace: Path, job_id: str):
    async def fn(conn):
        return (await conn.run_sync(workspaces_for, [job_id]))[job_id]

    return read(store_url, workspace, fn)


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every live process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces.
        yield int(entry), stat[stat.rfind(")") + 2 :].split()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def processes_naming(text: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `text` (an agent's command names its gate file)."""
    found = []
    for pid, fields in proc_stats():
        if fields[0] == "Z" or pid == os.getpid():
            continue
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid and fields[0] != "Z"]


# --- a hang is never silent -------------------------------------------------------------------
# Before a test kills a child that overstayed, it says what the child was doing: /proc's State and
# wchan of it, its threads and its descendants, and its Python stack (py-spy where installed; else
# SIGABRT, which faulthandler turns into every thread's stack on the child's stderr, since
# child_env sets PYTHONFAULTHANDLER=1).

PY_SPY = shutil.which("py-spy") or next((str(p) for p in (Path(sys.executable).with_name("py-spy"),) if p.exists()), None)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, theirs, ...), by /proc's parent links."""
    children: dict[int, list[int]] = {}
    for p, fields in proc_stats():
        children.setdefault(int(fields[1]), []).append(p)
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def _proc_line(pid: int) -> str | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        state = next((line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("State:")), "?")
        threads = []
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            try:
                threads.append(f"{tid}:{Path(f'/proc/{pid}/task/{tid}/wchan').read_text() or '0'}")
            except OSError:
                pass
    except OSError:
        return None  # gone meanwhile
    return f"pid {pid} State: {state}; wchan per thread: {' '.join(threads)}; signals {_signal_masks(status)}; {cmd[:300]}"


def _signal_masks(status: str) -> str:
    # A child that ignores or blocks the signal a test sends it waits for ever (SIGINT ignored is inherited
    # from a shell that started pytest in the background): say so beside its state.
    fields = {k: int(v.strip() or "0", 16) for k, v in (line.split(":", 1) for line in status.splitlines() if line.startswith(("SigIgn:", "SigBlk:", "SigPnd:", "ShdPnd:")))}
    said = []
    for word, mask in (("ignored", fields.get("SigIgn", 0)), ("blocked", fields.get("SigBlk", 0)), ("pending", fields.get("SigPnd", 0) | fields.get("ShdPnd", 0))):
        names = [sig.name for sig in signal.Signals if mask >> (sig - 1) & 1]
        if names:
            said.append(f"{word} {','.join(names)}")
    return "; ".join(said) or "none ignored, blocked or pending"


def process_state(pid: int) -> str:
    """/proc's word on `pid` and each of its descendants: State, each thread's wchan, command line."""
    lines = [line for p in [pid, *descendants(pid)] if (line := _proc_line(p))]
    return "\n".join(lines) or f"pid {pid}: gone"


def _is_python(pid: int) -> bool:
    try:
        return b"python" in Path(f"/proc/{pid}/cmdline").read_bytes()[:300]
    except OSError:
        return False


def python_stack(pid: int, timeout: float = 30) -> str | None:
    """`py-spy dump` of a live process (paused a moment, not ended); None without py-spy, or where it may not trace."""
    if PY_SPY is None:
        return None
    try:
        ran = subprocess.run([PY_SPY, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return ran.stdout if ran.returncode == 0 and ran.stdout.strip() else None


ABORTED = "--- no py-spy stack: sent it SIGABRT; faulthandler (PYTHONFAULTHANDLER=1) writes every thread's stack on its stderr"


def stuck_report(pid: int, what: str, abort: bool = False) -> str:
    """What a child that overstayed is doing, said before anyone kills it.

    `abort`: the caller is about to kill it anyway, so where py-spy gave no stack, SIGABRT it: with
    PYTHONFAULTHANDLER=1 (child_env) it prints every thread's Python stack on its stderr as it dies.
    """
    parts = [f"--- {what} (pid {pid}) overstayed its time; /proc says:", process_state(pid)]
    stack = python_stack(pid)
    if stack:
        parts += ["--- its Python stack (py-spy dump):", stack.rstrip()]
    for child in [c for c in descendants(pid) if _is_python(c)][:8]:
        child_stack = python_stack(child, timeout=10)
        if child_stack:
            parts += [f"--- the Python stack of its descendant {child} (py-spy dump):", child_stack.rstrip()]
    if not stack and abort:
        try:
            os.kill(pid, signal.SIGABRT)
            parts.append(ABORTED)
        except ProcessLookupError:
            pass
    return "\n".join(parts)


class Stuck(subprocess.TimeoutExpired):
    """A TimeoutExpired (so callers that catch one still do) that says what the child was doing."""

    def __init__(self, cmd: Any, timeout: float, output: Any, stderr: Any, report: str):
        super().__init__(cmd, timeout, output, stderr)
        self.report = report

    def __str__(self) -> str:
        err = self.stderr.decode(errors="replace") if isinstance(self.stderr, bytes) else (self.stderr or "")
        return f"{super().__str__()}\n{self.report}\n--- its stderr (the end):\n{err[-8000:]}"


def run_child(argv: list[str], timeout: float, what: str | None = None, **kw: Any) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw), except that a child
    that overstays is not killed in silence: Stuck says what it was doing (see overstayed)."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw) as child:
        try:
            out, errs = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise overstayed(child, timeout, what or " ".join(map(str, argv))) from None
        except BaseException:  # as subprocess.run does (a ^C, a pytest-timeout in signal mode)
            child.kill()
            raise
    return subprocess.CompletedProcess(argv, child.returncode, out, errs)


def overstayed(proc: subprocess.Popen, timeout: float, what: str) -> Stuck:
    """`proc` did not end within `timeout`: say what it is doing (stuck_report), end it, and return
    the exception to raise, whose message holds the report and the stacks it printed."""
    report = stuck_report(proc.pid, what, abort=True)
    if ABORTED not in report:
        proc.kill()  # py-spy had its stack: nothing to wait for
    out: Any = None
    err: Any = None
    try:
        out, err = proc.communicate(timeout=10)  # SIGABRT ends it once faulthandler has written
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a descendant holds its pipes open
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
            proc.wait()
    return Stuck(proc.args, timeout, out, err, report)
