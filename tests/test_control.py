"""Run control rules on both stores: statuses on every surface, no-ops, refusals, ids, audit, cancel."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import registry

from swarmkit.runtime import control
from swarmkit.runtime.executor import read_flags
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store
from swarmkit.store.models import JOB_COLUMNS, jobs
from tests.reliability import console_in_process

from .conftest import ALSO_PGBOUNCER, Cli, child_env, hold, release, wait_for, write_flow
from .helpers import CANCELLED_WITHIN_S, ROOMY_LEASE, audit, events, group_alive, job, workspaces

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "echo hi"\n'


def make_every_status(cli: Cli, tmp_path: Path) -> dict[str, str]:
    """One run in each of stopped, deferred, failed, cancelled, completed; returns status -> short id."""
    ids: dict[str, str] = {}
    # The runs hosted here (in this process) are about statuses, not leases.
    roomy = ROOMY_LEASE
    ok = write_flow(tmp_path, "ok", ONE)
    res = cli.call("run", str(ok), env=roomy, check=True)
    ids["completed"] = res.stdout.split()[0]
    gate = write_flow(tmp_path, "gate", 'name = "gated"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "true"\n')
    ids["deferred"] = cli.call("run", str(gate), env=roomy, check=True).stdout.split()[0]
    bad = write_flow(tmp_path, "bad", 'name = "bad"\n[[agents]]\nname = "boom"\ncommand = "echo failing; exit 3"\n')
    res = cli.call("run", str(bad), env=roomy)
    assert res.returncode == 1 and "exited with status 3" in res.stderr
    ids["failed"] = res.stdout.split()[0]
    ids["stopped"] = cli.call("run", "--detach", str(ok), check=True).stdout.strip()[:8]
    assert cli.call("stop", ids["stopped"]).returncode == 0
    ids["cancelled"] = cli.call("run", "--detach", str(ok), check=True).stdout.strip()[:8]
    assert cli.call("cancel", ids["cancelled"]).returncode == 0
    ids["queued"] = cli.call("run", "--detach", str(ok), check=True).stdout.strip()[:8]
    return ids


def test_stopped_is_distinct_in_the_row_and_every_surface(cli: Cli, tmp_path: Path):
    ids = make_every_status(cli, tmp_path)
    for status, short in ids.items():
        assert job(cli.store_url, cli.workspace, short).status == status
    listing = json.loads(cli.call("status", "--json", check=True).stdout)
    by_short = {v["short_id"]: v for v in listing["runs"]}
    for status, short in ids.items():
        assert by_short[short]["status"] == status
        assert by_short[short]["display_status"] == status
        one = json.loads(cli.call("status", short, "--json", check=True).stdout)
        assert one["status"] == status
    table = cli.call("status", check=True).stdout
    for status, short in ids.items():
        line = next(l for l in table.splitlines() if l.startswith(short))
        assert f" {status} " in line
    once = console_once(cli)
    for status, short in ids.items():
        line = next(l for l in once.splitlines() if l.startswith(short))
        assert f" {status} " in line


def console_once(cli: Cli, *extra: str) -> str:
    """`swarmkit-console --once`, through its main() in this process (what it prints is the point here)."""
    res = console_in_process(cli.store_url, "--once", *extra, cwd=cli.workspace)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_every_jobs_column_is_reachable_in_the_merged_view(cli: Cli, tmp_path: Path):
    ids = make_every_status(cli, tmp_path)
    one = json.loads(cli.call("status", ids["completed"], "--json", check=True).stdout)
    listing = json.loads(cli.call("status", "--json", check=True).stdout)
    dump = json.loads(console_once(cli, "--json"))
    assert dump["schema"] == 1 and dump["store"]
    for view in (one, listing["runs"][0], dump["runs"][0]):
        missing = [c for c in JOB_COLUMNS if c not in view]
        assert not missing, f"columns missing from the merged view: {missing}"
        assert "display_status" in view and isinstance(view["workspaces"], list)
    assert one["workspaces"] and set(one["workspaces"][0]) == {"path", "state"}
    # Every column of the real row is what the view says.
    row = job(cli.store_url, cli.workspace, ids["completed"])
    assert one["id"] == row.id and one["epoch"] == row.epoch and one["steps"] == row.steps == 1


def test_noops_refusals_and_unknown_ids(cli: Cli, tmp_path: Path):
    ids = make_every_status(cli, tmp_path)
    done = ids["completed"]
    res = cli.call("stop", done)
    assert res.returncode == 0 and f"{done} is completed; nothing to stop." in res.stdout
    res = cli.call("cancel", done)
    assert res.returncode == 0 and "nothing to cancel" in res.stdout
    res = cli.call("run", "--resume", done)
    assert res.returncode == 1 and f"cannot resume {done}: it is completed." in res.stderr
    for status in ("failed", "cancelled"):
        res = cli.call("resume", ids[status])
        assert res.returncode == 1 and f"it is {status}" in res.stderr
    res = cli.call("stop", ids["stopped"])
    assert res.returncode == 0 and "already stopped" in res.stdout
    res = cli.call("approve", ids["stopped"])
    assert res.returncode == 1 and "not waiting at a gate" in res.stderr
    res = cli.call("stop", "deadbeef00")
    assert res.returncode == 2 and "no run matches 'deadbeef00'" in res.stderr
    res = cli.call("stop", "not-hex!")
    assert res.returncode == 2 and "'not-hex!'" in res.stderr


async def test_an_ambiguous_prefix_lists_the_candidates(store_url, workspace: Path):
    flow = parse_flow(ONE)
    store = await Store.open(store_url, workspace)
    try:
        made = [await control.submit(store, flow, {}) for _ in range(17)]  # two must share a first digit
        firsts: dict[str, list[str]] = {}
        for j in made:
            firsts.setdefault(j.id[0], []).append(j.short_id)
        prefix, shorts = next((k, v) for k, v in firsts.items() if len(v) > 1)
        with pytest.raises(control.AmbiguousRun) as caught:
            await control.stop(store, prefix)
        for s in shorts:
            assert s in str(caught.value)
        # A unique prefix works.
        res = await control.stop(store, made[0].id[:12])
        assert res.changed and res.job.status == "stopped"
    finally:
        await store.close()


def test_stop_twice_rereports_and_resume_clears(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    began = tmp_path / "began"
    flow = write_flow(tmp_path, "long", f'name = "long"\n[[agents]]\nname = "wait"\ncommand = "touch {began}; {hold(gates, "wait")}"\n[[agents]]\nname = "after"\ncommand = "true"\n')
    proc = cli.start("run", str(flow))
    short = proc.stdout.readline().split()[0]
    # In flight, so that both stops find it running (a stop before the first boundary parks it at once).
    wait_for(began.exists, what="the first agent to start")
    first = cli.call("stop", short, env={"SWARMKIT_ACTOR": "alice@desk"})
    second = cli.call("stop", short, env={"SWARMKIT_ACTOR": "bob@desk"})
    release(gates, "wait")
    assert "stop requested" in first.stdout
    assert second.returncode == 0 and "stop already requested" in second.stdout and "alice@desk" in second.stdout
    proc.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "stopped" and row.stop_requested_by == "alice@desk"
    stops = [a for a in audit(cli.store_url, cli.workspace, row.id) if a.action == "run.stop_requested"]
    assert len(stops) == 1, "a second stop does not stack"


@ALSO_PGBOUNCER
def test_cancel_interrupts_a_long_command_and_leaves_no_process(cli: Cli, tmp_path: Path):
    pidfile = tmp_path / "pid"
    flow = write_flow(
        tmp_path, "sleepy",
        f'name = "sleepy"\n[[agents]]\nname = "nap"\ncommand = "echo $$ > {pidfile}; sleep 600 & sleep 600"\n[[agents]]\nname = "never"\ncommand = "touch {tmp_path}/never"\n',
    )
    proc = cli.start("run", str(flow))
    short = proc.stdout.readline().split()[0]
    pgid = os.getpgid(int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the agent's pid")))
    assert group_alive(pgid)
    res = cli.call("cancel", short)
    assert res.returncode == 0 and "cancel requested" in res.stdout and "destroyed" in res.stdout
    # The contract's deadline, five times over: SIGINT, SWARMKIT_INTERRUPT_GRACE, SIGTERM, SWARMKIT_TERM_GRACE, SIGKILL.
    wait_for(
        lambda: job(cli.store_url, cli.workspace, short).status == "cancelled", timeout=CANCELLED_WITHIN_S,
        what="the run to end cancelled (within 5x SWARMKIT_INTERRUPT_GRACE + SWARMKIT_TERM_GRACE, the cancel's graces)",
    )
    wait_for(lambda: not group_alive(pgid), timeout=10, what="the agent's process group to be gone")
    proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert not (tmp_path / "never").exists()
    row = job(cli.store_url, cli.workspace, short)
    ws = workspaces(cli.store_url, cli.workspace, row.id)
    assert ws and all(w.state == "destroyed" for w in ws) and not Path(ws[0].path).exists()
    acts = {a.action: a for a in audit(cli.store_url, cli.workspace, row.id)}
    assert acts["run.cancelled"].detail["keep"] is False and acts["run.cancelled"].actor == "tester@ci"
    kinds = [e.text for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "runtime"]
    assert any("SIGINT" in t for t in kinds)


def test_cancel_keep_keeps_the_workspace_and_audits_keep(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "files", 'name = "files"\n[[agents]]\nname = "write"\ncommand = "echo data > result.txt; sleep 600"\n')
    proc = cli.start("run", str(flow))
    short = proc.stdout.readline().split()[0]
    wait_for(lambda: (ws := workspaces(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, short).id)) and (Path(ws[0].path) / "result.txt").exists(), what="the agent's file")
    res = cli.call("cancel", short, "--keep")
    assert res.returncode == 0 and "kept" in res.stdout
    proc.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "cancelled" and row.cancel_keep is True
    ws = workspaces(cli.store_url, cli.workspace, row.id)
    assert [w.state for w in ws] == ["kept"]
    assert (Path(ws[0].path) / "result.txt").read_text() == "data\n"
    acts = {a.action: a for a in audit(cli.store_url, cli.workspace, row.id)}
    assert acts["run.cancelled"].detail["keep"] is True


def test_cancel_of_a_parked_run_is_at_once_and_terminal_never_changes(cli: Cli, tmp_path: Path):
    ids = make_every_status(cli, tmp_path)
    res = cli.call("cancel", ids["deferred"])
    assert res.returncode == 0 and "cancelled (it was deferred)" in res.stdout
    assert job(cli.store_url, cli.workspace, ids["deferred"]).status == "cancelled"
    for verb in ("stop", "cancel", "resume", "approve"):
        cli.call(verb, ids["deferred"])
        assert job(cli.store_url, cli.workspace, ids["deferred"]).status == "cancelled"


class Job:
    """An ORM class on the jobs table, for the trap below only: the store itself maps no classes."""


registry().map_imperatively(Job, jobs)


async def test_a_long_lived_session_still_sees_a_flag_set_by_another_process(store_url, workspace: Path):
    flow = parse_flow(ONE)
    # A host's two lanes: the session holds one connection, the boundary check has the other.
    store = await Store.open(store_url, workspace, connections=2)
    try:
        row = await control.submit(store, flow, {}, host_here=True)
        async with AsyncSession(store.engine, expire_on_commit=False) as session:
            cached = await session.get(Job, row.id)
            assert cached.stop_requested_at is None
            # The session lives on with the row in its identity map; its transaction need not: the server
            # ends one idle past PG_IDLE_IN_TRANSACTION_MS, and a `swarmkit` process may take longer to start.
            await session.commit()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "swarmkit.cli", "stop", "--store", store_url, row.id,
                cwd=str(workspace), env=child_env(), stdout=asyncio.subprocess.DEVNULL,
            )
            assert await proc.wait() == 0
            # The trap: the long-lived session's identity map still says "not stopped".
            again = await session.get(Job, row.id)
            assert again.stop_requested_at is None
            # The boundary check reads the flag itself, fresh, while that session is still open.
            flags = await read_flags(store, row.id)
            assert flags.stop_requested_at is not None and flags.stop_requested_by == "tester@ci"
    finally:
        await store.close()


def test_a_stop_never_goes_missing_on_a_hundred_near_instant_agents(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    # Async callables run on the host's own loop: the agents really are near-instant (a sync callable
    # would cost a Python process per agent), so boundaries come as fast as the host can write them.
    (tmp_path / "quick.py").write_text("import asyncio\nasync def tick(ctx):\n    await asyncio.sleep(0.01)\n    return {ctx.node: ctx.step}\n")
    # The second-to-last agent waits for the test, so wherever the stop lands, a boundary is still ahead.
    body = 'name = "hundred"\n'
    for i in range(100):
        body += f'[[agents]]\nname = "t{i:03d}"\n' + (f'command = "{hold(gates, "last")}"\n' if i == 98 else 'call = "quick:tick"\n')
    flow = write_flow(tmp_path, "hundred", body)
    for attempt in range(3):
        (gates / "last").unlink(missing_ok=True)
        proc = cli.start("run", str(flow))
        short = proc.stdout.readline().split()[0]
        seen = wait_for(lambda: (j := job(cli.store_url, cli.workspace, short)) and j.step >= 5 + attempt * 15 and j, what="some agents to finish")
        res = cli.call("stop", short)
        release(gates, "last")
        proc.communicate(timeout=60)
        row = job(cli.store_url, cli.workspace, short)
        if "nothing to stop" in res.stdout:
            pytest.fail(f"the run outran the test: {res.stdout}")
        assert row.status == "stopped", f"attempt {attempt}: stop missed, run ended {row.status}"
        assert "stop requested" in res.stdout
        assert seen.step <= row.step < 100
        finished = [e for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "node.finished"]
        assert len(finished) == row.step
        stopped = next(a for a in audit(cli.store_url, cli.workspace, row.id) if a.action == "run.stopped")
        assert stopped.detail["step"] == f"{row.step + 1}/{row.steps}"  # the node it parked before, 1-based


def test_one_step_numbering_on_every_surface(cli: Cli, tmp_path: Path):
    """Deferred, approved (queued) and stopped, the run is at `2/2 two` in the table, the act's words, audit and events."""
    flow = write_flow(tmp_path, "two", 'name = "two"\n[[agents]]\nname = "one"\ncommand = "true"\n[[agents]]\nname = "two"\napprove = true\ncommand = "true"\n')
    short = cli.call("run", str(flow), check=True).stdout.split()[0]

    def table_line() -> str:
        return next(line for line in cli.call("status", check=True).stdout.splitlines() if line.startswith(short))

    assert " deferred " in table_line() and "2/2 two" in table_line()
    approved = cli.call("approve", short, check=True).stdout
    assert "at agent 2/2 two" in approved, approved
    assert " queued " in table_line() and "2/2 two" in table_line()  # it was "1/2 two" once queued
    assert "stopped at once" in cli.call("stop", short, check=True).stdout
    assert " stopped " in table_line() and "2/2 two" in table_line()
    row = job(cli.store_url, cli.workspace, short)
    steps = {a.action: a.detail.get("step") for a in audit(cli.store_url, cli.workspace, row.id) if "step" in a.detail}
    assert steps == {"gate.approved": "2/2", "run.resumed": "2/2", "run.stop_requested": "2/2", "run.stopped": "2/2"}, steps
    texts = {e.kind: e.text for e in events(cli.store_url, cli.workspace, row.id)}
    assert texts["node.started"] == "1/2 one" and texts["node.finished"].startswith("1/2 one done")
    assert "before 2/2 two" in texts["run.deferred"], texts["run.deferred"]


