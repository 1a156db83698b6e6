"""Throughput: node boundaries a second across 16 `swarmkit worker` processes of near-instant agents.

    python bench/throughput.py [--store sqlite|pg|both] [--workers 16] [--concurrency 1]
                               [--agents 400] [--seconds 20] [--warmup 5] [--smoke]

Queues enough runs of `--agents` no-op `call` agents to keep every worker
busy, starts `--workers` real `swarmkit worker` processes on one store, and
counts node boundaries (checkpoint rows: one per node, written in the node's
one write transaction) once a second after `--warmup` seconds. Prints the
rate (total over the window, and the median and p1 of the one-second
windows), and the store errors the workers logged: "database is locked" /
busy (the target is zero), and any other warning. The machine's core count
bounds this: every boundary costs CPU in one of the worker processes.

`run_workload()` is also used by bench/wal.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import _benchlib as B
from sqlalchemy import func, select

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.models import checkpoints, jobs

SQLITE_TARGET = 1000.0
BUSY = re.compile(r"database is locked|database table is locked|SQLITE_BUSY|\bbusy\b", re.I)


@dataclass
class Workload:
    url: str
    ws: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    runs: int = 0


async def _queue(url: str, ws: str, agents: int, runs: int) -> None:
    Path(ws, "benchnoop.py").write_text("async def noop(ctx):\n    return None\n")
    flow_path = Path(ws, "noop.toml")
    flow_path.write_text('name = "noop"\n' + "".join(f'[[agents]]\nname = "n{i}"\ncall = "benchnoop:noop"\n' for i in range(agents)))
    flow = load_flow(flow_path)
    store = await Store.open(url, ws)
    try:
        for _ in range(runs):
            await control.submit(store, flow, {}, actor="bench")
    finally:
        await store.close()


WORKER_CODE = "import sys; from swarmkit.cli import main; sys.exit(main())"


def start_workload(url: str, ws: str, *, workers: int, concurrency: int, agents: int, runs: int) -> Workload:
    asyncio.run(_queue(url, ws, agents, runs))
    load = Workload(url, ws, runs=runs)
    start_workers(load, workers=workers, concurrency=concurrency)
    return load


def start_workers(load: Workload, *, workers: int, concurrency: int, code: str = WORKER_CODE,
                  head: Callable[[int], list[str]] = lambda i: []) -> None:
    """`workers` more `swarmkit worker` processes on the load's store, each in a session of its own
    (a Ctrl-C in the terminal reaches the bench, which ends them); `code` runs the CLI, given `head(i)`
    before the verb."""
    env = dict(os.environ, SWARMKIT_ACTOR="bench")
    env["PYTHONPATH"] = os.pathsep.join([str(B.ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for i in range(len(load.procs), len(load.procs) + workers):
        log = Path(load.ws, f"worker-{i}.log")
        load.logs.append(log)
        with open(log, "w") as out:
            load.procs.append(subprocess.Popen(
                [sys.executable, "-c", code, *head(i), "worker", "--store", load.url, "--concurrency", str(concurrency), load.ws],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))


def stop_workload(load: Workload) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        for p in load.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(p.poll() is None for p in load.procs):
            time.sleep(0.1)
        if all(p.poll() is not None for p in load.procs):
            return


def store_errors(load: Workload) -> tuple[int, int, list[str]]:
    """(busy errors, other warnings, a few example lines) from the workers' output."""
    busy = other = 0
    examples: list[str] = []
    for log in load.logs:
        for text in log.read_text(errors="replace").splitlines():
            if BUSY.search(text):
                busy += 1
                if len(examples) < 5:
                    examples.append(text.strip()[:200])
            elif "warning" in text.lower() or "error" in text.lower() or "Traceback" in text or "failed" in text:
                other += 1
                if len(examples) < 5:
                    examples.append(text.strip()[:200])
    return busy, other, examples


