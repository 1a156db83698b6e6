"""`swarmkit stop --now`: the host interrupts the node in flight and parks the run before it;
on resume that node runs again from its start. Real stores, real `swarmkit` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import ALSO_PGBOUNCER, Cli, release, wait_for, write_flow
from .helpers import audit, checkpoints, events, job, pid_alive
from .test_stop_resume import start_foreground


@ALSO_PGBOUNCER
def test_stop_now_interrupts_a_command_agent_and_resume_runs_the_node_again(cli: Cli, tmp_path: Path):
    marks, gates = tmp_path / "marks", tmp_path / "gates"
    marks.mkdir()
    gates.mkdir()
    # b leaves a mark each time it starts, then waits in a child (sleep) until its gate opens.
    flow = write_flow(tmp_path, "long", f"""
        name = "long"
        [[agents]]
        name = "a"
        command = "echo '{{\\"a\\": 1}}' > $SWARMKIT_OUTPUT"
        [[agents]]
        name = "b"
        command = "echo b >> {marks}/b; sleep 300 & echo $! > {marks}/b.pid; while [ ! -e {gates}/b ]; do sleep 0.05; done; echo '{{\\"b\\": 2}}' > $SWARMKIT_OUTPUT"
        [[agents]]
        name = "c"
        command = "echo c >> {marks}/c"
    """)
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (marks / "b.pid").exists() and (marks / "b.pid").read_text().strip(), what="b to be in flight")
    sleeper = int((marks / "b.pid").read_text())

    res = cli.call("stop", "--now", short)
    assert res.returncode == 0, res.stderr
    assert f"stop --now requested for {short}" in res.stdout
    assert "work in flight is lost" in res.stdout and "runs again from its start on resume" in res.stdout
    again = cli.call("stop", "--now", short)
    assert again.returncode == 0 and "stop --now already requested" in again.stdout

    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0, errs
    assert f"{short} stopped before 2/3 b" in out
    row = job(cli.store_url, cli.workspace, short)
    assert (row.status, row.step, row.current_node) == ("stopped", 1, "b")
    assert not (marks / "c").exists()
    wait_for(lambda: not pid_alive(sleeper), timeout=10, what="b's child to be ended")
    acts = {a.action: a for a in audit(cli.store_url, cli.workspace, row.id)}
    assert acts["run.stop_requested"].detail["now"] is True
    assert acts["run.stopped"].detail == {"boundary": "b", "step": "2/3", "now": True, "interrupted": "b"}
    assert acts["run.stopped"].actor == "tester@ci"
    stopped = [e for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "run.stopped"]
    assert "b was interrupted" in stopped[0].text

    release(gates, "b")
    res = cli.call("run", "--resume", short)
    assert res.returncode == 0, res.stderr
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed" and not row.stop_now and row.stop_requested_at is None
    assert (marks / "b").read_text().count("b") == 2, "b runs again from its start"
    assert (marks / "c").read_text().count("c") == 1
    assert json.loads(checkpoints(cli.store_url, cli.workspace, row.id)[-1].state) == {"a": 1, "b": 2, "inputs": {}}


def repeatable_flow(folder: Path, kind: str) -> Path:
    """Four deterministic call agents (sync or async); each waits for its gate file."""
    gates = folder / "gates"
    gates.mkdir(exist_ok=True)
    module = f"rep_{kind}"
    wait = "await asyncio.sleep(0.02)" if kind == "async" else "time.sleep(0.02)"
    (folder / f"{module}.py").write_text(
        "import asyncio, hashlib, os, time\n"
        f"{'async ' if kind == 'async' else ''}def mix(ctx):\n"
        f"    open(os.path.join({str(folder)!r}, 'started-' + ctx.node), 'a').write('x')\n"
        f"    while not os.path.exists(os.path.join({str(gates)!r}, ctx.node)):\n"
        f"        {wait}\n"
        "    digest = hashlib.sha256(repr(sorted(ctx.state.items())).encode()).hexdigest()\n"
        "    ctx.log('mixing ' + ctx.node)\n"
        "    ctx.add_usage(tokens=7, cost=0.5)\n"
        "    return {'seen': ctx.state.get('seen', []) + [ctx.node], ctx.node: digest}\n"
    )
    body = f'name = "rep-{kind}"\n' + "".join(f'\n[[agents]]\nname = "n{i}"\ncall = "{module}:mix"\n' for i in range(4))
    return write_flow(folder, f"rep-{kind}", body)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stop_now_on_a_callable_then_resume_ends_byte_identical_to_an_uninterrupted_run(cli: Cli, tmp_path: Path, kind: str):
    flow = repeatable_flow(tmp_path, kind)
    release(tmp_path / "gates", "n0", "n1", "n2", "n3")
    plain = cli.call("run", str(flow), "--input", "topic=x")
    assert plain.returncode == 0, plain.stderr
    plain_id = plain.stdout.split()[0]
    for name in ("n1", "n2", "n3"):
        (tmp_path / "gates" / name).unlink()
        (tmp_path / f"started-{name}").unlink()

    proc = cli.start("run", str(flow), "--input", "topic=x")
    short = proc.stdout.readline().split()[0]
    wait_for(lambda: (tmp_path / "started-n1").exists(), what="n1 to be in flight")
    res = cli.call("stop", "--now", short)
    assert res.returncode == 0 and "work in flight is lost" in res.stdout, res.stdout + res.stderr
    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0, errs
    row = job(cli.store_url, cli.workspace, short)
    assert (row.status, row.step, row.current_node) == ("stopped", 1, "n1"), (out, errs)
    assert row.tokens == 7, "only the completed node's usage is counted"
    assert audit(cli.store_url, cli.workspace, row.id)[-1].detail["interrupted"] == "n1"

    release(tmp_path / "gates", "n1", "n2", "n3")
    assert cli.call("run", "--resume", short).returncode == 0
    assert (tmp_path / "started-n1").read_text() == "xx", "n1 ran again from its start"
    a = checkpoints(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, plain_id).id)
    b = checkpoints(cli.store_url, cli.workspace, row.id)
    assert [c.state.encode() for c in a] == [c.state.encode() for c in b]
    ja, jb = job(cli.store_url, cli.workspace, plain_id), job(cli.store_url, cli.workspace, short)
    assert (ja.tokens, ja.cost, ja.step, ja.status) == (jb.tokens, jb.cost, jb.step, jb.status) == (28, 2.0, 4, "completed")


def test_a_pending_stop_can_be_made_a_stop_now(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    gates.mkdir()
    flow = write_flow(tmp_path, "one", f'name = "one"\n[[agents]]\nname = "long"\ncommand = "echo hi; while [ ! -e {gates}/go ]; do sleep 0.05; done"\n')
    proc, short = start_foreground(cli, flow)
    wait_for(lambda: (j := job(cli.store_url, cli.workspace, short)) and j.current_node == "long", what="long in flight")
    assert "it will stop at the next agent boundary" in cli.call("stop", short).stdout
    res = cli.call("stop", "--now", short)
    assert f"stop --now requested for {short}" in res.stdout, res.stdout + res.stderr
    proc.communicate(timeout=60)
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "stopped" and row.step == 0 and row.stop_requested_by == "tester@ci"
    assert [a.action for a in audit(cli.store_url, cli.workspace, row.id)].count("run.stop_requested") == 2


def test_stop_now_over_http_on_a_run_the_server_hosts(cli: Cli, serving):
    from .test_serve import submit, wait_status

    serve, _folder, gates = serving
    s = serve()
    run = submit(s, "held")
    wait_for(lambda: any(e["kind"] == "log" for e in s.client.get(f"/jobs/{run['id']}/events").json()["events"]), what="the agent to start")
    resp = s.client.post(f"/jobs/{run['id']}/stop", json={"now": True})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["changed"] and body["job"]["stop_now"] is True and "work in flight is lost" in body["detail"]
    stopped = wait_status(s, run["id"], "stopped", timeout=30)
    assert (stopped["step"], stopped["current_node"]) == (0, "wait")
    again = s.client.post(f"/jobs/{run['id']}/stop", json={"now": True})
    assert again.status_code == 409 and again.json()["status"] == "stopped"
    last = s.client.get("/events", params={"job_id": run["id"]}).json()["events"][-1]
    assert last["action"] == "run.stopped" and last["detail"]["interrupted"] == "wait"
    release(gates, "go")
    assert s.client.post(f"/jobs/{run['id']}/resume").status_code == 200
    assert wait_status(s, run["id"], "completed")["stop_now"] is False