def test_malformed_flows_are_refused_before_any_run_exists(cli: Cli, tmp_path: Path):
    cases = {
        "syntax": ('name = "x"\n[[agents]]\nname = "a"\ncommand = "echo\n', ":4:", "not valid TOML"),
        "noagent": ('name = "x"\n', "", "at least one [[agents]]"),
        "both": ('name = "x"\n[[agents]]\nname = "a"\ncommand = "true"\ncall = "m:f"\n', ":2:", "exactly one of"),
        "dup": ('name = "x"\n[[agents]]\nname = "a"\ncommand = "true"\n[[agents]]\nname = "a"\ncommand = "true"\n', ":5:", "defined twice"),
        "unknowncall": ('name = "x"\n[[agents]]\nname = "a"\ncall = "no_such_module_zz:f"\n', "", "cannot import module 'no_such_module_zz'"),
        "badkey": ('name = "x"\nfoo = 1\n[[agents]]\nname = "a"\ncommand = "true"\n', ":2:", "unknown key 'foo'"),
    }
    for name, (body, line, words) in cases.items():
        path = write_flow(tmp_path, name, body)
        res = cli.call("run", str(path))
        assert res.returncode == 2, (name, res.stdout, res.stderr)
        assert str(path) in res.stderr and words in res.stderr, (name, res.stderr)
        if line:
            assert f"{path}{line}" in res.stderr, (name, res.stderr)
    res = cli.call("run", str(tmp_path / "missing.toml"))
    assert res.returncode == 2 and "no such flow file" in res.stderr
    ok = write_flow(tmp_path, "ok", ONE)
    res = cli.call("run", str(ok), "--input", "novalue")
    assert res.returncode == 2 and "expected key=value" in res.stderr
    # Refused before anything was written: no run, and no store made for one.
    looked = cli.call("status", "--json")
    assert (looked.returncode == 2 and "no store at" in looked.stderr) or json.loads(looked.stdout)["runs"] == [], looked.stderr


