"""The race harness by hand, with larger counts than CI runs.

    python -m tests.stress.race --workers 4 --runs 200 --acts 2000 --store URL
    python -m tests.stress.race --rounds 3 --store postgresql://postgres@127.0.0.1:5432/test

Without --store it makes a SQLite store in a temporary folder. A PostgreSQL URL
without `?schema=` gets a fresh schema of its own (dropped afterwards unless
--keep). Prints the counts (acts tried by kind, runs by final status,
invariant violations) and exits 1 if any invariant broke.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from .harness import Params, Round


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.stress.race", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", help="store URL (default: a new SQLite file in a temporary folder)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--acts", type=int, default=2000)
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--seconds", type=float, default=None, help="longest the acts go on (default: scaled with --acts)")
    p.add_argument("--cli-frac", type=float, default=0.15, help="share of acts sent through the swarmkit CLI")
    p.add_argument("--cancel-frac", type=float, default=0.35, help="share of runs that may be cancelled")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the folders (and the PostgreSQL schema)")
    p.add_argument("--plant", choices=["cached_stop", "ignore_cancel"], help="plant a known bug in the hosts, to see the checks catch it")
    args = p.parse_args(argv)

    total_violations = 0
    totals: dict[str, int] = {}
    for r in range(args.rounds):
        seed = args.seed if args.seed is not None else uuid.uuid4().int % 100000
        seed += r
        tmp = Path(tempfile.mkdtemp(prefix="swarmkit-race-"))
        ws = tmp / "ws"
        ws.mkdir()
        url = args.store
        schema = None
        if url is None:
            url = f"sqlite:///{ws}/.swarmkit/store.db"
        elif url.startswith("postgres") and "schema=" not in url:
            schema = "race_" + uuid.uuid4().hex[:10]
            url += ("&" if "?" in url else "?") + f"schema={schema}"
        params = Params(
            workers=args.workers, concurrency=args.concurrency, runs=args.runs, acts=args.acts, actors=args.actors,
            seconds=args.seconds or max(30.0, args.acts / 6.0), cli_frac=args.cli_frac, cancel_frac=args.cancel_frac, seed=seed,
            quiesce_s=300, finish_s=600, plant=args.plant,
        )
        print(f"round {r + 1}/{args.rounds}: {tmp} (seed {seed})", flush=True)
        report = Round(url, ws, tmp / "round", params, say=lambda m: print("  " + m, flush=True)).run()
        print(report.summary(), flush=True)
        total_violations += len(report.violations)
        for k, v in report.acts_by_kind.items():
            totals[f"acts {k}"] = totals.get(f"acts {k}", 0) + v
        totals["acts"] = totals.get("acts", 0) + sum(report.acts_by_kind.values())
        totals["runs"] = totals.get("runs", 0) + params.runs
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
            if schema:
                asyncio.run(_drop(args.store, schema))
    if args.rounds > 1:
        print(f"all rounds: {totals}; invariant violations: {total_violations}")
    return 1 if total_violations else 0


async def _drop(base: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(base.replace("postgresql+asyncpg://", "postgresql://").split("?")[0], timeout=10)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


if __name__ == "__main__":
    sys.exit(main())
