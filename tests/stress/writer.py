"""A writer process for the contention test: queues runs and acts on them, flat out, for a while.

Every act goes through the runtime's control functions (what the CLI and the
console call). Prints one JSON line of counts at the end; any exception is
counted and its first line printed to stderr, so "database is locked" cannot
hide.

    python -m tests.stress.writer --store URL --workspace WS --flow FLOW --seconds 20 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter

from sqlalchemy import text

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store


async def main_async(args) -> int:
    rnd = random.Random(args.seed)
    store = await Store.open(args.store, args.workspace)
    flows = [load_flow(f) for f in args.flow]
    counts: Counter = Counter()
    errors: Counter = Counter()
    mine: list[str] = []
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            kind = rnd.choices(["submit", "stop", "resume", "cancel", "approve", "read"], [3, 3, 3, 1, 1, 2])[0]
            try:
                if kind == "submit" or not mine:
                    if sum(1 for _ in mine) < args.max_runs:
                        job = await control.submit(store, rnd.choice(flows), {"seed": "alpha"}, actor=f"{args.name}@contention")
                        mine.append(job.id)
                        counts["submit"] += 1
                    kind = "submit"
                elif kind == "read":
                    async with store.read() as conn:
                        await conn.execute(text("SELECT status, count(*) FROM jobs GROUP BY status"))
                    counts["read"] += 1
                else:
                    target = rnd.choice(mine)
                    actor = f"{args.name}@contention"
                    if kind == "stop":
                        res = await control.stop(store, target, actor=actor)
                    elif kind == "resume":
                        res = await control.resume(store, target, actor=actor)
                    elif kind == "cancel":
                        res = await control.cancel(store, target, keep=rnd.random() < 0.5, actor=actor)
                    else:
                        res = await control.approve(store, target, actor=actor)
                    counts[kind] += 1
                    if res.changed:
                        counts[f"{kind} changed"] += 1
                    if res.code == control.REFUSED and "kept changing" in res.message:
                        errors["gave up: kept changing"] += 1
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                errors[f"{type(exc).__name__}: {first[:200]}"] += 1
                print(f"{args.name}: {kind} raised {type(exc).__name__}: {first}", file=sys.stderr, flush=True)
            if args.pause:
                await asyncio.sleep(rnd.uniform(0, args.pause))
    finally:
        await store.close()
    print(json.dumps({"name": args.name, "counts": counts, "errors": errors}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--flow", action="append", required=True)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="writer")
    p.add_argument("--pause", type=float, default=0.02)
    p.add_argument("--max-runs", type=int, default=40)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
