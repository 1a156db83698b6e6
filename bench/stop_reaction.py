"""Stop reaction: from the flag being written (by another process) to RunStoppedError being raised.

    python bench/stop_reaction.py [--runs 40] [--agent-ms 1] [--store URL]

A pipeline of `--agent-ms` agents is hosted here; a second process stops it
at a random moment. The delay is stop_requested_at (written by the stopper)
to the moment the host raises RunStoppedError. Prints p50, p99, max and
how many stops were missed (the goal is zero).

What an operator waits for, from a real `swarmkit stop` process started (or an HTTP stop sent) to
the run parked, beside that process's own start to exit: bench/http_api.py, which stops runs by
both doors.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swarmkit.runtime import control  # noqa: E402
from swarmkit.runtime.errors import RunStoppedError  # noqa: E402
from swarmkit.runtime.executor import RunHost  # noqa: E402
from swarmkit.runtime.flow import parse_flow  # noqa: E402
from swarmkit.store import Store  # noqa: E402
from swarmkit.store.queries import get_job  # noqa: E402

STOPPER = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[3])
from swarmkit.runtime import control
from swarmkit.store import Store
async def go():
    s = await Store.open(sys.argv[1], sys.argv[2])
    print("ready", flush=True)
    for line in sys.stdin:
        job_id, delay = line.split()
        time.sleep(float(delay))
        res = await control.stop(s, job_id, actor="bench")
        print(res.changed, time.time(), flush=True)
    await s.close()
asyncio.run(go())
"""


class TimedHost(RunHost):
    raised_at: datetime | None = None

    def _decide(self, flags, step, agent):
        try:
            super()._decide(flags, step, agent)
        except RunStoppedError:
            if self.raised_at is None:
                self.raised_at = datetime.now(UTC)
            raise


async def main_async(url: str, workspace: str, runs: int, agent_ms: float) -> None:
    mod = Path(workspace) / "benchagents.py"
    mod.write_text(f"import asyncio\nasync def work(ctx):\n    await asyncio.sleep({agent_ms / 1000!r})\n")
    sys.path.insert(0, workspace)
    n_agents = 400
    flow = parse_flow('name = "reaction"\n' + "".join(f'[[agents]]\nname = "a{i}"\ncall = "benchagents:work"\n' for i in range(n_agents)))
    store = await Store.open(url, workspace)
    stopper = subprocess.Popen([sys.executable, "-c", STOPPER, url, workspace, str(ROOT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert stopper.stdout.readline().strip() == "ready"
    delays, after_commit, missed = [], [], 0
    try:
        for _ in range(runs):
            job = await control.submit(store, flow, {}, host_here=True)
            host = TimedHost(store, job.id, job.epoch, flow)
            # Stop somewhere in the first ~40% of the pipeline.
            stopper.stdin.write(f"{job.id} {random.uniform(0.05, n_agents * agent_ms / 1000 * 0.4):.4f}\n")
            stopper.stdin.flush()
            status = await host.run()
            committed = float(stopper.stdout.readline().split()[1])
            async with store.read() as conn:
                row = await conn.run_sync(get_job, job.id)
            if status != "stopped" or host.raised_at is None:
                missed += 1
                continue
            delays.append((host.raised_at - row.stop_requested_at).total_seconds() * 1000)
            after_commit.append((host.raised_at.timestamp() - committed) * 1000)
    finally:
        stopper.stdin.close()
        stopper.wait()
        await store.close()
    def line(label: str, values: list[float]) -> str:
        values = sorted(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        return f"  {label:<38} p50={statistics.median(values):7.2f} ms  p99={p99:7.2f} ms  max={max(values):7.2f} ms"

    p99 = sorted(delays)[min(len(delays) - 1, int(len(delays) * 0.99))] if delays else float("nan")
    print(f"{url.split(':')[0]}: agents of {agent_ms} ms, {runs} stops, missed={missed}   target 0 missed  {'MET' if missed == 0 else 'MISSED'}")
    print(line("stop_requested_at -> RunStoppedError", delays) + f"   target p99 <= 20 ms  {'MET' if p99 <= 20 else 'MISSED'}")
    print(line("stop act returned -> RunStoppedError", after_commit))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--agent-ms", type=float, default=1.0)
    ap.add_argument("--store")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.runs = 2
    with tempfile.TemporaryDirectory() as ws:
        url = args.store or f"sqlite:///{ws}/.swarmkit/store.db"
        asyncio.run(main_async(url, ws, args.runs, args.agent_ms))


if __name__ == "__main__":
    main()
