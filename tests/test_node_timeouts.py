"""Node timeouts: past `timeout` a try is interrupted with the cancel's escalation; the run ends
failed naming the node and the timeout, or the node is tried again (`retries`, with backoff,
each try an event). Real stores, real agent processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmkit.runtime.errors import FlowError
from swarmkit.runtime.flow import parse_flow

from .conftest import Cli, wait_for, write_flow
from .helpers import events, job, pid_alive

FAST_RETRY = {"SWARMKIT_RETRY_BACKOFF": "0.1"}


@pytest.mark.parametrize("kind", ["command", "sync", "async"])
def test_a_node_past_its_timeout_is_interrupted_and_the_run_fails_naming_it(cli: Cli, tmp_path: Path, kind: str):
    pidfile = tmp_path / "pid"
    (tmp_path / "slowagents.py").write_text(
        "import asyncio, os, subprocess, time\n"
        "def slow(ctx):\n"
        f"    p = subprocess.Popen(['sleep', '300']); open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)\n"
        "async def aslow(ctx):\n"
        f"    p = await asyncio.create_subprocess_exec('sleep', '300'); open({str(pidfile)!r}, 'w').write(str(p.pid)); await asyncio.sleep(300)\n"
    )
    how = {
        "command": f'command = "sleep 300 & echo $! > {pidfile}; wait"',
        "sync": 'call = "slowagents:slow"',
        "async": 'call = "slowagents:aslow"',
    }[kind]
    flow = write_flow(tmp_path, "slow", f'name = "slow"\n[[agents]]\nname = "crawl"\ntimeout = "1s"\n{how}\n[[agents]]\nname = "never"\ncommand = "touch {tmp_path}/never"\n')
    res = cli.call("run", str(flow))
    assert res.returncode == 1, res.stdout + res.stderr
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert row.status == "failed" and row.error == "crawl: timed out after 1s" and row.current_node == "crawl"
    assert not (tmp_path / "never").exists()
    if kind != "async":  # an async agent's own children are its to end; a process agent's are ended by its supervisor
        wait_for(lambda: not pid_alive(int(pidfile.read_text())), timeout=10, what="the agent's child to be ended")
    kinds = [e.kind for e in events(cli.store_url, cli.workspace, row.id)]
    assert kinds.count("node.timeout") == 1 and "node.retry" not in kinds


def test_a_timed_out_node_is_tried_again_with_backoff_and_each_try_is_an_event(cli: Cli, tmp_path: Path):
    tries = tmp_path / "tries"
    # Hangs on its first two tries, answers on the third.
    flow = write_flow(tmp_path, "flaky", f"""
        name = "flaky"
        [[agents]]
        name = "fetch"
        timeout = "1s"
        retries = 3
        command = "n=$(cat {tries} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {tries}; [ $n -ge 3 ] || sleep 300; echo '{{\\"fetched\\": true}}' > $SWARMKIT_OUTPUT"
    """)
    res = cli.call("run", str(flow), env=FAST_RETRY)
    assert res.returncode == 0, res.stdout + res.stderr
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert row.status == "completed" and tries.read_text().strip() == "3"
    evs = [e for e in events(cli.store_url, cli.workspace, row.id) if e.kind in ("node.timeout", "node.retry")]
    assert [(e.kind, e.text) for e in evs] == [
        ("node.timeout", "fetch: timed out after 1s (try 1 of 4): interrupted; trying again in 0.1s"),
        ("node.retry", "1/1 fetch: try 2 of 4"),
        ("node.timeout", "fetch: timed out after 1s (try 2 of 4): interrupted; trying again in 0.2s"),
        ("node.retry", "1/1 fetch: try 3 of 4"),
    ]


def test_a_node_out_of_retries_ends_the_run_failed(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "stuck", 'name = "stuck"\n[[agents]]\nname = "hang"\ntimeout = "500ms"\nretries = 1\ncommand = "sleep 300"\n')
    res = cli.call("run", str(flow), env=FAST_RETRY)
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert row.status == "failed" and row.error == "hang: timed out after 500ms (try 2 of 2); no retries left"
    assert [e.kind for e in events(cli.store_url, cli.workspace, row.id)].count("node.timeout") == 2


def test_a_stop_asked_during_the_backoff_lands_before_the_next_try(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "stuck", 'name = "stuck"\n[[agents]]\nname = "hang"\ntimeout = "1s"\nretries = 2\ncommand = "sleep 300"\n')
    proc = cli.start("run", str(flow), env={"SWARMKIT_RETRY_BACKOFF": "3"})
    short = proc.stdout.readline().split()[0]
    wait_for(lambda: any(e.kind == "node.timeout" for e in events(cli.store_url, cli.workspace, job(cli.store_url, cli.workspace, short).id)), what="the first timeout")
    assert cli.call("stop", short).returncode == 0
    proc.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, short)
    assert (row.status, row.step, row.current_node) == ("stopped", 0, "hang")
    assert "node.retry" not in [e.kind for e in events(cli.store_url, cli.workspace, row.id)]


@pytest.mark.parametrize(("line", "said"), [
    ('timeout = "10 minutes"', "timeout '10 minutes' is not a duration; write it like \"90s\", \"10m\" or \"1h30m\""),
    ('timeout = "0s"', "timeout '0s' is not a duration"),
    ("timeout = -5", "timeout -5 is not a duration"),
    ("timeout = true", "timeout True is not a duration"),
    ('timeout = "1m30"', "timeout '1m30' is not a duration"),
    ("retries = 2", "retries applies to a timed-out try; set a timeout too"),
    ('timeout = "1m"\nretries = -1', "retries must be a whole number from 0 to 100, not -1"),
    ('timeout = "1m"\nretries = 1.5', "retries must be a whole number from 0 to 100, not 1.5"),
])
def test_bad_timeouts_and_retries_are_refused_with_a_clear_message(line: str, said: str):
    with pytest.raises(FlowError) as caught:
        parse_flow(f'name = "f"\n[[agents]]\nname = "a"\ncommand = "true"\n{line}\n', "f.toml")
    assert str(caught.value).startswith("f.toml:2: agent 'a': ") and said in str(caught.value)


def test_durations_are_read_as_written():
    flow = parse_flow('name = "f"\n[[agents]]\nname = "a"\ncommand = "true"\ntimeout = "1h30m"\nretries = 2\n[[agents]]\nname = "b"\ncommand = "true"\ntimeout = 90\n')
    assert [(a.timeout_s, a.timeout, a.retries) for a in flow.agents] == [(5400.0, "1h30m", 2), (90.0, "90", 0)]


def test_swarmkit_run_refuses_a_flow_with_a_bad_timeout(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "bad", 'name = "bad"\n[[agents]]\nname = "a"\ncommand = "true"\ntimeout = "soon"\n')
    res = cli.call("run", str(flow))
    assert res.returncode == 2 and "timeout 'soon' is not a duration" in res.stderr, (res.returncode, res.stderr)

