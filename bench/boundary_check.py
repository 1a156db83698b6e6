"""The boundary check alone: p50 and p99 of the fresh flag read, on SQLite (WAL) and PostgreSQL.

    python bench/boundary_check.py [--n 5000] [--pg URL] [--writers 16]

With --writers N, N processes keep writing to the same store while it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime import control  # noqa: E402
from runtime.executor import read_flags  # noqa: E402
from runtime.flow import parse_flow  # noqa: E402
from store import Store  # noqa: E402

FLOW = parse_flow('name = "bench"\n[[agents]]\nname = "a"\ncommand = "true"\n')

WRITER = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[3])
from runtime import control
from runtime.flow import parse_flow
from store import Store
async def go():
    s = await Store.open(sys.argv[1], sys.argv[2])
    flow = parse_flow('name = "w"\\n[[agents]]\\nname = "a"\\ncommand = "true"\\n')
    end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        j = await control.submit(s, flow, {})
        await control.stop(s, j.id)
    await s.close()
asyncio.run(go())
"""


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


async def measure(url: str, workspace: str, n: int) -> list[float]:
    store = await Store.open(url, workspace)
    try:
        job = await control.submit(store, FLOW, {}, host_here=True)
        for _ in range(200):  # warm the pool and the statement cache
            await read_flags(store, job.id)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await read_flags(store, job.id)
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        await store.close()


def run_case(name: str, url: str, workspace: str, n: int, writers: int) -> None:
    asyncio.run(_warm(url, workspace))
    procs = []
    if writers:
        root = str(Path(__file__).resolve().parents[1])
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, workspace, root, "600"]) for _ in range(writers)]
        time.sleep(2.0)
    try:
        ms = asyncio.run(measure(url, workspace, n))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
    print(f"{name:<34} n={n:<6} p50={statistics.median(ms):.3f} ms  p99={pct(ms, 99):.3f} ms  max={max(ms):.3f} ms")


async def _warm(url: str, workspace: str) -> None:
    s = await Store.open(url, workspace)
    await s.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--pg", default=os.environ.get("SWARMKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as ws:
        url = f"sqlite:///{ws}/.swarmkit/store.db"
        run_case("sqlite, idle", url, ws, args.n, 0)
        run_case(f"sqlite, {args.writers} writer processes", url, ws, args.n, args.writers)
        if args.pg:
            schema = "bench_" + uuid.uuid4().hex[:8]
            pg = f"{args.pg}{'&' if '?' in args.pg else '?'}schema={schema}"
            try:
                run_case("postgresql, idle", pg, ws, args.n, 0)
                run_case(f"postgresql, {args.writers} writer processes", pg, ws, args.n, args.writers)
            finally:
                subprocess.run(["psql", args.pg.replace("+asyncpg", ""), "-qc", f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'], check=False)


if __name__ == "__main__":
    main()
