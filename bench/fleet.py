"""Fleet: N `swarmkit worker` processes on one PostgreSQL, directly and through a PgBouncer in transaction mode.

    python bench/fleet.py [--workers 1,10,50] [--mode direct,pgbouncer] [--concurrency 3] [--runs 10]
                          [--agents 4] [--agent-s 0.2] [--stops 10] [--pg-url URL | --own-server] [--smoke]

For each mode and fleet size: a schema of its own (dropped afterwards), the
workers started and registered, then `--runs` runs a worker queued, each of
`--agents` command agents (`sleep AGENT_S` and `true` in turn), and
`--stops` of them stopped with control.stop while they run. One row each:

  runs/s       completed runs over the store's span, first submit to last end
  server conns peak of the server connections the fleet holds (pg_stat_activity,
               matched to the workers' sockets, or PgBouncer's), and of those not idle
  client conns through PgBouncer: peak of the workers' connections to it
  boundary p99 the workers' own figure (runtime/host_metrics.py BOUNDARY: each
               boundary's write transaction), every sample kept by the worker
  stop p99     stop_requested_at -> the run.stopped event, both on the store's clock
  lost/faulted runs that ended so (the goal is zero)

then how each figure grows with the fleet (its ratio to the smallest fleet,
1 worker by default). Figures only, no targets. The shared server is never
restarted; a direct case that would take most of its free connection slots
(PostgreSQL's default is 100) is skipped with the reason: `--own-server`
measures it on a PostgreSQL of the bench's own (tests/pg_instance.py).
Workers, PgBouncer and the schemas go at the end, on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _benchlib as B
import asyncpg
import throughput as T
from sqlalchemy import func, select

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.models import events, jobs, workers
from tests.pg_instance import PgInstance
from tests.pgbouncer_instance import PgBouncer

# The worker CLI, keeping every sample its host_metrics histograms observe (they keep only buckets),
# written to the file named before the verb when the worker exits.
RECORDING_WORKER = """
import atexit, json, sys
from swarmkit.runtime import host_metrics
path = sys.argv.pop(1)
kept = {"boundary": [], "stop_reaction": []}
for hist, into in ((host_metrics.BOUNDARY, kept["boundary"]), (host_metrics.STOP_REACTION, kept["stop_reaction"])):
    def observe(value, _observe=hist.observe, _into=into):
        _into.append(value)
        _observe(value)
    hist.observe = observe
