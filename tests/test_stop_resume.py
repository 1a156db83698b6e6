"""Stop and resume, end to end: real stores, real `swarmkit` processes, stops sent from another process."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from swarmkit.runtime import control
from swarmkit.runtime.errors import RunStoppedError
from swarmkit.runtime.executor import RunHost
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store

from .conftest import ALSO_PGBOUNCER, Cli, child_env, hold, release, wait_for, write_flow
from .helpers import audit, checkpoints, events, job


def slow_flow(folder: Path, marks: Path) -> Path:
    """Three agents; each leaves a mark outside the run's workspace, then waits for release(gates, name)."""
    marks.mkdir(exist_ok=True)
    body = 'name = "slow"\n'
    for name, tokens in (("a", 10), ("b", 20), ("c", 30)):
        body += f"""
[[agents]]
name = "{name}"
command = "echo {name} >> {marks}/{name}; echo working on {name}; {hold(marks / 'gates', name)}; echo '{{\\"{name}\\": true, \\"_usage\\": {{\\"tokens\\": {tokens}, \\"cost\\": 0.01}}}}' > $SWARMKIT_OUTPUT"
"""
    return write_flow(folder, "slow", body)


def start_foreground(cli: Cli, flow: Path) -> tuple:
    proc = cli.start("run", str(flow), str(cli.workspace))
    first = proc.stdout.readline()
    assert " running " in first, first + proc.stderr.read()
    short = first.split()[0]
    return proc, short


@ALSO_PGBOUNCER
def test_stop_from_another_process_parks_the_run_at_the_next_boundary(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    flow = slow_flow(tmp_path, marks)
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (marks / "a").exists(), what="agent a to start")

    res = cli.call("stop", short)
    assert res.returncode == 0, res.stderr
    assert f"stop requested for {short} — it will stop at the next agent boundary" in res.stdout
    assert "finish that call first" in res.stdout
    release(marks / "gates", "a", "b", "c")

    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0, errs
    assert f"{short} stopped before 2/3 b." in out  # the node it parks before, numbered as the table numbers it
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "stopped"
    assert row.step == 1 and row.current_node == "b"
    assert not (marks / "b").exists(), "the agent after the boundary must not run"
    # The work before the stop survives: its events, its audit, its usage.
    evs = events(cli.store_url, cli.workspace, row.id)
    assert any(e.kind == "log" and e.text == "working on a" for e in evs)
    assert any(e.kind == "node.finished" and e.node == "a" for e in evs)
    assert row.tokens == 10 and row.cost == pytest.approx(0.01)
    acts = {a.action: a for a in audit(cli.store_url, cli.workspace, row.id)}
    assert acts["run.stop_requested"].actor == "tester@ci"
    assert acts["run.stopped"].actor == "tester@ci"
    assert acts["run.stopped"].detail["boundary"] == "b"
    # The same run through `swarmkit logs`, from any process.
    logs = cli.call("logs", short)
    assert "working on a" in logs.stdout and "[run.stopped]" in logs.stdout


async def test_boundary_raises_run_stopped_and_the_node_does_not_run(store_url, workspace: Path, tmp_path: Path, fast_env):
    marker = tmp_path / "ran"
    flow = parse_flow(f'name = "one"\n[[agents]]\nname = "x"\ncommand = "touch {marker}"\n')
    store = await Store.open(store_url, workspace)
    try:
        job_row = await control.submit(store, flow, {}, host_here=True)
        host = RunHost(store, job_row.id, job_row.epoch, flow)
        import asyncio

        other = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "swarmkit.cli", "stop", "--store", store_url, job_row.id,
            cwd=str(workspace), env=child_env(), stdout=asyncio.subprocess.DEVNULL,
        )
        assert await other.wait() == 0
        with pytest.raises(RunStoppedError) as caught:
            await host.node_fn(0, flow.agents[0], {"inputs": {}})
        assert caught.value.node == "x" and caught.value.requested_by == "tester@ci"
        assert not marker.exists()
        # A seen stop latches: clearing the row does not un-stop this host.
        from sqlalchemy import update

        from swarmkit.store.models import jobs

        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == job_row.id).values(stop_requested_at=None))
        with pytest.raises(RunStoppedError):
            await host.node_fn(0, flow.agents[0], {"inputs": {}})
        assert not marker.exists()
    finally:
        await store.close()