def test_command_agents_see_their_environment_and_inputs(cli: Cli, tmp_path: Path):
    flow = write_flow(
        tmp_path, "env",
        'name = "env"\n[[agents]]\nname = "look"\n'
        "command = \"echo node=$SWARMKIT_NODE run=$SWARMKIT_RUN_ID; python3 -c 'import json,os; s=json.load(open(os.environ[\\\"SWARMKIT_STATE\\\"])); json.dump({\\\"echo\\\": s[\\\"inputs\\\"][\\\"who\\\"]}, open(os.environ[\\\"SWARMKIT_OUTPUT\\\"], \\\"w\\\"))'\"\n"
        "[[agents]]\nname = \"after\"\ncommand = \"python3 -c 'import json,os; print(json.load(open(os.environ[\\\"SWARMKIT_STATE\\\"]))[\\\"echo\\\"])'\"\n",
    )
    res = cli.call("run", str(flow), "--input", "who=operator", "--input", "n=1")
    assert res.returncode == 0, res.stderr
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    lines = [e.text for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "log"]
    assert f"node=look run={row.id}" in lines and "operator" in lines
    assert json.loads(row.inputs) == {"who": "operator", "n": "1"}


def test_a_stop_sent_during_any_agent_of_a_fast_pipeline_lands_at_the_very_next_boundary(cli: Cli, tmp_path: Path):
    """Instant agents; one of them asks another process to stop the run. It must stop right after.

    The instant agents are async callables, on the host's own loop (a sync callable would cost a
    Python process per agent); the one that sends the stop is a command running `swarmkit stop`."""
    (tmp_path / "instant.py").write_text("async def tick(ctx):\n    return {ctx.node: ctx.step}\n")
    stop_cmd = f"{sys.executable} -m swarmkit.cli stop --store '{cli.store_url}' $SWARMKIT_RUN_ID"
    for at in (0, 57, 98):
        body = 'name = "instant"\n'
        for i in range(100):
            if i == at:
                body += f'[[agents]]\nname = "t{i:03d}"\ncommand = "{stop_cmd}"\n'
            else:
                body += f'[[agents]]\nname = "t{i:03d}"\ncall = "instant:tick"\n'
        flow = write_flow(tmp_path, f"instant{at}", body)
        res = cli.call("run", str(flow))
        assert res.returncode == 0, res.stderr
        row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
        assert row.status == "stopped", f"stop sent during agent {at} was missed: {row.status}"
        assert row.step == at + 1 and row.current_node == f"t{at + 1:03d}"


def test_a_failed_run_names_the_node_it_failed_in(cli: Cli, tmp_path: Path):
    """The operator's first question about a failed run is where: the row, the merged view and the table say it."""
    flow = write_flow(tmp_path, "breaks", 'name = "breaks"\n[[agents]]\nname = "fetch"\ncommand = "true"\n[[agents]]\nname = "parse"\ncommand = "echo bad input; exit 4"\n')
    res = cli.call("run", str(flow))
    assert res.returncode == 1, res.stdout + res.stderr
    short = res.stdout.split()[0]
    assert f"{short} failed: parse:" in res.stderr, res.stderr
    view = json.loads(cli.call("status", short, "--json", check=True).stdout)
    assert (view["status"], view["current_node"], view["step"]) == ("failed", "parse", 1)
    table = cli.call("status", check=True).stdout
    line = next(l for l in table.splitlines() if l.startswith(view["id"][:8]))
    assert "2/2 parse" in line, line