def _cpu_times() -> tuple[float, float]:
    """(all, idle) jiffies of the machine, from /proc/stat."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0.0)


def _proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds a process used so far (its threads included; with `children`, those of its children it waited for)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15 if children else 13]) / os.sysconf("SC_CLK_TCK")


class Counter:
    """Node boundaries so far: the newest checkpoint id (one row a node; an index lookup, not a count)."""

    def __init__(self, url: str, ws: str):
        self.url, self.ws = url, ws
        self.store: Store | None = None

    async def open(self) -> None:
        self.store = await Store.open(self.url, self.ws)

    async def boundaries(self) -> int:
        assert self.store is not None
        async with self.store.read() as conn:
            return int(await conn.scalar(select(func.max(checkpoints.c.id))) or 0)

    async def statuses(self) -> dict[str, int]:
        assert self.store is not None
        async with self.store.read() as conn:
            return {s: int(n) for s, n in await conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status))}

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()


async def measure(url: str, ws: str, warmup: float, seconds: float, tick: Callable[[], None] | None = None,
                  cpu: Callable[[], float] | None = None) -> tuple[float, list[float], dict[str, int], float]:
    """Rate over the window, the one-second rates, statuses at the end, and CPUs used (by `cpu()`) over the window."""
    counter = Counter(url, ws)
    await counter.open()
    try:
        await asyncio.sleep(warmup)
        cpu_first = cpu() if cpu else 0.0
        first = last = await counter.boundaries()
        t_first = t_last = time.perf_counter()
        windows: list[float] = []
        while time.perf_counter() - t_first < seconds:
            await asyncio.sleep(1.0)
            n, t = await counter.boundaries(), time.perf_counter()
            windows.append((n - last) / (t - t_last))
            last, t_last = n, t
            if tick:
                tick()
        rate = (last - first) / (t_last - t_first)
        cpus = ((cpu() if cpu else 0.0) - cpu_first) / (t_last - t_first)
        return rate, windows, await counter.statuses(), cpus
    finally:
        await counter.close()


def run_case(kind: str, args) -> None:
    with tempfile.TemporaryDirectory() as ws, B.store_url(kind, ws, args.pg_url) as url:
        runs = args.workers * args.concurrency * args.runs_per_slot
        load = start_workload(url, ws, workers=args.workers, concurrency=args.concurrency, agents=args.agents, runs=runs)
        try:
            cpu0 = _cpu_times()
            rate, windows, statuses, worker_cpus = asyncio.run(
                measure(url, ws, args.warmup, args.seconds, cpu=lambda: sum(_proc_cpu(p.pid) for p in load.procs))
            )
            cpu1 = _cpu_times()
        finally:
            stop_workload(load)
        busy_cpu = 1.0 - (cpu1[1] - cpu0[1]) / max(1e-9, cpu1[0] - cpu0[0])
        busy, other, examples = store_errors(load)
        name = "SQLite (WAL)" if kind == "sqlite" else "PostgreSQL"
        print(f"{name}: {args.workers} workers x {args.concurrency} runs, {args.agents} no-op agents a run, {args.seconds:.0f} s after {args.warmup:.0f} s warm-up")
        target = f">= {SQLITE_TARGET:.0f}/s" if kind == "sqlite" else None
        out = f"  node boundaries/s over the window: {rate:8.1f}   (1 s windows: p50 {B.med(windows):.1f}, p1 {B.pct(windows, 1):.1f}, max {max(windows) if windows else 0:.1f})"
        if target:
            out += f"   target {target}  {B.verdict(rate >= SQLITE_TARGET)}"
        print(out)
        print(f"  busy / 'database is locked' errors logged: {busy}   target 0  {B.verdict(busy == 0)};  other warnings: {other}")
        for text in examples:
            print(f"    {text}")
        print(f"  runs by status at the end: {dict(sorted(statuses.items()))}")
        if not statuses.get("queued") and not statuses.get("running"):
            print("  WARNING: the queue ran dry before the window ended, so the rate above is too low: raise --runs-per-slot")
        print(f"  CPU: the machine's {os.cpu_count()} CPUs {busy_cpu * 100:.0f}% busy (every process on it counted); the workers used"
              f" {worker_cpus:.2f} CPUs over the window: {worker_cpus / rate * 1000 if rate else float('nan'):.2f} ms of CPU a boundary")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", choices=["sqlite", "pg", "both"], default="both")
    ap.add_argument("--pg-url", default=B.PG_DEFAULT)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=1, help="runs each worker hosts at once")
    ap.add_argument("--agents", type=int, default=400, help="no-op agents a run")
    ap.add_argument("--runs-per-slot", type=int, default=12, help="runs queued per worker slot (so none runs dry)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.agents, args.runs_per_slot, args.seconds, args.warmup = 2, 30, 1, 2.0, 1.0
        args.store = "sqlite"
    B.header(f"throughput: {args.workers} worker processes")
    for kind in (["sqlite", "pg"] if args.store == "both" else [args.store]):
        run_case(kind, args)


if __name__ == "__main__":
    main()
