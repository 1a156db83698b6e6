"""Cost that ticks: usage an agent reports in the middle of a node reaches the run's row within a heartbeat.

A real `swarmkit worker` hosts three runs whose first node reports usage and
then waits on a gate file: an async `call` agent (`ctx.add_usage` on the
host's loop), a sync one (`ctx.add_usage` in its child process) and a command
agent (lines appended to `$SWARMKIT_USAGE`). While the nodes still run, each
row must show the usage; once they end, the totals count every report once.
A fourth run makes `$SWARMKIT_USAGE` a FIFO: the host must not wait on it.
"""

from __future__ import annotations

from pathlib import Path

from .conftest import Cli, wait_for, write_flow
from .helpers import job
from .test_host_discipline import WorkerProc, cleanup, submit

AGENTS = '''
import asyncio, os, time

def _gate(ctx):
    return os.path.join(ctx.inputs["gates"], ctx.run_id)

async def async_agent(ctx):
    ctx.add_usage(tokens=1200, cost=0.25)
    ctx.add_usage(tokens=34, cost=0.5)
    while not os.path.exists(_gate(ctx)):
        await asyncio.sleep(0.05)
    ctx.add_usage(tokens=1, cost=0.25)

def sync_agent(ctx):
    ctx.add_usage(tokens=1200, cost=0.25)
    ctx.add_usage(tokens=34, cost=0.5)
    while not os.path.exists(_gate(ctx)):
        time.sleep(0.05)
    ctx.add_usage(tokens=1, cost=0.25)
'''

COMMAND = (
    "command = '''"
    'echo \'{"tokens": 1200, "cost": 0.25}\' >> "$SWARMKIT_USAGE"; '
    'printf \'{"tokens": 34, "cost": 0.5}\\n\' >> "$SWARMKIT_USAGE"; '
    'while [ ! -e "$GATES/$SWARMKIT_RUN_ID" ]; do sleep 0.05; done; '
    'printf \'{"tokens": 1, "cost": 0.25}\' >> "$SWARMKIT_USAGE"'
    "'''\nenv = [\"GATES\"]"
)
FIFO = (
    "command = '''"
    'mkfifo "$SWARMKIT_USAGE"; '
    'while [ ! -e "$GATES/$SWARMKIT_RUN_ID" ]; do sleep 0.05; done'
    "'''\nenv = [\"GATES\"]"
)


def flow_of(folder: Path, name: str, agent_line: str) -> Path:
    return write_flow(folder, name, f'name = "{name}"\n\n[[agents]]\nname = "work"\n{agent_line}\n\n[[agents]]\nname = "after"\ncommand = "true"\n')


def test_usage_reported_mid_node_reaches_the_row_within_a_heartbeat(cli: Cli, tmp_path: Path):
    (tmp_path / "liveagents.py").write_text(AGENTS, encoding="utf-8")
    gates = tmp_path / "gates"
    gates.mkdir()
    flows = {
        "async": flow_of(tmp_path, "live_async", 'call = "liveagents:async_agent"'),
        "sync": flow_of(tmp_path, "live_sync", 'call = "liveagents:sync_agent"'),
        "command": flow_of(tmp_path, "live_command", COMMAND),
        "fifo": flow_of(tmp_path, "live_fifo", FIFO),
    }
    ids = {kind: submit(cli, path, {"gates": str(gates)}) for kind, path in flows.items()}
    w = None
    try:
        w = WorkerProc(cli, "--concurrency", "4", env={"GATES": str(gates)})
        wait_for(lambda: all(job(cli.store_url, cli.workspace, i).status == "running" for i in ids.values()), timeout=30, what="the runs to start")
        for kind in ("async", "sync", "command"):
            wait_for(
                lambda kind=kind: (r := job(cli.store_url, cli.workspace, ids[kind])).tokens == 1234 and abs(r.cost - 0.75) < 1e-9,
                timeout=30, interval=0.05, what=f"the {kind} agent's usage on its row mid-node",
            )
        # Mid-node, not at its end: each agent still waits on its gate (no bound on how soon: a loaded
        # machine starts agents late, and when is bench/'s business).
        for kind in ("async", "sync", "command"):
            r = job(cli.store_url, cli.workspace, ids[kind])
            assert (r.status, r.step) == ("running", 0), f"{kind}: the node should still be running"
        # A FIFO at $SWARMKIT_USAGE is never waited on: the host keeps heart-beating.
        fifo = ids["fifo"]
        first = job(cli.store_url, cli.workspace, fifo).heartbeat_at
        wait_for(lambda: job(cli.store_url, cli.workspace, fifo).heartbeat_at > first, timeout=10, what="a heartbeat past the FIFO")
        for run_id in ids.values():
            (gates / run_id).touch()
        wait_for(lambda: all(job(cli.store_url, cli.workspace, i).status not in ("queued", "running") for i in ids.values()), timeout=60, what="the runs to end")
    finally:
        cleanup(w)
    for kind in ("async", "sync", "command"):
        r = job(cli.store_url, cli.workspace, ids[kind])
        assert r.status == "completed", (kind, r.status, r.error)
        # Counted once: what the heartbeats put on the row and what the checkpoint added.
        assert (r.tokens, round(r.cost, 9)) == (1235, 1.0), kind
    r = job(cli.store_url, cli.workspace, ids["fifo"])
    assert r.status == "faulted" and "SWARMKIT_USAGE" in (r.error or "") and "regular file" in (r.error or ""), (r.status, r.error)


def test_the_usage_file_is_read_in_bounded_steps_and_refused_past_its_limit(tmp_path: Path):
    """What the heartbeat does with the file, without a worker: new lines only, a last line
    without its newline at the node's end, a bad line named, a file past the limit refused."""
    from swarmkit.runtime.live_usage import MAX_USAGE_BYTES, LiveUsage

    path = tmp_path / "usage.jsonl"
    live = LiveUsage(path=path)
    live.read()
    assert live.total() == (0, 0.0) and live.bad is None  # no file yet: nothing, no error
    path.write_text('{"tokens": 10, "cost": 0.5}\n{"tokens": 5', encoding="utf-8")
    live.read()
    assert live.total() == (10, 0.5)  # the half-written line waits for its end
    with path.open("a", encoding="utf-8") as f:
        f.write(', "cost": 0.25}\n{"tokens": 1}')
    live.read()
    assert live.total() == (15, 0.75)
    live.finish()
    assert live.total() == (16, 0.75) and live.bad is None
    live.written = (15, 0.75)
    assert live.unwritten() == (1, 0.0)

    bad = LiveUsage(path=tmp_path / "bad.jsonl")
    (tmp_path / "bad.jsonl").write_text('not json\n{"tokens": -3}\n{"tokens": 2}\n', encoding="utf-8")
    bad.finish()
    assert bad.total() == (2, 0.0) and "not JSON" in (bad.bad or "") and not bad.fault

    huge = LiveUsage(path=tmp_path / "huge.jsonl")
    with (tmp_path / "huge.jsonl").open("wb") as f:
        f.truncate(MAX_USAGE_BYTES + 1)
    huge.read()
    assert huge.fault and "limit" in (huge.bad or "") and huge.total() == (0, 0.0)
