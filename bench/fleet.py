"""Fleet: N `swarmkit worker` processes on one PostgreSQL, directly and through a PgBouncer in transaction mode.

    python bench/fleet.py [--workers 1,10,50] [--mode direct,pgbouncer] [--concurrency 3] [--runs 3]
                          [--min-runs 12] [--pace RUNS_PER_S] [--agents 3] [--agent-s 0.2] [--stop-share 0.1]
                          [--pg-url URL | --own-server] [--json PATH] [--smoke]

For each mode and fleet size: a schema of its own (dropped afterwards), the
workers started and registered, then `--runs` runs a worker queued (at least
`--min-runs`), each of `--agents` command agents (`sleep AGENT_S` and `true`
in turn), and `--stop-share` of them stopped with control.stop while they
run. With `--pace`, the runs are queued one by one at that rate once the fleet is up
instead (`--runs 0 --min-runs 60 --pace 2`: 60 runs at every size): a fleet mostly idle,
woken run by run, where what grows with it is the idle workers' cost and not 150 runs
at once on the machine's CPUs. `--idle-s S` (with `--pace`) first watches the fleet idle for
S seconds, before any run, and says each worker's own CPU a second (left out of the
runs' figures). One row each:

  runs/s       completed runs over the store's span, first claim to last end
  server conns peak of the server connections the fleet holds (pg_stat_activity,
               matched to the workers' sockets, or PgBouncer's), and of those not idle
  client conns through PgBouncer: peak of the workers' connections to it
  boundary p99 the workers' own figure (runtime/host_metrics.py BOUNDARY: each
               boundary's write transaction), every sample kept by the worker
  stop p99     stop_requested_at -> the run.stopped event, both on the store's clock
  lost/faulted runs that ended so (the goal is zero)

and below it the workers' CPU a run (their agents' included: on a 2-core
machine the fleet is CPU-bound, and its polling grows with its size), and the
same without each worker's start-up (its CPU from the gate to its row
registered: the imports the store's engine loads, connecting, the schema
check), which a worker pays once and a fleet of 50 hosting 3 runs each
spreads over 3 runs, not 12. Then
how each figure grows with the fleet (its ratio to the smallest fleet, 1
worker by default). Figures only, no targets. The shared server is never
restarted; a direct case that would take most of its free connection slots
(PostgreSQL's default is 100) is skipped with the reason: `--own-server`
measures it on a PostgreSQL of the bench's own (tests/pg_instance.py).
Workers, PgBouncer and the schemas go at the end, on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import _benchlib as B
import throughput as T
from _fleet_server import Sampler, Server, headroom
from sqlalchemy import func, select

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.models import events, jobs, workers
from tests.pgbouncer_instance import PgBouncer

# The worker CLI, keeping every sample its host_metrics.BOUNDARY observes (it keeps only buckets),
# written to the file named before the verb when the worker exits. It imports what a worker needs, says
# so (PATH.ready) and waits for the gate file before it opens the store: fifty workers starting take
# tens of seconds of CPU, and the first ones up would have the queue to themselves meanwhile.
RECORDING_WORKER = """
import atexit, json, os, sys, time
from swarmkit.runtime import host_metrics
import swarmkit.cli.worker, swarmkit.runtime.worker, sqlalchemy.dialects.postgresql.asyncpg
path, gate = sys.argv.pop(1), sys.argv.pop(1)
kept = []
observe = host_metrics.BOUNDARY.observe
def keep(value):
    kept.append(value)
    observe(value)
host_metrics.BOUNDARY.observe = keep
atexit.register(lambda: open(path, "w").write(json.dumps(kept)))
open(path + ".ready", "w").close()
while not os.path.exists(gate):
    time.sleep(0.05)
# The worker's own CPU from the gate to its row registered (its start-up), said beside the rest.
gated = time.process_time()
import swarmkit.runtime.worker as w
register = w.Worker._register
async def registered(self):
    await register(self)
    open(path + ".up", "w").write(str(time.process_time() - gated))
