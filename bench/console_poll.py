"""The console's poll on a big store: the "did anything change?" probe, a poll of 100 changed runs, a full reload.

    python bench/console_poll.py [--runs 100000] [--active 2000] [--changed 100] [--reps 200] [--pg] [--smoke]

Builds a store of `--runs` runs (`--active` of them active, half of those
running) with bulk inserts, then measures, through the console's own
`Poller` and the `store.queries` functions it calls:

- the probe (`change_marker` in its own short read transaction) when nothing changed;
- a whole poll when nothing changed (lost-run check, probe, counts, live rows);
- a poll after `--changed` runs changed;
- a full reload of the shown rows (what the poll does the first time, and what
  it would do every time without the probe).

The changed-rows poll and the full reload are interleaved rep by rep, so the
ratio is measured side by side. Each batch of changes is stamped more than the
poller's clock-skew margin after the previous one, so each poll fetches exactly
the runs that changed since the poll before it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import timedelta

import _benchlib as B
from sqlalchemy import bindparam, update

from swarmkit.console.poller import SKEW, Poller
from swarmkit.console.store_link import StoreLink
from swarmkit.store.clock import store_now
from swarmkit.store.models import jobs
from swarmkit.store.queries import change_marker, list_jobs

PROBE_TARGET_MS = 0.5
CHANGED_TARGET_MS = 5.0
RATIO_TARGET = 20.0
LONG_LEASE_S = 10 * 86400  # the bench's running rows have no live host; never mark them lost


async def bench(url: str, ws: str, args) -> dict:
    big = await B.build_big_store(url, ws, args.runs, args.active)
    print(f"  store: {big.runs:,} runs ({big.active:,} active, {len(big.running_ids):,} running) built in {big.build_s:.1f} s", flush=True)
    if not url.startswith("sqlite"):
        await _analyze(url, ws)
    link = StoreLink(url, ws)
    poller = Poller(link, clock=store_now, lease_s=LONG_LEASE_S, detect_lost=True)
    rng = random.Random(7)
    out: dict = {}
    try:
        store = await link.get()
        snap = await poller.poll()
        while snap.partial:  # the console's first read shows the newest runs; the next reads the rest
            snap = await poller.poll()
        shown = len(snap.jobs)
        await poller.poll()
        # The probe alone, as the poll runs it: one short read transaction
        # (`Store.run_read`: on SQLite one hop to the store's thread).
        window_after = poller.held.window_after
        probe: list[float] = []
        probe_async: list[float] = []
        for _ in range(args.reps * 5):
            t0 = time.perf_counter()
            await store.run_read(lambda conn: change_marker(conn, window_after))
            probe.append((time.perf_counter() - t0) * 1000)
        for _ in range(args.reps * 5):
            t0 = time.perf_counter()
            async with store.read() as conn:
                await conn.run_sync(change_marker, window_after)
            probe_async.append((time.perf_counter() - t0) * 1000)
        floor: list[float] = []
        for _ in range(args.reps * 5):
            t0 = time.perf_counter()
            await store.run_read(lambda conn: None)
            floor.append((time.perf_counter() - t0) * 1000)
        idle: list[float] = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            snap = await poller.poll()
            idle.append((time.perf_counter() - t0) * 1000)
            assert snap.fetched == 0 or not snap.full, snap
        # Changes are stamped on a clock of their own that moves past the skew
        # margin at every batch, so a poll fetches exactly the batch.
        stamp = store_now() + timedelta(seconds=1)
        step = SKEW + timedelta(seconds=1)
        stmt = update(jobs).where(jobs.c.id == bindparam("b_id")).values(updated_at=bindparam("b_at"), step=jobs.c.step + 1)
        profiler = None
        if args.profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0002, async_mode="disabled")
        changed: list[float] = []
        full: list[float] = []
        raw_full: list[float] = []
        fetched: list[int] = []
        pool = big.active_ids
        for rep in range(args.reps):
            stamp += step
            ids = rng.sample(pool, min(args.changed, len(pool)))
            async with store.write() as conn:
                await conn.execute(stmt, [dict(b_id=i, b_at=stamp) for i in ids])
            if profiler:
                profiler.start()
            t0 = time.perf_counter()
            snap = await poller.poll()
            changed.append((time.perf_counter() - t0) * 1000)
            if profiler:
                profiler.stop()
            assert not snap.full, "a changed-rows poll fell back to a full read"
            fetched.append(getattr(snap, "whole", snap.fetched))
            # Side by side: the full reload of the same shown rows.
            poller.forget()
            t0 = time.perf_counter()
            snap = await poller.poll()
            full.append((time.perf_counter() - t0) * 1000)
            assert snap.full
            t0 = time.perf_counter()
            async with store.read() as conn:
                await conn.run_sync(list_jobs, include_ended=True, ended_limit=poller.ended_bound)
            raw_full.append((time.perf_counter() - t0) * 1000)
        if profiler:
            print(profiler.output_text(unicode=False, color=False, show_all=False))
        print(f"  shown rows: {shown:,}; whole rows read by a changed-rows poll: median {B.med(fetched):.0f}")
        print(B.line("probe, nothing changed (change_marker)", probe, target=f"<= {PROBE_TARGET_MS} ms (p50)", ok=B.med(probe) <= PROBE_TARGET_MS))
        print(B.line("  floor: a read transaction doing nothing", floor))
        print(B.line("  the probe on an async connection", probe_async))
        print(B.line("whole poll, nothing changed", idle))
        print(B.line(f"poll, {args.changed} runs changed", changed, target=f"<= {CHANGED_TARGET_MS} ms (p50)", ok=B.med(changed) <= CHANGED_TARGET_MS))
        print(B.line("full reload (Poller, first poll)", full))
        print(B.line("full reload (list_jobs alone)", raw_full))
        ratio = B.med(full) / B.med(changed)
        ratios = sorted(f / c for f, c in zip(full, changed))
        print(f"  full reload / changed-rows poll = {ratio:.1f}x (per-rep ratios p50 {B.med(ratios):.1f}x, p1 {B.pct(ratios, 1):.1f}x)   target >= {RATIO_TARGET:.0f}x  {B.verdict(ratio >= RATIO_TARGET)}")
        print(f"  full reload / idle poll         = {B.med(full) / B.med(idle):.1f}x")
        out = dict(probe_p50=B.med(probe), probe_p99=B.pct(probe, 99), idle_p50=B.med(idle), changed_p50=B.med(changed),
                   changed_p99=B.pct(changed, 99), full_p50=B.med(full), ratio=ratio)
    finally:
        await link.close()
    return out


async def _analyze(url: str, ws: str) -> None:
    """PostgreSQL: what autovacuum does soon after a bulk load (statistics, visibility map)."""
    import asyncpg

    from swarmkit.store import resolve_store

    loc = resolve_store(url, ws)
    dsn = loc.url.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn, server_settings={"search_path": loc.schema or "public"})
    try:
        await conn.execute("VACUUM ANALYZE jobs")
    finally:
        await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--active", type=int, default=2_000)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--pg", action="store_true", help="also on PostgreSQL (a fresh schema, dropped afterwards)")
    ap.add_argument("--pg-url", default=B.PG_DEFAULT)
    ap.add_argument("--profile", action="store_true", help="pyinstrument report of the changed-rows polls")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.active, args.changed, args.reps = 400, 40, 10, 5
    B.header(f"console poll: {args.runs:,} runs, {args.active:,} active, {args.reps} reps")
    kinds = ["sqlite"] + (["pg"] if args.pg else [])
    for kind in kinds:
        with tempfile.TemporaryDirectory() as ws, B.store_url(kind, ws, args.pg_url) as url:
            print(f"{'SQLite (WAL)' if kind == 'sqlite' else 'PostgreSQL'}:", flush=True)
            asyncio.run(bench(url, ws, args))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
