"""Boundaries inside a node: a stop lands at a tool loop's own boundary, the partial state is
checkpointed, and on resume the agent goes on from it. Each kind of agent, both stores, a real
`swarmkit run` process; the resumed run ends byte-identical to an uninterrupted one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import Cli, release, wait_for, write_flow
from .helpers import audit, checkpoints, events, job

TOOLS = 6
LOOP = f'''
import asyncio, json, os, sys, time

MARKS = {{marks!r}}
GATES = {{gates!r}}


def tool(ctx_node, i):
    """One "tool call": leaves a mark (a call made twice shows), then waits for its gate."""
    with open(os.path.join(MARKS, f"tool-{{{{i}}}}"), "a") as f:
        f.write("x")
    with open(os.path.join(MARKS, "control"), "w") as f:
        f.write(os.environ.get("SWARMKIT_CONTROL", ""))
    while not os.path.exists(os.path.join(GATES, f"tool-{{{{i}}}}")):
        time.sleep(0.02)
    return f"result {{{{i}}}} of {{{{ctx_node}}}}"


def sync_loop(ctx):
    calls = list((ctx.resumed_from or {{{{}}}}).get("calls", []))
    for i in range(len(calls), {TOOLS}):
        ctx.boundary({{{{"calls": calls}}}})
        calls.append(tool(ctx.node, i))
        ctx.add_usage(tokens=1, cost=0.25)
    return {{{{"calls": calls}}}}


async def async_loop(ctx):
    calls = list((ctx.resumed_from or {{{{}}}}).get("calls", []))
    for i in range(len(calls), {TOOLS}):
        await ctx.aboundary({{{{"calls": calls}}}})
        calls.append(await asyncio.to_thread(tool, ctx.node, i))
        ctx.add_usage(tokens=1, cost=0.25)
    return {{{{"calls": calls}}}}


def command_loop():
    """The same loop as a command agent: the control file, $SWARMKIT_OUTPUT and exit 75."""
    state = json.load(open(os.environ["SWARMKIT_STATE"]))
    calls = list(state.get("_resumed_from", {{{{}}}}).get("calls", []))
    made = 0

    def leave(output, code):
        output["_usage"] = {{{{"tokens": made, "cost": 0.25 * made}}}}
        with open(os.environ["SWARMKIT_OUTPUT"], "w") as f:
            json.dump(output, f)
        sys.exit(code)

    for i in range(len(calls), {TOOLS}):
        try:
            with open(os.environ["SWARMKIT_CONTROL"]) as f:
                stop = json.load(f).get("stop_requested")
        except (OSError, ValueError):
            stop = False
        if stop:
            leave({{{{"calls": calls}}}}, 75)
        calls.append(tool(os.environ["SWARMKIT_NODE"], i))
        made += 1
    leave({{{{"calls": calls}}}}, 0)


if __name__ == "__main__":
    command_loop()
'''


def loop_flow(folder: Path, kind: str) -> tuple[Path, Path, Path]:
    marks, gates = folder / "marks", folder / "gates"
    marks.mkdir()
    gates.mkdir()
    (folder / "tooloop.py").write_text(LOOP.format(marks=str(marks), gates=str(gates)), encoding="utf-8")
    how = {
        "command": f'command = "{sys.executable} {folder}/tooloop.py"',
        "sync": 'call = "tooloop:sync_loop"',
        "async": 'call = "tooloop:async_loop"',
    }[kind]
    flow = write_flow(folder, f"loop-{kind}", f'name = "loop-{kind}"\n[[agents]]\nname = "loop"\n{how}\n[[agents]]\nname = "after"\ncommand = "echo after"\n')
    return flow, marks, gates


@pytest.mark.parametrize("kind", ["command", "sync", "async"])
def test_a_stop_lands_at_a_boundary_inside_the_node_and_resume_goes_on_from_it(cli: Cli, tmp_path: Path, kind: str):
    flow, marks, gates = loop_flow(tmp_path, kind)
    release(gates, *(f"tool-{i}" for i in range(TOOLS)))
    plain = cli.call("run", str(flow))
    assert plain.returncode == 0, plain.stderr
    plain_id = plain.stdout.split()[0]
    for i in range(TOOLS):
        (gates / f"tool-{i}").unlink()
        (marks / f"tool-{i}").unlink()

    proc = cli.start("run", str(flow))
    short = proc.stdout.readline().split()[0]
    release(gates, "tool-0", "tool-1", "tool-2")
    wait_for(lambda: (marks / "tool-3").exists(), what="the loop to be in its fourth tool call")
    res = cli.call("stop", short)
    assert res.returncode == 0, res.stderr
    if kind != "async":  # an async agent's aboundary reads the store; the others wait for the host's heartbeat
        # The node truncates and rewrites the file at every tool call: read it once it has its path
        # (read empty, between the two, once in a loaded full run: Path("") is the current folder).
        control = Path(wait_for(lambda: (marks / "control").read_text().strip(), what="the node to name its control file"))
        wait_for(lambda: json.loads(control.read_text()).get("stop_requested"), what="the host to tell the node")
    release(gates, "tool-3")
    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0, errs

    row = job(cli.store_url, cli.workspace, short)
    assert (row.status, row.step, row.current_node) == ("stopped", 0, "loop"), (out, errs)
    assert not (marks / "tool-4").exists(), "the stop landed at the boundary before the fifth tool call"
    assert row.tokens == 4 and row.cost == pytest.approx(1.0), "what the node spent up to its boundary is counted"
    partial = checkpoints(cli.store_url, cli.workspace, row.id)[-1].partial
    assert json.loads(partial) == {"calls": [f"result {i} of loop" for i in range(4)]}
    stopped = audit(cli.store_url, cli.workspace, row.id)[-1]
    assert stopped.action == "run.stopped" and stopped.detail == {"boundary": "loop", "step": "1/2", "inside": True}
    assert any(e.kind == "run.stopped" and "inside 1/2 loop" in e.text for e in events(cli.store_url, cli.workspace, row.id))

    release(gates, "tool-4", "tool-5")
    res = cli.call("run", "--resume", short)
    assert res.returncode == 0, res.stderr
    assert [(marks / f"tool-{i}").read_text() for i in range(TOOLS)] == ["x"] * TOOLS, "no tool call ran twice"
    a = checkpoints(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, plain_id).id)
    b = checkpoints(cli.store_url, cli.workspace, row.id)
    assert [c.state.encode() for c in a] == [c.state.encode() for c in b]
    ja, jb = job(cli.store_url, cli.workspace, plain_id), job(cli.store_url, cli.workspace, short)
    assert (ja.status, ja.tokens, ja.cost) == (jb.status, jb.tokens, jb.cost) == ("completed", TOOLS, 1.5)


def test_a_parked_exit_with_no_stop_requested_fails_the_run(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "sly", 'name = "sly"\n[[agents]]\nname = "sly"\ncommand = "echo \'{}\' > $SWARMKIT_OUTPUT; exit 75"\n')
    res = cli.call("run", str(flow))
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert row.status == "failed" and "exited 75 (parked at a boundary of its own) but no stop was requested" in row.error