w.Worker._register = registered
from swarmkit.cli import main
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
    submit_s: float = float("nan")
    span_s: float = float("nan")
    up_s: float = float("nan")
    cpu_s: float = float("nan")
    own_cpu_s: float = float("nan")
    start_cpu_s: float = float("nan")
    samples: list[str] = field(default_factory=list)
    idle_ms: list[float] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    @property
    def cpu_per_run(self) -> float:
        """The workers' CPU (their agents' included) from the gate to the last run's end, a run ended."""
        return self.cpu_s / self.ended

    @property
    def ended(self) -> int:
        return max(1, self.completed + len(self.stop))

    @property
    def lost(self) -> int:
        return self.statuses.get("lost", 0)

    @property
    def faulted(self) -> int:
        return self.statuses.get("faulted", 0)


# --- one case ---------------------------------------------------------------------------


def _flow_file(ws: str, agents: int, agent_s: float) -> Path:
    path = Path(ws, "fleet.toml")
    path.write_text('name = "fleet"\n' + "".join(
        f'[[agents]]\nname = "a{i}"\ncommand = "{f"sleep {agent_s:g}" if i % 2 == 0 else "true"}"\n' for i in range(agents)
    ))
    return path


async def _until_all(load: T.Workload, count: Callable[[], Awaitable[int]], what: str, timeout: float = 180.0) -> None:
    """Until `count()` reaches the fleet's size; an error naming the first worker that exited meanwhile."""
    n = len(load.procs)
    deadline = time.monotonic() + timeout
    while True:
        seen = await count()
        if seen >= n:
            return
        dead = [i for i, p in enumerate(load.procs) if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            tail = load.logs[dead[0]].read_text(errors="replace")[-1500:] if dead else ""
            raise RuntimeError(f"{seen} of {n} workers {what}; {len(dead)} exited{': ' + tail if tail else ''}")
        await asyncio.sleep(0.1)


async def _feed(store: Store, flow, runs: int, pace: float) -> None:
    """`runs` runs queued at `pace` a second: each wakes the idle fleet, which is what is measured."""
    t0 = time.monotonic()
    for i in range(runs):
        await control.submit(store, flow, {}, actor="bench")
        await asyncio.sleep(max(0.0, t0 + (i + 1) / pace - time.monotonic()))


def _fleet_cpu(load: T.Workload, children: bool = True) -> float:
    return sum(T._proc_cpu(p.pid, children=children) for p in load.procs)


async def _registered(store: Store) -> int:
    async with store.read() as conn:
        return int(await conn.scalar(select(func.count()).select_from(workers).where(workers.c.stopped_at.is_(None))) or 0)


async def _stopper(store: Store, flow_steps: int, stops: int, row: Row) -> None:
    """Stop `stops` running runs, one at a time, each in its first agents (so a boundary follows even if
    the bench, starved of CPU, acts a few seconds after it looked)."""
    rng = random.Random(15)
    while row.stops_asked < stops:
        async with store.read() as conn:
            ids = list(await conn.scalars(select(jobs.c.id).where(
                jobs.c.status == "running", jobs.c.stop_requested_at.is_(None), jobs.c.step < max(1, flow_steps - 2)
            ).limit(50)))
        if ids:
            res = await control.stop(store, rng.choice(ids), actor="bench")
            row.stops_asked += int(res.changed)
        await asyncio.sleep(rng.uniform(0.05, 0.15))


async def _measure(store: Store, ws: str, args, row: Row, sampler: Sampler, load: T.Workload, gate: Path) -> None:
    flow = load_flow(_flow_file(ws, args.agents, args.agent_s))
    row.runs = max(row.workers * args.runs, args.min_runs)
    # Queued while the workers import, before the gate opens: the bench, beside fifty busy
    # workers, would get a fiftieth of the CPUs, and its submitting would set the rate.
    # Paced, they come one by one once the fleet is up, as an operator's runs do.
    t0 = time.monotonic()
    for i in range(0, 0 if args.pace else row.runs, 8):
        await asyncio.gather(*[control.submit(store, flow, {}, actor="bench") for _ in range(min(8, row.runs - i))])
    row.submit_s = time.monotonic() - t0
    feeding: asyncio.Task | None = None
    done = asyncio.Event()
    sampling = asyncio.create_task(sampler.run(done))
    stopping: asyncio.Task | None = None
    try:
        ready = [Path(f"{p}.ready") for p in row.samples]

        async def imported() -> int:
            return sum(p.exists() for p in ready)

        await _until_all(load, imported, "ready")
        gate.touch()
        cpu0, own0 = _fleet_cpu(load), _fleet_cpu(load, children=False)
        stopping = asyncio.create_task(_stopper(store, flow.steps, max(1, round(row.runs * args.stop_share)), row))
        await _until_all(load, lambda: _registered(store), "registered")
        if args.idle_s:
            # The fleet idle before any run (paced: none is queued yet): each worker's own CPU a second.
            await asyncio.sleep(3.0)
            before = [T._proc_cpu(p.pid, children=False) for p in load.procs]
            await asyncio.sleep(args.idle_s)
            after = [T._proc_cpu(p.pid, children=False) for p in load.procs]
            row.idle_ms = sorted((b - a) / args.idle_s * 1000 for a, b in zip(before, after))
        if args.pace:
            feeding = asyncio.create_task(_feed(store, flow, row.runs, args.pace))
        deadline = time.monotonic() + args.timeout + (row.runs / args.pace if args.pace else 0)
        while time.monotonic() < deadline:
            async with store.read() as conn:
                left = int(await conn.scalar(select(func.count()).select_from(jobs).where(jobs.c.status.in_(ACTIVE))) or 0)
            if not left and (feeding is None or feeding.done()):  # stops not asked by then found no run to stop: what was asked is the sample
                break
            await asyncio.sleep(0.25)
        # Before the workers exit: their agents (supervisor and command) are counted as each ends.
        row.cpu_s, row.own_cpu_s = _fleet_cpu(load) - cpu0, _fleet_cpu(load, children=False) - own0
        # The idle window measured apart is not the runs' CPU.
        idle_cpu_s = sum(row.idle_ms) / 1000 * args.idle_s
        row.cpu_s, row.own_cpu_s = row.cpu_s - idle_cpu_s, row.own_cpu_s - idle_cpu_s
    finally:
        done.set()
        for task in (stopping, feeding):
            if task is not None:
                task.cancel()
        await asyncio.gather(sampling, *[t for t in (stopping, feeding) if t is not None], return_exceptions=True)
    if not sampling.cancelled() and sampling.exception() is not None:
        raise RuntimeError(f"sampling failed: {sampling.exception()!r}")
    async with store.read() as conn:
        row.statuses = {s: int(n) for s, n in await conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status))}
        # On the store's clock: the first claim to the last completed run's end.
        first = await conn.scalar(select(func.min(jobs.c.started_at)))
        up = await conn.scalar(select(func.max(workers.c.started_at)))
        last = await conn.scalar(select(func.max(jobs.c.ended_at)).where(jobs.c.status == "completed"))
        stopped = await conn.execute(
            select(jobs.c.stop_requested_at, func.min(events.c.at)).join(events, events.c.job_id == jobs.c.id)
            .where(events.c.kind == "run.stopped", jobs.c.stop_requested_at.is_not(None)).group_by(jobs.c.id, jobs.c.stop_requested_at)
        )
        row.stop = [(at - asked).total_seconds() * 1000 for asked, at in stopped]
    row.completed = row.statuses.get("completed", 0)
    if first is not None and last is not None and last > first:
        row.span_s = (last - first).total_seconds()
        row.rate = row.completed / row.span_s
        row.up_s = (up - first).total_seconds() if up is not None else float("nan")
    row.server_peak, row.server_busy_peak, row.client_peak, row.waiting_peak = sampler.server, sampler.busy, sampler.client, sampler.waiting