def test_a_stopped_run_resumes_through_run_resume_and_does_not_stop_again(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    flow = slow_flow(tmp_path, marks)
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (marks / "a").exists(), what="agent a to start")
    assert cli.call("stop", short).returncode == 0
    release(marks / "gates", "a", "b", "c")
    proc.communicate(timeout=60)
    assert job(cli.store_url, cli.workspace, short).status == "stopped"

    res = cli.call("run", "--resume", short)
    assert res.returncode == 0, res.stderr
    assert f"{short} completed" in res.stdout
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed" and row.step == 3
    assert row.stop_requested_at is None, "resume clears the flag"
    assert row.tokens == 60
    # Each agent ran exactly once.
    assert [(marks / n).read_text().count(n) for n in "abc"] == [1, 1, 1]
    acts = [a.action for a in audit(cli.store_url, cli.workspace, row.id)]
    assert acts.count("run.resumed") == 1


def test_a_stopped_run_resumes_through_a_worker_after_a_queue_resume(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    flow = slow_flow(tmp_path, marks)
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (marks / "a").exists(), what="agent a to start")
    assert cli.call("stop", short).returncode == 0
    release(marks / "gates", "a", "b", "c")
    proc.communicate(timeout=60)

    res = cli.call("resume", short)  # the console's kind of resume: back to queued
    assert res.returncode == 0, res.stderr
    assert "queued" in res.stdout
    assert "no live worker" in res.stderr
    assert job(cli.store_url, cli.workspace, short).status == "queued"
    worker = cli.start("worker", "--concurrency", "2")
    try:
        wait_for(lambda: job(cli.store_url, cli.workspace, short).status == "completed", timeout=60, what="the worker to complete the run")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, short)
    assert row.stop_requested_at is None and row.step == 3
    assert [(marks / n).read_text().count(n) for n in "abc"] == [1, 1, 1]


def deterministic_flow(folder: Path) -> Path:
    gates = folder / "gates"
    gates.mkdir(exist_ok=True)
    (folder / "detagents.py").write_text(
        "import hashlib, os, time\n"
        "def mix(ctx):\n"
        f"    while not os.path.exists(os.path.join({str(gates)!r}, ctx.node)):\n"
        "        time.sleep(0.02)\n"
        "    seen = ctx.state.get('seen', [])\n"
        "    digest = hashlib.sha256(repr(sorted(ctx.state.items())).encode()).hexdigest()\n"
        "    ctx.log('mixing ' + ctx.node)\n"
        "    ctx.add_usage(tokens=7, cost=0.5)\n"
        "    return {'seen': seen + [ctx.node], ctx.node: digest, 'ünï': 'ok'}\n"
    )
    body = 'name = "det"\n' + "".join(f'\n[[agents]]\nname = "n{i}"\ncall = "detagents:mix"\n' for i in range(4))
    return write_flow(folder, "det", body)


def test_a_stopped_and_resumed_run_ends_byte_identical_to_an_uninterrupted_one(cli: Cli, tmp_path: Path):
    flow = deterministic_flow(tmp_path)
    release(tmp_path / "gates", "n0", "n1", "n2", "n3")
    plain_run = cli.call("run", str(flow), "--input", "topic=x")
    assert plain_run.returncode == 0, plain_run.stderr
    plain_id = plain_run.stdout.split()[0]

    for name in ("n1", "n2", "n3"):
        (tmp_path / "gates" / name).unlink()
    proc = cli.start("run", str(flow), "--input", "topic=x")
    short = proc.stdout.readline().split()[0]
    wait_for(lambda: (j := job(cli.store_url, cli.workspace, short)) and j.step >= 1, what="the first agent to finish")
    assert cli.call("stop", short).returncode == 0
    release(tmp_path / "gates", "n1", "n2", "n3")
    proc.communicate(timeout=60)
    assert job(cli.store_url, cli.workspace, short).status == "stopped"
    assert cli.call("run", "--resume", short).returncode == 0

    a = checkpoints(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, plain_id).id)
    b = checkpoints(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, short).id)
    assert [c.state for c in a] == [c.state for c in b]
    assert a[-1].state.encode() == b[-1].state.encode()
    assert json.loads(b[-1].state)["seen"] == ["n0", "n1", "n2", "n3"]
    ja, jb = job(cli.store_url, cli.workspace, plain_id), job(cli.store_url, cli.workspace, short)
    assert (ja.tokens, ja.cost, ja.step) == (jb.tokens, jb.cost, jb.step) == (28, 2.0, 4)


def test_ctrl_c_stops_then_a_second_ctrl_c_cancels(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    flow = slow_flow(tmp_path, marks)
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (marks / "a").exists(), what="agent a to start")
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: job(cli.store_url, cli.workspace, short).stop_requested_at is not None, what="the stop flag")
    proc.send_signal(signal.SIGINT)
    out, errs = proc.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "cancelled", (out, errs)
    assert "stop requested" in errs and "cancel requested" in errs
    assert not (marks / "b").exists()
