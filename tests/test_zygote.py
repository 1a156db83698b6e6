"""Sync `call` agents started by the host's zygote: a fork, contained exactly as an exec'd one.

Real `swarmkit run` hosts, a real zygote, agents that start a child, a child in
a session of its own and a double-forked daemon. Each agent records its own pid
and its supervisor's in the ledger (test_containment's: pid and start time, so
a reused pid is never taken for the agent), the zygote's in a ledger of its
own, and its command line, which tells a fork of the zygote from an exec of
call_child. After each end every recorded process is checked dead through /proc.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path

from swarmkit.runtime import zygote as zygote_module
from swarmkit.runtime.agent_process import LineSink
from swarmkit.runtime.agents import ProcessHooks, make_context, run_sync_call
from swarmkit.runtime.flow import Agent
from swarmkit.runtime.flow_modules import RunModules

from .conftest import Cli, release, wait_for, write_flow
from .helpers import CANCELLED_WITHIN_S, events, job
from .test_containment import (
    INTERRUPT_GRACE_S,
    TERM_GRACE_S,
    Ledger,
    alive,
    assert_all_dead,
    assert_quiet_after_end,
    full_id,
    run_dir,
    start_foreground,
)
from .test_containment import ledger as ledger  # a fixture, re-exported for pytest
from .test_containment import started as started  # a fixture, re-exported for pytest

AGENTS = '''
import os, subprocess, sys, time
from pathlib import Path

LEDGER = Path({ledger!r})


def _fields(pid):
    stat = open(f"/proc/{{pid}}/stat").read()
    return stat[stat.rfind(")") + 2 :].split()


def _record(name, pid):
    with open(LEDGER / name, "a") as f:
        f.write(f"{{pid}} {{_fields(pid)[19]}}\\n")


def lineage():
    """The agent, its supervisor (both must end with the node) and whoever forked the supervisor."""
    me, supervisor = os.getpid(), os.getppid()
    _record("pids", me)
    _record("pids", supervisor)
    _record("forkers", int(_fields(supervisor)[1]))
    (LEDGER / f"cmdline.{{me}}").write_bytes(open("/proc/self/cmdline", "rb").read())
    return me


def spawner(ctx):
    lineage()
    tick = str(LEDGER / "tick.sh")
    subprocess.Popen(["sh", tick, "child"])
    subprocess.Popen(["sh", tick, "session"], start_new_session=True)
    subprocess.run(["sh", "-c", f"( setsid sh {{tick}} daemon </dev/null >/dev/null 2>&1 & )"])
    print("spawned its children", flush=True)
    while True:
        if all((LEDGER / f"{{n}}.tick").exists() for n in ("child", "session", "daemon")):
            (LEDGER / "ready").touch()
        with open(LEDGER / "call.tick", "a") as f:
            f.write(f"{{os.getpid()}} {{time.time():.6f}}\\n")
        time.sleep(0.05)


def talker(ctx):
    me = lineage()
    print(f"out line from {{me}}")
    print(f"err line from {{me}}", file=sys.stderr)
    ctx.log("logged through ctx")
    return {{"pid_" + ctx.node: me, "warnoptions": list(sys.warnoptions)}}
'''


def agents_flow(tmp_path: Path, led: Ledger, name: str, agents: str) -> Path:
    led.ticker()
    folder = tmp_path / "flows"
    folder.mkdir(exist_ok=True)
    (folder / "zagents.py").write_text(AGENTS.format(ledger=str(led.root)))
    return write_flow(folder, name, f'name = "{name}"\n{agents}')


def forkers(led: Ledger) -> list[tuple[int, str]]:
    path = led.root / "forkers"
    return [(int(a), b) for a, b in (line.split() for line in path.read_text().splitlines())] if path.exists() else []


def cmdlines(led: Ledger) -> dict[int, str]:
    """Each agent's command line, by its pid."""
    return {int(p.suffix[1:]): p.read_bytes().replace(b"\0", b" ").decode() for p in led.root.glob("cmdline.*")}


def assert_forked_by_a_zygote(led: Ledger) -> None:
    lines = cmdlines(led)
    assert lines and all("swarmkit.runtime.zygote_server" in c for c in lines.values()), f"not forked by the zygote: {lines}"


# --- ended with all it started: cancel, timeout, a dead host ----------------------------------------