def run_case(mode: str, n: int, args, server: Server, per_worker: float) -> Row:
    row = Row(mode, n)
    if mode == "direct" and not server.own and not args.force:
        free, most = asyncio.run(headroom(server.dsn))
        need = int(n * per_worker + 0.999)
        if need > free - SPARE_SLOTS:
            row.skipped = (f"skipped: would hold ~{need} server connections ({per_worker:g} a worker) of the {free} free on the shared server "
                           f"(max_connections {most}), leaving its other users fewer than {SPARE_SLOTS}: --own-server measures it")
            return row
    with tempfile.TemporaryDirectory() as ws, B.store_url("pg", ws, server.base) as url:
        pgb = PgBouncer(server.base, pool_size=args.pool_size) if mode == "pgbouncer" else None
        try:
            if pgb is not None:
                pgb.start()
            schema = url.rsplit("schema=", 1)[1]
            load = T.Workload(pgb.url(schema) if pgb else url, ws)
            samples = [Path(ws, f"samples-{i}.json") for i in range(n)]
            row.samples = [str(p) for p in samples]
            gate = Path(ws, "go")

            async def case() -> None:
                # The workers import while the bench makes the schema and queues the runs; they
                # open the store only once the gate opens.
                T.start_workers(load, workers=n, concurrency=args.concurrency, code=RECORDING_WORKER, head=lambda i: [str(samples[i]), str(gate)])
                pids = row.pids = [p.pid for p in load.procs]
                sampler = Sampler(server.dsn, server.port, [pgb.pid] if pgb else pids, pids, pgb)
                # The bench's own connections go direct: they are not the fleet's.
                store = await Store.open(url, ws)
                try:
                    await _measure(store, ws, args, row, sampler, load, gate)
                finally:
                    await store.close()

            try:
                asyncio.run(case())
            finally:
                T.stop_workload(load)
            for path in samples:
                if path.exists():
                    row.boundary += [v * 1000 for v in json.loads(path.read_text())]
            ups = [float(Path(f"{p}.up").read_text()) for p in samples if Path(f"{p}.up").exists()]
            row.start_cpu_s = sum(ups) if len(ups) == n else float("nan")
            _, row.warnings, row.examples = T.store_errors(load)
        finally:
            if pgb is not None:
                pgb.stop()
    return row


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
          + (f" server conns a worker {row.server_peak / row.workers:.2f};" if row.mode == "direct" else f" clients waiting at PgBouncer peak {row.waiting_peak};")
          + f" fleet CPU {row.cpu_s:.1f} s, {row.cpu_per_run:.2f} s a run"
          f" (the workers' own {row.own_cpu_s / row.ended:.2f}, their agents' the rest; without the workers' start-up, gate to registered,"
          f" {row.start_cpu_s / row.workers:.2f} s a worker: {(row.cpu_s - row.start_cpu_s) / row.ended:.3f} s a run); other ends {others};"
          f" warnings logged {row.warnings}; runs/s over {row.span_s:.1f} s (the last worker up {row.up_s:.1f} s after the first claim)", flush=True)
    if row.idle_ms:
        print(f"  {'':<17}idle before any run: each worker's own CPU {B.med(row.idle_ms):.2f} ms a second (median; {row.idle_ms[0]:.2f}-{row.idle_ms[-1]:.2f}), the fleet's {sum(row.idle_ms):.1f}", flush=True)
    for text in row.examples[:3]:
        print(f"  {'':<17}  {text}")


