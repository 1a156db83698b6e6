"""What an idle worker costs the store: round trips (PostgreSQL) and transactions (every store) per poll interval.

    python bench/idle_worker.py [--stores sqlite,postgresql,pgbouncer] [--seconds 10] [--hosting 0,3]
                                [--pg-url URL | --own-server] [--json PATH]

A `Worker` (runtime/worker.py, the one `swarmkit worker` runs) is started in
this process on an empty queue, left to settle for a few seconds, then watched
for `--seconds`. On PostgreSQL its connections go through a TCP relay of this
bench's own that counts each message burst the worker sends (a round trip:
every one waits for its answer), directly or through a PgBouncer in
transaction mode (`pgbouncer=true`: no LISTEN there, it polls). On every
store the store's transactions are counted (`Store.read`, `write`,
`quick_write`, `run_read`, `run_write`). `--hosting N`: the worker hosts N
runs of one long command node meanwhile (each run's heartbeat is in the
figures). One line per case: per poll interval (SWARMKIT_POLL, 0.5 s by
default) and per second. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import _benchlib as B
from _fleet_server import Server

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.worker import Worker
from swarmkit.store import Store
from tests.pgbouncer_instance import PgBouncer

SETTLE_S = 3.0
TX_METHODS = ("read", "write", "quick_write", "run_read", "run_write")


class Relay:
    """A TCP relay to the server that counts the bursts its clients send (each one waits for its answer)."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.bursts = 0
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            try:
                while data := await src.read(65536):
                    if count:
                        self.bursts += 1
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(pump(reader, up_w, True), pump(up_r, writer, False))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


def _count_transactions(store: Store, counts: Counter) -> None:
    """Each of the store's transactions once: `run_read` and `run_write` open theirs through `read` and
    `write` on PostgreSQL, which then count nothing more."""
    inside: contextvars.ContextVar[bool] = contextvars.ContextVar("inside", default=False)
    for name in TX_METHODS:
        method = getattr(store, name)
        if name.startswith("run_"):

            async def outer(*a, _m=method, _n=name, **k):
                counts[_n] += 1
                token = inside.set(True)
                try:
                    return await _m(*a, **k)
                finally:
                    inside.reset(token)

            setattr(store, name, outer)
        else:

            def inner(*a, _m=method, _n=name, **k):
                if not inside.get():
                    counts[_n] += 1
                return _m(*a, **k)

            setattr(store, name, inner)


async def _case(kind: str, url: str, ws: str, seconds: float, hosting: int, relay: Relay | None) -> dict:
    settings = Settings.from_env()
    store = await Store.open(url, ws, application_name="swarmkit-worker@bench", connections=2)
    if hosting:
        flow = load_flow(_long_flow(ws))
        for _ in range(hosting):
            await control.submit(store, flow, {}, actor="bench")
    counts: Counter = Counter()
    _count_transactions(store, counts)
    worker = Worker(store, concurrency=max(1, hosting), settings=settings, say=lambda _line: None)
    task = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + 60
        while hosting and sum(1 for h in worker.hosts.values() if h.lease_deadline is not None) < hosting:
            if time.monotonic() > deadline:
                raise RuntimeError("the runs were never hosted")
            await asyncio.sleep(0.1)
        await asyncio.sleep(SETTLE_S)
        counts.clear()
        b0 = relay.bursts if relay else 0
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        span = time.monotonic() - t0
        bursts = (relay.bursts - b0) if relay else None
        tx = dict(counts)
    finally:
        worker.drain()
        for host in worker.hosts.values():
            host.fence("bench over")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.close()
    polls = span / settings.poll_s
    return dict(store=kind, hosting=hosting, seconds=span, polls=polls, round_trips=bursts, transactions=tx)


def _long_flow(ws: str) -> Path:
    path = Path(ws, "long.toml")
    path.write_text('name = "long"\n[[agents]]\nname = "wait"\ncommand = "sleep 600"\n')
    return path


def _print(row: dict) -> None:
    tx = sum(row["transactions"].values())
    rt = row["round_trips"]
    per = row["polls"]
    rts = f"{rt / per:6.2f} /poll {rt / row['seconds']:6.2f} /s" if rt is not None else f"{'-':>6} /poll {'-':>6} /s"
    detail = ", ".join(f"{k} {v}" for k, v in sorted(row["transactions"].items()))
    print(f"  {row['store']:<11}{row['hosting']:>7}   round trips {rts}   transactions {tx / per:5.2f} /poll {tx / row['seconds']:5.2f} /s   ({detail or 'none'})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", default="sqlite,postgresql,pgbouncer")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long each case is watched, after settling")
    ap.add_argument("--hosting", default="0,3", help="runs the worker hosts meanwhile (comma-separated cases)")
    ap.add_argument("--pg-url", default=B.PG_DEFAULT)
    ap.add_argument("--own-server", action="store_true", help="a PostgreSQL of the bench's own instead of the shared one")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.stores.split(",")]
    hostings = [int(h) for h in args.hosting.split(",")]
    server = Server.of_our_own(100) if args.own_server and set(kinds) - {"sqlite"} else None
    base = server.base if server else args.pg_url
    rows: list[dict] = []
    try:
        s = Settings.from_env()
        B.header(f"idle worker: poll {s.poll_s:g} s, heartbeat {s.heartbeat_s:g} s, lease {s.lease_s:g} s; {args.seconds:g} s watched a case after {SETTLE_S:g} s")
        print(f"  {'store':<11}{'hosting':>7}", flush=True)
        for kind in kinds:
            for hosting in hostings:
                with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite" if kind == "sqlite" else "pg", ws, base) as url:
                    pgb = PgBouncer(base) if kind == "pgbouncer" else None
                    try:
                        if pgb is not None:
                            pgb.start()
                            url = pgb.url(url.rsplit("schema=", 1)[1])

                        async def case(url: str = url, ws: str = ws, kind: str = kind, hosting: int = hosting) -> dict:
                            relay = None
                            if kind != "sqlite":
                                parts = urlsplit(url)
                                relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
                                url = _through(url, await relay.start())
                            try:
                                return await _case(kind, url, ws, args.seconds, hosting, relay)
                            finally:
                                if relay is not None:
                                    await relay.close()

                        row = asyncio.run(case())
                    finally:
                        if pgb is not None:
                            pgb.stop()
                rows.append(row)
                _print(row)
        B.write_json(args.json, {"rows": rows, "pid": os.getpid()})
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
