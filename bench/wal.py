"""WAL size: the SQLite write-ahead log under the throughput load with the console open and polling.

    python bench/wal.py [--minutes 10] [--workers 16] [--smoke]

Runs the load of bench/throughput.py (16 `swarmkit worker` processes of
no-op agents) on one SQLite store while a real `swarmkit-console --poll 1`
watches it in a pseudo-terminal, for `--minutes`. Samples the size of
`store.db-wal` every second; prints its largest and final size, how the
store file grew, and the node boundaries done. SQLite checkpoints the WAL
into the database every 1,000 pages (about 4 MB) and starts it again from
the top when no reader holds an old snapshot: a reader that keeps one open
(the trap in DESIGN.md) lets it grow without bound.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import _benchlib as B
import throughput as T
from console_render import PtyConsole

TARGET_MB = 64.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--agents", type=int, default=400)
    ap.add_argument("--no-console", action="store_true", help="the load alone (to tell the console's part in the WAL's size)")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    seconds = args.minutes * 60
    if args.smoke:
        args.workers, args.agents, seconds = 2, 30, 3.0
    B.header(f"WAL: {args.workers} workers and the console, {seconds / 60:.1f} minutes")
    with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite", ws) as url:
        db = B.sqlite_path(url)
        assert db is not None
        wal = Path(str(db) + "-wal")
        # Enough queued runs for the whole time at up to 2,000 boundaries a
        # second (a run of N agents takes N of them): the queue never runs dry.
        runs = max(args.workers * args.concurrency * 3, int(seconds * 2000 / args.agents) + args.workers * args.concurrency)
        load = T.start_workload(url, ws, workers=args.workers, concurrency=args.concurrency, agents=args.agents, runs=runs)
        console = None
        sizes: list[float] = []
        try:
            console = None if args.no_console else PtyConsole(url, ws)
            # The clock starts once the workers are hosting (16 start-ups take a while on 2 CPUs).
            deadline = time.monotonic() + 180
            while asyncio.run(_boundaries(url, ws)) == 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            start_n = asyncio.run(_boundaries(url, ws))
            t0 = time.monotonic()
            next_report = t0 + 60
            while time.monotonic() - t0 < seconds:
                time.sleep(1.0)
                sizes.append(wal.stat().st_size / 1e6 if wal.exists() else 0.0)
                if console is not None and console.proc.poll() is not None:
                    raise RuntimeError("the console exited")
                if time.monotonic() >= next_report:
                    next_report += 60
                    print(f"  {int((time.monotonic() - t0) / 60)} min: WAL {sizes[-1]:.1f} MB (max so far {max(sizes):.1f} MB)", flush=True)
            elapsed = time.monotonic() - t0
            done = asyncio.run(_boundaries(url, ws)) - start_n
        finally:
            if console is not None:
                console.quit()
            T.stop_workload(load)
        busy, other, examples = T.store_errors(load)
        db_mb = db.stat().st_size / 1e6
    print(f"  {done:,} node boundaries in {elapsed:.0f} s ({done / elapsed:.0f}/s), {'without the console' if args.no_console else 'with the console polling every second'}")
    print(B.line("WAL size, sampled every second", sizes, unit="MB"))
    final = sizes[-1] if sizes else 0.0
    print(f"  WAL largest {max(sizes or [0]):.1f} MB, at the end {final:.1f} MB   target <= {TARGET_MB:.0f} MB  {B.verdict(max(sizes or [0]) <= TARGET_MB)}")
    print(f"  store file at the end: {db_mb:.1f} MB; busy errors logged: {busy}; other warnings: {other}")
    for text in examples:
        print(f"    {text}")


async def _boundaries(url: str, ws: str) -> int:
    counter = T.Counter(url, ws)
    await counter.open()
    try:
        return await counter.boundaries()
    finally:
        await counter.close()


if __name__ == "__main__":
    main()
