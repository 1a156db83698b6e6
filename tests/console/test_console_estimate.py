"""The console sorts runs by their estimated cost at completion (issue 32): `$`, the most first; each run's
estimate is what it spent plus, for each node left, the median cost of a node in its flow's completed runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console_helpers import first_poll, until

from swarmkit.console.app import make_app
from swarmkit.widgets.run_table import RunTable
from tests.conftest import Cli, write_flow


def priced(ws: Path, name: str, cost: float) -> Path:
    return write_flow(ws, name, f'name = "{name}"\n' + "".join(
        f"""[[agents]]\nname = "n{i}"\ncommand = "echo '{{\\"_usage\\": {{\\"tokens\\": 1, \\"cost\\": {cost}}}}}' > $SWARMKIT_OUTPUT"\n""" for i in range(4)
    ))


async def test_dollar_sorts_the_runs_by_their_estimated_cost_at_completion(sqlite_url, workspace):
    # The store's part (node costs by flow) runs on both stores in tests/test_estimates.py; this is the table's.
    store_url = sqlite_url
    cli = Cli(store_url, workspace)
    cheap, dear = priced(workspace, "cheap", 0.1), priced(workspace, "dear", 1.0)
    done = {}
    for name, flow in (("cheap", cheap), ("dear", dear)):
        out = (await asyncio.to_thread(cli.call, "run", str(flow))).stdout
        assert "completed" in out
        done[name] = out.split()[0]
    # Queued (nothing spent): newest first, the dear run is older than the cheap ones.
    waiting = [(await asyncio.to_thread(cli.call, "run", str(f), "--detach")).stdout.strip() for f in (dear, cheap, cheap)]
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: set(waiting) <= set(table.shown_keys), what="the queued runs shown")
        assert table.shown_keys.index(waiting[0]) > table.shown_keys.index(waiting[1])
        await pilot.press("dollar_sign")
        # $4.00 (4 nodes left at $1.00) before $0.40, once the flows' node costs are read. An ended run's is what
        # it cost: the dear one ($4.00 spent) first, the cheap one ($0.40) before the cheap runs that spent nothing yet.
        shown = lambda: [k[:8] for k in table.shown_keys]
        want = [done["dear"], waiting[0][:8], done["cheap"], waiting[2][:8], waiting[1][:8]]
        await until(pilot, lambda: shown() == want, what=f"the runs in the order of their estimates, {want}")
        assert table.sort_column == "estimate"
        assert screen.last_message.startswith("sorted by estimated cost at completion")