def test_a_zygote_started_node_is_ended_on_cancel_with_its_children(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """A sync agent forked by the zygote starts a child, a child with a session of its own and a
    double-forked daemon, then loops: cancel the run. It reads cancelled with the agent, its
    supervisor and all three children dead, nothing is written afterwards, and once the host has
    exited its zygote is gone too."""
    flow = agents_flow(tmp_path, ledger, "spawn", '[[agents]]\nname = "spawn"\ncall = "zagents:spawner"\n')
    proc, short = start_foreground(cli, started, str(flow))
    rid = full_id(cli, short)
    wait_for(lambda: (ledger.root / "ready").exists() and len(ledger.recorded()) >= 5, timeout=30, what="the agent and its three children to tick")
    assert_forked_by_a_zygote(ledger)
    res = cli.call("cancel", short, str(cli.workspace))
    assert res.returncode == 0 and "cancel requested" in res.stdout, res.stdout + res.stderr
    out, errs = proc.communicate(timeout=CANCELLED_WITHIN_S)
    assert f"{short} cancelled" in out, out + errs
    assert job(cli.store_url, cli.workspace, rid).status == "cancelled"
    assert_all_dead(ledger, "at cancelled")
    assert_quiet_after_end(cli, rid, "run.cancelled", ledger.root, run_dir(cli, rid))
    wait_for(lambda: not ledger.living(forkers(ledger)), timeout=10, what="the zygote to leave with its host")


def test_a_zygote_started_node_past_its_timeout_is_ended_with_its_children(cli: Cli, tmp_path: Path, ledger: Ledger):
    """The same agent under `timeout`: the try is interrupted, the run fails naming the timeout, and the
    agent, its supervisor and its children (the daemon too) are dead by then."""
    flow = agents_flow(tmp_path, ledger, "slow", '[[agents]]\nname = "spawn"\ntimeout = "6s"\ncall = "zagents:spawner"\n')
    res = cli.call("run", str(flow))
    assert res.returncode == 1, res.stdout + res.stderr
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert row.status == "failed" and row.error == "spawn: timed out after 6s", (row.status, row.error)
    assert (ledger.root / "ready").exists(), "the children had not all started within the timeout (a loaded machine): the test proves less"
    assert len(ledger.recorded()) == 5
    assert_forked_by_a_zygote(ledger)
    assert_all_dead(ledger, "at failed")
    assert [e.kind for e in events(cli.store_url, cli.workspace, row.id)].count("node.timeout") == 1


def test_when_the_host_is_killed_its_zygote_and_every_agent_process_go_too(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """SIGKILL to the `swarmkit run` process alone (not its group; the zygote and the supervisor have
    sessions of their own): the zygote dies with it, and the supervisor, which reads end of file on
    its control pipe, ends the agent and every child it started."""
    flow = agents_flow(tmp_path, ledger, "orphaned", '[[agents]]\nname = "spawn"\ncall = "zagents:spawner"\n')
    proc, _short = start_foreground(cli, started, str(flow))
    wait_for(lambda: (ledger.root / "ready").exists() and len(ledger.recorded()) >= 5, timeout=30, what="the agent and its three children to tick")
    assert_forked_by_a_zygote(ledger)
    [zygote] = forkers(ledger)
    assert alive(*zygote)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    wait_for(lambda: not alive(*zygote), timeout=10, what="the zygote to die with its host")
    wait_for(lambda: not ledger.living(), timeout=3 * (TERM_GRACE_S + INTERRUPT_GRACE_S) + 5, what="the supervisor to end the agent and its children (end of file on the control pipe)")


# --- what a node gives back ------------------------------------------------------------------------


def test_a_zygote_started_nodes_lines_reach_the_runs_events(cli: Cli, tmp_path: Path, ledger: Ledger):
    """stdout, stderr and ctx.log lines of two forked sync nodes are the run's events, and each node's
    result is its own process's (two forks, two pids)."""
    flow = agents_flow(tmp_path, ledger, "talk", '[[agents]]\nname = "a"\ncall = "zagents:talker"\n[[agents]]\nname = "b"\ncall = "zagents:talker"\n')
    res = cli.call("run", str(flow))
    assert res.returncode == 0, res.stdout + res.stderr
    rid = full_id(cli, res.stdout.split()[0])
    assert job(cli.store_url, cli.workspace, rid).status == "completed"
    assert_forked_by_a_zygote(ledger)
    pids = list(cmdlines(ledger))
    assert len(pids) == 2
    logs = [e.text for e in events(cli.store_url, cli.workspace, rid) if e.kind == "log"]
    for pid in pids:
        for line in (f"out line from {pid}", f"err line from {pid}"):
            assert line in logs, (line, logs)
    assert logs.count("logged through ctx") == 2
    assert_all_dead(ledger, "at completed")


def test_a_zygote_killed_between_nodes_is_started_again(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """The zygote is SIGKILLed while a command node runs between two sync nodes: the second sync node
    is forked by a new zygote and the run completes."""
    gate = ledger.gates / "go"
    ledger.gates.mkdir()
    flow = agents_flow(
        tmp_path, ledger, "restart",
        '[[agents]]\nname = "first"\ncall = "zagents:talker"\n'
        f'[[agents]]\nname = "between"\ncommand = "touch {ledger.root}/between; while [ ! -e {gate} ]; do sleep 0.05; done"\n'
        '[[agents]]\nname = "second"\ncall = "zagents:talker"\n',
    )
    proc, short = start_foreground(cli, started, str(flow))
    wait_for(lambda: (ledger.root / "between").exists(), timeout=30, what="the command node between the sync nodes")
    [first] = forkers(ledger)
    os.kill(first[0], signal.SIGKILL)
    wait_for(lambda: not alive(*first), timeout=10, what="the first zygote to die")
    release(ledger.gates, "go")
    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0 and f"{short} completed" in out, out + errs
    zygotes = forkers(ledger)
    assert len(zygotes) == 2 and zygotes[1][0] != first[0], zygotes
    assert_forked_by_a_zygote(ledger)
    wait_for(lambda: not ledger.living(zygotes), timeout=10, what="the second zygote to leave with its host")


# --- the fallback: an interpreter of its own ---------------------------------------------------------


def test_with_the_zygote_switched_off_a_sync_node_execs_call_child(cli: Cli, tmp_path: Path, ledger: Ledger, started):
    """SWARMKIT_ZYGOTE=0: the node runs as before the zygote (`python -m swarmkit.runtime.call_child`),
    its lines still reach the events."""
    flow = agents_flow(tmp_path, ledger, "plain", '[[agents]]\nname = "a"\ncall = "zagents:talker"\n')
    proc = cli.start("run", str(flow), str(cli.workspace), env={"SWARMKIT_ZYGOTE": "0"})
    started.append(proc)
    out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + errs
    rid = full_id(cli, out.split()[0])
    [(pid, line)] = cmdlines(ledger).items()
    assert "swarmkit.runtime.call_child" in line and "zygote_server" not in line, line
    assert f"out line from {pid}" in [e.text for e in events(cli.store_url, cli.workspace, rid) if e.kind == "log"]


def _hooks(lines: list[str]) -> ProcessHooks:
    async def room() -> None:
        return None

    return ProcessHooks(
        lines=LineSink(lines.append, room, lambda: False, lambda _n, _b: None), note=lines.append,
        interrupt_grace=INTERRUPT_GRACE_S, term_grace=TERM_GRACE_S, fence_grace=0.5, lease_deadline=lambda: time.monotonic() + 60,
        register=lambda _p: None, unregister=lambda _p: None,
    )


def _one_node(tmp_path: Path, ledger: Ledger, agent: Agent) -> tuple[dict, str]:
    """Run `agent` as a sync node here; its output and its process's command line."""
    flow_path = tmp_path / "flows" / "any.toml"
    ctx = make_context("r" * 32, agent, 1, {}, tmp_path, lambda _line: None)
    lines: list[str] = []
    output, _usage = asyncio.run(run_sync_call(agent, ctx, RunModules(str(flow_path), None, tmp_path), _hooks(lines)))
    return output, cmdlines(ledger)[output["pid_" + agent.name]]


def test_a_zygote_that_does_not_start_leaves_the_node_to_an_interpreter_of_its_own(tmp_path: Path, ledger: Ledger, monkeypatch, caplog):
    """A zygote whose interpreter exits at once never answers: the node is exec'd, the host says why
    once, and does not try again for the next node; a zygote that starts takes the node after."""
    agents_flow(tmp_path, ledger, "any", "")
    broken = zygote_module.Zygote()
    broken.python = "/bin/false"
    monkeypatch.setattr(zygote_module, "_ZYGOTE", broken)
    with caplog.at_level(logging.WARNING, logger="swarmkit.zygote"):
        for name in ("a", "b"):
            _output, line = _one_node(tmp_path, ledger, Agent(name=name, call="zagents:talker"))
            assert "swarmkit.runtime.call_child" in line, line
    said = [r.getMessage() for r in caplog.records if r.name == "swarmkit.zygote"]
    assert len(said) == 1 and "the zygote did not" in said[0], said  # take the request, or answer it: as the race went
    assert broken.pid is None

    working = zygote_module.Zygote()
    monkeypatch.setattr(zygote_module, "_ZYGOTE", working)
    try:
        _output, line = _one_node(tmp_path, ledger, Agent(name="c", call="zagents:talker"))
        assert "swarmkit.runtime.zygote_server" in line, line
        assert forkers(ledger)[-1][0] == working.pid
    finally:
        working.close()


def test_a_node_whose_environment_starts_python_differently_is_execd(tmp_path: Path, ledger: Ledger, monkeypatch, caplog):
    """A flow passes PYTHONWARNINGS: only an interpreter started with it has those warning filters, so
    the node is exec'd (and it sees them), and the host says why once; a node without it is forked."""
    agents_flow(tmp_path, ledger, "any", "")
    own = zygote_module.Zygote()
    monkeypatch.setattr(zygote_module, "_ZYGOTE", own)
    monkeypatch.setenv("PYTHONWARNINGS", "ignore::DeprecationWarning")
    try:
        with caplog.at_level(logging.WARNING, logger="swarmkit.zygote"):
            output, line = _one_node(tmp_path, ledger, Agent(name="w", call="zagents:talker", env=("PYTHONWARNINGS",)))
        assert output["warnoptions"] == ["ignore::DeprecationWarning"]
        assert "swarmkit.runtime.call_child" in line, line
        said = [r.getMessage() for r in caplog.records if r.name == "swarmkit.zygote"]
        assert len(said) == 1 and "PYTHON" in said[0], said
        output, line = _one_node(tmp_path, ledger, Agent(name="x", call="zagents:talker"))
        assert output["warnoptions"] == []
        assert "swarmkit.runtime.zygote_server" in line, line
    finally:
        own.close()
