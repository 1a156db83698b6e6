"""Contention on one SQLite store: 16 writer processes for a sustained period, the console open throughout.

Six `swarmkit worker` processes host runs of 40 near-instant agents (one write
transaction per node, heartbeats, log lines) while ten writer processes queue
runs and stop, resume, cancel and approve them flat out. The interactive
console runs on a real pty the whole time, polling. Nobody may see "database
is locked", nothing may fault, and the WAL must stay bounded (its largest size
is printed). CI runs ~12 s of writes; SWARMKIT_STRESS_SCALE=N runs N times longer.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.reliability import (
    console_argv,
    env_for_children,
    integrity_check,
    scale,
    snapshot,
    sqlite_path,
    swarmkit_argv,
    wal_size,
)
from tests.stress.flows import make_flows

WAL_BOUND = 64 * 1024 * 1024


class PtyReader:
    """A process on a real pty whose output is drained all the time (a terminal that keeps up)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]):
        import fcntl
        import struct
        import termios

        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.out = bytearray()
        self._stop = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self._stop:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return
                if not data:
                    return
                self.out.extend(data)

    def quit(self, keys: bytes = b"q", timeout: float = 30) -> int | None:
        try:
            os.write(self.master, keys)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None
        finally:
            self._stop = True
            self.thread.join(timeout=5)
            os.close(self.master)
        return self.proc.returncode

    def close_terminal(self, timeout: float = 30) -> int | None:
        """Close the terminal's side, as a terminal window closing does, and wait for the process to end; None if it does not."""
        self._stop = True
        self.thread.join(timeout=5)
        os.close(self.master)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None


def test_sixteen_writers_and_the_console_on_one_sqlite_store(sqlite_url: str, workspace: Path, tmp_path: Path):
    seconds = 12 * scale()
    flows = make_flows(tmp_path / "flows", tmp_path / "ledger")
    # A lease long enough that sixteen writers' lock waits measure contention,
    # not a host ending its own agents over a heartbeat a second late.
    env = env_for_children({"SWARMKIT_LEASE": "6"})
    db = sqlite_path(sqlite_url)
    logs = tmp_path / "logs"
    logs.mkdir()
    # Create the store once, then everyone opens it.
    subprocess.run(swarmkit_argv("db", sqlite_url, "upgrade", str(workspace)), cwd=workspace, env=env, check=True, capture_output=True, timeout=60)
    console = PtyReader(console_argv(sqlite_url, str(workspace)), workspace, dict(env, TERM="xterm-256color"))
    procs: list[tuple[str, subprocess.Popen]] = []

    def spawn(name: str, argv: list[str]) -> None:
        with open(logs / f"{name}.out", "wb") as o, open(logs / f"{name}.err", "wb") as e:
            procs.append((name, subprocess.Popen(argv, cwd=workspace, env=env, stdout=o, stderr=e, start_new_session=True)))

    for i in range(6):
        spawn(f"worker{i}", swarmkit_argv("worker", sqlite_url, "--concurrency", "3", str(workspace)))
    for i in range(10):
        spawn(
            f"writer{i}",
            [sys.executable, "-m", "tests.stress.writer", "--store", sqlite_url, "--workspace", str(workspace), "--seconds", str(seconds),
             "--seed", str(i), "--name", f"writer{i}", "--max-runs", str(int(40 * scale())), "--flow", str(flows["marathon"].path), "--flow", str(flows["quick"].path)],
        )
    wal_max = 0
    samples = 0
    t0 = time.monotonic()
    try:
        while any(name.startswith("writer") and p.poll() is None for name, p in procs):
            wal_max = max(wal_max, wal_size(db))
            samples += 1
            assert console.proc.poll() is None, f"the console died under contention: {bytes(console.out[-2000:])!r}"
            if time.monotonic() - t0 > seconds + 120:
                raise AssertionError("the writers did not finish")
            time.sleep(0.2)
        wal_during = wal_max
        # Let the workers settle what is in flight for a moment, then drain them (SIGTERM stops their runs).
        # Not a wait for a condition: the WAL's bound must hold across this window of the workers' own
        # writes too (sampled once more after it), however far they get in it.
        time.sleep(2)
        wal_max = max(wal_max, wal_size(db))
    finally:
        for name, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        console_code = console.quit()
    took = time.monotonic() - t0
    outputs = {name: (logs / f"{name}.out").read_text(errors="replace") + (logs / f"{name}.err").read_text(errors="replace") for name, _ in procs}
    outputs["console"] = bytes(console.out).decode("utf-8", errors="replace")
    locked = {n: o.count("database is locked") for n, o in outputs.items() if "database is locked" in o}
    tracebacks = {n: o[o.index("Traceback"):][:1500] for n, o in outputs.items() if "Traceback" in o}
    totals: dict[str, int] = {}
    errors: dict[str, int] = {}
    for name, _ in procs:
        if name.startswith("writer"):
            last = [l for l in (logs / f"{name}.out").read_text().splitlines() if l.startswith("{")]
            assert last, f"{name} printed no summary: {outputs[name][-1500:]}"
            rec = json.loads(last[-1])
            for k, v in rec["counts"].items():
                totals[k] = totals.get(k, 0) + v
            for k, v in rec["errors"].items():
                errors[k] = errors.get(k, 0) + v
    snap = snapshot(sqlite_url, workspace)
    by_status: dict[str, int] = {}
    for j in snap["jobs"].values():
        by_status[j.status] = by_status.get(j.status, 0) + 1
    nodes = sum(max(0, len(c) - 1) for c in snap["checkpoints"].values())
    warnings = {n: sum(1 for l in o.splitlines() if "failed" in l and "swarmkit:" in l) for n, o in outputs.items() if n.startswith("worker")}
    report = (
        f"16 writers (6 workers x3, 10 act loops) for {took:.0f}s with the console open: acts {totals}; "
        f"runs {by_status}; nodes checkpointed {nodes}; WAL largest {wal_max / 1024:.0f} KiB "
        f"(during the writes {wal_during / 1024:.0f} KiB, {samples} samples); worker warnings {warnings}"
    )
    print("\n" + report)
    assert not locked, f"'database is locked' reached someone: {locked}\n{report}"
    assert not tracebacks, f"tracebacks: {tracebacks}"
    assert not errors, f"act loops raised: {errors}\n{report}"
    assert console_code == 0, f"the console did not quit cleanly (exit {console_code})"
    assert by_status.get("faulted", 0) == 0, [(j.id[:8], j.error) for j in snap["jobs"].values() if j.status == "faulted"]
    # A third of the agents are sync `call` agents, each a process of its own
    # (so that a cancel can end it): fewer nodes a second than in-process ones.
    # That the writers really raced, not how fast: a loaded 2-CPU machine checkpointed 88 in the window once.
    assert totals.get("submit", 0) > 50 and nodes > 40, report
    assert wal_max < WAL_BOUND, report
    assert integrity_check(db) == "ok"