atexit.register(lambda: open(path, "w").write(json.dumps(kept)))
from swarmkit.runtime.cli import main
sys.exit(main())
"""

ACTIVE = ("queued", "running")
# Free slots a direct case leaves the shared server's other users, at least.
SPARE_SLOTS = 15


@dataclass
class Row:
    mode: str
    workers: int
    runs: int = 0
    completed: int = 0
    rate: float = float("nan")
    server_peak: int = 0
    server_busy_peak: int = 0
    client_peak: int = 0
    waiting_peak: int = 0
    boundary: list[float] = field(default_factory=list)
    stop: list[float] = field(default_factory=list)
    stops_asked: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    warnings: int = 0
    examples: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def lost(self) -> int:
        return self.statuses.get("lost", 0)

    @property
    def faulted(self) -> int:
        return self.statuses.get("faulted", 0)


# --- who holds which connection -----------------------------------------------------


def _ports_to(pids: list[int], port: int) -> set[int]:
    """Local ports of the established TCP connections these processes hold to `port` (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.scandir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(fd.path)
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for text in lines:
            f = text.split()
            if f[3] == "01" and f[9] in inodes and int(f[2].rsplit(":", 1)[1], 16) == port:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


class Sampler:
    """Peaks of the connections a fleet holds, four times a second, until stopped."""

    def __init__(self, dsn: str, server_port: int, holders: list[int], clients: list[int], pgb: PgBouncer | None):
        self.dsn, self.server_port, self.holders, self.clients, self.pgb = dsn, server_port, holders, clients, pgb
        self.server = self.busy = self.client = self.waiting = 0

    async def run(self, done: asyncio.Event) -> None:
        conn = await asyncpg.connect(self.dsn, timeout=10)
        try:
            while not done.is_set():
                ports = sorted(_ports_to(self.holders, self.server_port))
                held, busy = await conn.fetchrow(
                    "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity WHERE client_port = ANY($1::int[])", ports
                )
                self.server, self.busy = max(self.server, held), max(self.busy, busy)
                if self.pgb is not None:
                    self.client = max(self.client, len(_ports_to(self.clients, self.pgb.port)))
                    pools = await asyncio.to_thread(self.pgb.admin, "SHOW POOLS")
                    self.waiting = max([self.waiting] + [int(p["cl_waiting"]) for p in pools if p["database"] == self.pgb.dbname])
                try:
                    await asyncio.wait_for(done.wait(), 0.25)
                except TimeoutError:
                    pass
        finally:
            await conn.close()


# --- one case ---------------------------------------------------------------------------


def _flow_file(ws: str, agents: int, agent_s: float) -> Path:
    path = Path(ws, "fleet.toml")
    path.write_text('name = "fleet"\n' + "".join(
        f'[[agents]]\nname = "a{i}"\ncommand = "{f"sleep {agent_s:g}" if i % 2 == 0 else "true"}"\n' for i in range(agents)
    ))
    return path


async def _registered(store: Store, load: T.Workload, n: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        async with store.read() as conn:
            seen = int(await conn.scalar(select(func.count()).select_from(workers).where(workers.c.stopped_at.is_(None))) or 0)
        if seen >= n:
            return
        dead = [i for i, p in enumerate(load.procs) if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            tail = load.logs[dead[0]].read_text(errors="replace")[-1500:] if dead else ""
            raise RuntimeError(f"{seen} of {n} workers registered; {len(dead)} exited{': ' + tail if tail else ''}")
        await asyncio.sleep(0.2)


async def _stopper(store: Store, flow_steps: int, stops: int, row: Row) -> None:
    """Stop `stops` running runs, one at a time, each at least one agent before its last (so a boundary follows)."""
    rng = random.Random(15)
    while row.stops_asked < stops:
        async with store.read() as conn:
            ids = list(await conn.scalars(select(jobs.c.id).where(
                jobs.c.status == "running", jobs.c.stop_requested_at.is_(None), jobs.c.step < flow_steps - 1
            ).limit(50)))
        if ids:
            res = await control.stop(store, rng.choice(ids), actor="bench")
            row.stops_asked += int(res.changed)
        await asyncio.sleep(0.1 + rng.uniform(0, 0.2))


async def _measure(store: Store, ws: str, args, row: Row, load: T.Workload, sampler: Sampler) -> None:
    await _registered(store, load, row.workers)
    flow = load_flow(_flow_file(ws, args.agents, args.agent_s))
    done = asyncio.Event()
    sampling = asyncio.create_task(sampler.run(done))
    stopping = asyncio.create_task(_stopper(store, flow.steps, args.stops, row))
    try:
        row.runs = row.workers * args.runs
        for _ in range(row.runs):
            await control.submit(store, flow, {}, actor="bench")
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            async with store.read() as conn:
                left = int(await conn.scalar(select(func.count()).select_from(jobs).where(jobs.c.status.in_(ACTIVE))) or 0)
            if not left:  # stops not asked by then found no run to stop: what was asked is the sample
                break
            await asyncio.sleep(0.25)
    finally:
        done.set()
        stopping.cancel()
        await asyncio.gather(sampling, stopping, return_exceptions=True)
    if sampling.exception() is not None:
        raise sampling.exception()  # type: ignore[misc]
    async with store.read() as conn:
        row.statuses = {s: int(n) for s, n in await conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status))}
        first, last = (await conn.execute(select(func.min(jobs.c.created_at), func.max(jobs.c.ended_at)).where(jobs.c.status == "completed"))).one()
        stopped = await conn.execute(
            select(jobs.c.stop_requested_at, func.min(events.c.at)).join(events, events.c.job_id == jobs.c.id)
            .where(events.c.kind == "run.stopped", jobs.c.stop_requested_at.is_not(None)).group_by(jobs.c.id, jobs.c.stop_requested_at)
        )
        row.stop = [(at - asked).total_seconds() * 1000 for asked, at in stopped]
    row.completed = row.statuses.get("completed", 0)
    if first is not None and last is not None and last > first:
        row.rate = row.completed / (last - first).total_seconds()
    row.server_peak, row.server_busy_peak, row.client_peak, row.waiting_peak = sampler.server, sampler.busy, sampler.client, sampler.waiting


async def _headroom(dsn: str) -> tuple[int, int]:
    """(connection slots free for ordinary users now, max_connections)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        most = int(await conn.fetchval("SHOW max_connections"))
        reserved = int(await conn.fetchval("SHOW superuser_reserved_connections"))
        used = int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"))
        return most - reserved - used, most
    finally:
        await conn.close()


def run_case(mode: str, n: int, args, server: Server, per_worker: float) -> Row:
    row = Row(mode, n)
    if mode == "direct" and not server.own and not args.force:
        free, most = asyncio.run(_headroom(server.dsn))
        need = int(n * per_worker + 0.999)
        if need > free - SPARE_SLOTS:
            row.skipped = (f"skipped: would hold ~{need} server connections ({per_worker:g} a worker) of the {free} free on the shared server "
                           f"(max_connections {most}), leaving its other users fewer than {SPARE_SLOTS}: --own-server measures it")
            return row
    with tempfile.TemporaryDirectory() as ws, B.store_url("pg", ws, server.base) as url:
        pgb = PgBouncer(server_port=server.port, dbname=server.dbname, user=server.user) if mode == "pgbouncer" else None
        try:
            if pgb is not None:
                pgb.start()
            schema = url.rsplit("schema=", 1)[1]
            load = T.Workload(pgb.url(schema) if pgb else url, ws)
            samples = [Path(ws, f"samples-{i}.json") for i in range(n)]

            async def case() -> None:
                # The bench's own connections go direct: they are not the fleet's.
                store = await Store.open(url, ws)
                try:
                    T.start_workers(load, workers=n, concurrency=args.concurrency, code=RECORDING_WORKER, head=lambda i: [str(samples[i])])
                    pids = [p.pid for p in load.procs]
                    sampler = Sampler(server.dsn, server.port, [pgb.proc.pid] if pgb and pgb.proc else pids, pids, pgb)
                    await _measure(store, ws, args, row, load, sampler)
                finally:
                    await store.close()

            try:
                asyncio.run(case())
            finally:
                T.stop_workload(load)
            for path in samples:
                if path.exists():
                    row.boundary += [v * 1000 for v in json.loads(path.read_text())["boundary"]]
            _, row.warnings, row.examples = T.store_errors(load)
        finally:
            if pgb is not None:
                pgb.stop()
    return row


# --- the server ------------------------------------------------------------------------------


@dataclass
class Server:
    base: str  # the store URL without a schema
    dsn: str  # the same for asyncpg
    port: int
    dbname: str
    user: str
    own: bool
    instance: PgInstance | None = None

    @classmethod
    def shared(cls, base: str) -> Server:
        from sqlalchemy.engine import make_url

        u = make_url(base)
        dsn = base.replace("postgresql+asyncpg://", "postgresql://").split("?")[0]
        return cls(base, dsn, u.port or 5432, u.database or "test", u.username or os.environ.get("USER", "root"), False)

    @classmethod
    def of_our_own(cls, max_connections: int) -> Server:
        inst = PgInstance().start()
        try:
            asyncio.run(_alter_system(inst.url, max_connections))
            inst.restart()
        except BaseException:
            inst.stop()
            raise
        return cls(inst.url, inst.url, inst.port, "postgres", "postgres", True, inst)

    def close(self) -> None:
        if self.instance is not None:
            self.instance.stop()


async def _alter_system(dsn: str, max_connections: int) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(f"ALTER SYSTEM SET max_connections = {int(max_connections)}")
    finally:
        await conn.close()


# --- the report ---------------------------------------------------------------------------------


def _f(value: float, width: int = 8, prec: int = 1) -> str:
    return f"{value:{width}.{prec}f}" if value == value else f"{'-':>{width}}"


def print_row(row: Row) -> None:
    if row.skipped:
        print(f"  {row.mode:<10}{row.workers:>7}   {row.skipped}", flush=True)
        return
    client = f"{row.client_peak:>7}" if row.mode == "pgbouncer" else f"{'-':>7}"
    print(f"  {row.mode:<10}{row.workers:>7}{row.completed:>6}/{row.runs:<5}{_f(row.rate)}{row.server_peak:>8} /{row.server_busy_peak:<4}{client}"
          f"{_f(B.pct(row.boundary, 99), 11)}{_f(B.pct(row.stop, 99), 10, 0)}{row.lost:>6}{row.faulted:>8}", flush=True)
    others = {s: k for s, k in sorted(row.statuses.items()) if s not in ("completed", "lost", "faulted")}
    print(f"  {'':<17}boundary p50 {B.med(row.boundary):.1f} ms max {max(row.boundary, default=float('nan')):.1f} (n={len(row.boundary)});"
          f" stop p50 {B.med(row.stop):.0f} ms max {max(row.stop, default=float('nan')):.0f} ({len(row.stop)} stopped of {row.stops_asked} asked);"
          f" server conns a worker {row.server_peak / row.workers if row.mode == 'direct' else float('nan'):.2f};"
          f" other ends {others}; clients waiting at PgBouncer peak {row.waiting_peak if row.mode == 'pgbouncer' else '-'};"
          f" warnings logged {row.warnings}", flush=True)
    for text in row.examples[:3]:
        print(f"  {'':<17}  {text}")


HEAD = (f"  {'mode':<10}{'workers':>7}{'completed':>11}{'runs/s':>8}{'server conns':>14}{'client':>7}"
        f"{'boundary':>11}{'stop':>10}{'lost':>6}{'faulted':>8}\n"
        f"  {'':<17}{'':>11}{'':>8}{'peak /busy':>14}{'conns':>7}{'p99 ms':>11}{'p99 ms':>10}")


def print_growth(rows: list[Row]) -> None:
    print("growth: each figure over the same figure for the smallest fleet of its mode (x1.0 = no growth)")
    print(f"  {'mode':<10}{'workers':>7}{'runs/s':>9}{'server conns':>14}{'client conns':>14}{'boundary p99':>14}{'stop p99':>10}")
    for mode in dict.fromkeys(r.mode for r in rows):
        ran = [r for r in rows if r.mode == mode and not r.skipped]
        if not ran:
            continue
        base = ran[0]

        def x(a: float, b: float) -> str:
            return f"x{a / b:.2f}" if b and a == a and b == b else "-"

        for r in ran:
            client = x(r.client_peak, base.client_peak) if mode == "pgbouncer" else "-"
            print(f"  {mode:<10}{r.workers:>7}{x(r.rate, base.rate):>9}{x(r.server_peak, base.server_peak):>14}{client:>14}"
                  f"{x(B.pct(r.boundary, 99), B.pct(base.boundary, 99)):>14}{x(B.pct(r.stop, 99), B.pct(base.stop, 99)):>10}")


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,10,50", help="fleet sizes, each run in turn (default 1,10,50: 50 workers, beside 1 and 10)")
    ap.add_argument("--mode", default="direct,pgbouncer", help="direct, pgbouncer or both (comma-separated)")
    ap.add_argument("--concurrency", type=int, default=3, help="runs each worker hosts at once")
    ap.add_argument("--runs", type=int, default=10, help="runs queued per worker")
    ap.add_argument("--agents", type=int, default=4, help="command agents a run: `sleep AGENT_S` and `true` in turn")
    ap.add_argument("--agent-s", type=float, default=0.2)
    ap.add_argument("--stops", type=int, default=10, help="running runs stopped in each case")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a case may take to end its runs")
    ap.add_argument("--pg-url", default=B.PG_DEFAULT, help="the shared server (a schema of its own per case)")
    ap.add_argument("--own-server", action="store_true", help="a PostgreSQL of the bench's own on a free port instead")
    ap.add_argument("--max-connections", type=int, default=200, help="its max_connections (with --own-server)")
    ap.add_argument("--force", action="store_true", help="run direct cases on the shared server even if they take its free slots")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.runs, args.stops = "1,2", 4, 1
    sizes = sorted({int(w) for w in args.workers.split(",")})
    modes = [m.strip() for m in args.mode.split(",")]
    # A TERM (a test's timeout, a CI cancel) cleans up as a Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupted)
    server = Server.of_our_own(args.max_connections) if args.own_server else Server.shared(args.pg_url)
    try:
        where = f"a PostgreSQL of its own (max_connections {args.max_connections})" if server.own else f"the shared PostgreSQL at {server.dsn}"
        B.header(f"fleet: {','.join(map(str, sizes))} workers x {args.concurrency} runs, {args.runs} runs a worker of {args.agents} agents"
                 f" (sleep {args.agent_s:g} / true), {args.stops} stops a case, on {where}; PgBouncer in transaction mode, pool 20")
        print(HEAD, flush=True)
        rows: list[Row] = []
        for mode in modes:
            per_worker = 3.0  # until the smallest fleet shows what a worker holds
            for n in sizes:
                try:
                    row = run_case(mode, n, args, server, per_worker)
                except RuntimeError as exc:
                    row = Row(mode, n, skipped=f"failed: {str(exc)[:600]}")
                if mode == "direct" and not row.skipped and row.server_peak:
                    per_worker = row.server_peak / n
                rows.append(row)
                print_row(row)
        print_growth(rows)
    finally:
        server.close()


if __name__ == "__main__":
    main()
