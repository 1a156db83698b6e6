"""The race harness's sampler: reads every run's row every few milliseconds and writes each change.

It is also the reader that is open the whole time (the console's role): each
poll is one short read transaction, never held between polls. On SQLite it
records the WAL file's size.

    python -m tests.stress.sampler --store URL --workspace WS --out samples.jsonl --until FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from sqlalchemy import text

from swarmkit.store import Store

COLS = ("status", "epoch", "pid", "step", "updated_at", "ended_at", "stop_requested_at", "cancel_requested_at", "cancel_keep")


async def main_async(args) -> int:
    store = await Store.open(args.store, args.workspace)
    wal = Path(store.loc.url.database + "-wal") if store.loc.is_sqlite else None
    last: dict[str, tuple] = {}
    polls = errors = 0
    wal_max = 0
    out = open(args.out, "a", buffering=1)
    try:
        while not os.path.exists(args.until):
            t = time.time()
            try:
                async with store.read() as conn:
                    rows = (await conn.execute(text(f"SELECT id, {', '.join(COLS)} FROM jobs"))).all()
            except Exception as exc:
                errors += 1
                out.write(json.dumps({"t": t, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
                await asyncio.sleep(args.interval)
                continue
            polls += 1
            for r in rows:
                row = tuple(str(v) if v is not None else None for v in r[1:])
                if last.get(r[0]) != row:
                    last[r[0]] = row
                    out.write(json.dumps({"t": t, "id": r[0], "row": dict(zip(COLS, row))}) + "\n")
            if wal is not None:
                try:
                    wal_max = max(wal_max, wal.stat().st_size)
                except FileNotFoundError:
                    pass
            await asyncio.sleep(args.interval)
        out.write(json.dumps({"t": time.time(), "summary": {"polls": polls, "errors": errors, "wal_max": wal_max}}) + "\n")
    finally:
        out.close()
        await store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--until", required=True, help="stop when this file exists")
    p.add_argument("--interval", type=float, default=0.02)
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