HEAD = (f"  {'mode':<10}{'workers':>7}{'completed':>11}{'runs/s':>8}{'server conns':>14}{'client':>7}"
        f"{'boundary':>11}{'stop':>10}{'lost':>6}{'faulted':>8}\n"
        f"  {'':<17}{'':>11}{'':>8}{'peak /busy':>14}{'conns':>7}{'p99 ms':>11}{'p99 ms':>10}")


def print_growth(rows: list[Row]) -> None:
    print("growth: each figure over the same figure for the smallest fleet of its mode (x1.0 = no growth)")
    print(f"  {'mode':<10}{'workers':>7}{'runs/s':>9}{'server conns':>14}{'client conns':>14}{'boundary p99':>14}{'stop p99':>10}{'CPU a run':>11}{'w/o start-up':>14}")
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
                  f"{x(B.pct(r.boundary, 99), B.pct(base.boundary, 99)):>14}{x(B.pct(r.stop, 99), B.pct(base.stop, 99)):>10}"
                  f"{x(r.cpu_per_run, base.cpu_per_run):>11}{x((r.cpu_s - r.start_cpu_s) / r.ended, (base.cpu_s - base.start_cpu_s) / base.ended):>14}")


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,10,50", help="fleet sizes, each run in turn (default 1,10,50: 50 workers, beside 1 and 10)")
    ap.add_argument("--mode", default="direct,pgbouncer", help="direct, pgbouncer or both (comma-separated)")
    ap.add_argument("--concurrency", type=int, default=3, help="runs each worker hosts at once")
    ap.add_argument("--runs", type=int, default=3, help="runs queued per worker (one round of --concurrency 3)")
    ap.add_argument("--min-runs", type=int, default=12, help="runs queued in a case at least (a rate of the smallest fleet over more than one round)")
    ap.add_argument("--pace", type=float, default=0.0, metavar="RUNS_PER_S",
                    help="queue the runs at this rate once the fleet is up, not all before (an idle fleet woken run by run; with --runs 0 --min-runs N every size gets N runs)")
    ap.add_argument("--idle-s", type=float, default=0.0, help="with --pace: first measure each worker's CPU over this many seconds idle, before any run")
    ap.add_argument("--agents", type=int, default=3, help="command agents a run: `sleep AGENT_S` and `true` in turn")
    ap.add_argument("--agent-s", type=float, default=0.2)
    ap.add_argument("--stop-share", type=float, default=0.1, help="share of a case's runs stopped while running (one at least)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a case may take to end its runs")
    ap.add_argument("--pg-url", default=B.PG_DEFAULT, help="the shared server (a schema of its own per case)")
    ap.add_argument("--own-server", action="store_true", help="a PostgreSQL of the bench's own on a free port instead")
    ap.add_argument("--max-connections", type=int, default=200, help="its max_connections (with --own-server)")
    ap.add_argument("--pool-size", type=int, default=20, help="PgBouncer's default_pool_size: server connections it opens at most")
    ap.add_argument("--force", action="store_true", help="run direct cases on the shared server even if they take its free slots")
    ap.add_argument("--json", metavar="PATH", help="also write the rows there")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.runs, args.min_runs = "1,2", 4, 0
    sizes = sorted({int(w) for w in args.workers.split(",")})
    modes = [m.strip() for m in args.mode.split(",")]
    # A TERM (a test's timeout, a CI cancel) cleans up as a Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupted)
    server = Server.of_our_own(args.max_connections) if args.own_server else Server.shared(args.pg_url)
    try:
        where = f"a PostgreSQL of its own (max_connections {args.max_connections})" if server.own else f"the shared PostgreSQL at {server.dsn}"
        B.header(f"fleet: {','.join(map(str, sizes))} workers x {args.concurrency} runs, {args.runs} runs a worker of {args.agents} agents"
                 f" (sleep {args.agent_s:g} / true), {args.min_runs} at least{f', queued at {args.pace:g} a second once the fleet is up' if args.pace else ''}; {args.stop_share:.0%} of them stopped, on {where}; PgBouncer in transaction mode, pool {args.pool_size}")
        print(HEAD, flush=True)
        rows: list[Row] = []
        for mode in modes:
            per_worker = 3.0  # until the smallest fleet shows what a worker holds
            for n in sizes:
                try:
                    row = run_case(mode, n, args, server, per_worker)
                except Exception as exc:  # one case failing is a figure; the next ones still run
                    row = Row(mode, n, skipped=f"failed: {type(exc).__name__}: {str(exc)[:600]}")
                if mode == "direct" and not row.skipped and row.server_peak:
                    per_worker = row.server_peak / n
                rows.append(row)
                print_row(row)
        print_growth(rows)
        B.write_json(args.json, {"rows": [dict(vars(r), lost=r.lost, faulted=r.faulted) for r in rows]})
    finally:
        server.close()


if __name__ == "__main__":
    main()
