"""Stops inside a long node, side by side: how long from the stop asked for to the run `stopped`.

    python bench/stop_in_node.py [--samples 8] [--store URL | --pg]

One long node (a tool loop of 40 tool calls of 100 ms, 4 s in all) then a short one,
hosted here by a RunHost with the default timings (a 1 s heartbeat). A stop is asked
for (through runtime.control, as an operator's act) at a random moment 0.3-2 s into
the long node. Measured on the store's clock: stop_requested_at to the row's updated_at
when it became `stopped`. Side by side:

- plain stop, a node with no boundaries of its own: waits for the node to end (the seed's wait);
- plain stop, an async `call` loop with `await ctx.aboundary(...)`: lands at the next tool call's end;
- plain stop, a command loop reading $SWARMKIT_CONTROL: the next heartbeat, then the next tool call's end;
- stop --now, async callable: the next heartbeat, then the cancellation;
- stop --now, command agent: the next heartbeat, then SIGINT to its processes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import header, line, store_url

from swarmkit.runtime import control
from swarmkit.runtime.executor import RunHost
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store
from swarmkit.store.queries import get_job, latest_checkpoint

CALLS, CALL_S = 40, 0.1
AGENTS = f'''
import asyncio

async def plain(ctx):
    for i in range({CALLS}):
        await asyncio.sleep({CALL_S})

async def looped(ctx):
    done = (ctx.resumed_from or {{}}).get("done", 0)
    for i in range(done, {CALLS}):
        await ctx.aboundary({{"done": i}})
        await asyncio.sleep({CALL_S})
'''
COMMAND_LOOP = (
    f"i=0; while [ $i -lt {CALLS} ]; do "
    "if grep -q '\"stop_requested\": true' \"$SWARMKIT_CONTROL\"; then echo \"{\\\"done\\\": $i}\" > \"$SWARMKIT_OUTPUT\"; exit 75; fi; "
    f"i=$((i + 1)); sleep {CALL_S}; done"
)
COMMAND_PLAIN = f"i=0; while [ $i -lt {CALLS} ]; do i=$((i + 1)); sleep {CALL_S}; done"

CASES = [
    ("plain stop, no boundary inside (next node)", 'call = "stopbench:plain"', False),
    ("plain stop, async ctx.aboundary loop", 'call = "stopbench:looped"', False),
    ("plain stop, command SWARMKIT_CONTROL loop", f"command = '''{COMMAND_LOOP}'''", False),
    ("stop --now, async callable", 'call = "stopbench:plain"', True),
    ("stop --now, command agent", f"command = '''{COMMAND_PLAIN}'''", True),
]


def flow_for(how: str):
    return parse_flow(f'name = "stop-bench"\n[[agents]]\nname = "long"\n{how}\n[[agents]]\nname = "after"\ncall = "stopbench:plain"\n')


async def one(store: Store, flow, now: bool, rng: random.Random) -> tuple[float, str]:
    job = await control.submit(store, flow, {}, host_here=True)
    host = RunHost(store, job.id, job.epoch, flow)
    hosting = asyncio.create_task(host.run())
    await asyncio.sleep(rng.uniform(0.3, 2.0))
    res = await control.stop(store, job.id, actor="bench", now=now)
    assert res.changed, res.message
    status = await hosting
    async with store.read() as conn:
        row = await conn.run_sync(get_job, job.id)
        cp = await conn.run_sync(latest_checkpoint, job.id)
    assert row is not None and row.stop_requested_at is not None
    where = f"inside {row.current_node}" if cp is not None and cp.partial else f"before {row.current_node}"
    return (row.updated_at - row.stop_requested_at).total_seconds() * 1000, f"{status} {where}"


async def bench(url: str, workspace: str, samples: int) -> None:
    (Path(workspace) / "stopbench.py").write_text(AGENTS, encoding="utf-8")
    sys.path.insert(0, workspace)
    store = await Store.open(url, workspace)
    rng = random.Random(14)
    try:
        print(f"  {url.split(':')[0]}: {samples} stops per case, one node of {CALLS} tool calls x {CALL_S * 1000:.0f} ms, 1 s heartbeat")
        for label, how, now in CASES:
            flow = flow_for(how)
            values, ends = [], set()
            for _ in range(samples):
                ms, end = await one(store, flow, now, rng)
                values.append(ms)
                ends.add(end)
            print(line(label, values) + f"   ({', '.join(sorted(ends))})", flush=True)
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--store")
    ap.add_argument("--pg", action="store_true", help="on a fresh schema of the local PostgreSQL too")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.samples = 1
    header("stop inside a node: stop asked -> run stopped (store clock)")
    kinds = ["sqlite", "postgresql"] if args.pg else ["sqlite"]
    for kind in kinds:
        with tempfile.TemporaryDirectory() as ws:
            if args.store:
                asyncio.run(bench(args.store, ws, args.samples))
                break
            with store_url(kind, ws) as url:
                asyncio.run(bench(url, ws, args.samples))


if __name__ == "__main__":
    main()
