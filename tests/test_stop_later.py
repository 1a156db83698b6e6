"""Stops set for later (issue 32): `stop --when`, `--after NODE`, `--before NODE` and `--clear`. Each is kept on
the run's row, asked by whichever host runs it at the first boundary where it holds, as the person who set it,
then taken off, so that a resume goes on past it. Real stores, a real worker, the CLI and the HTTP door."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Cli, hold, release, wait_for, write_flow
from .helpers import audit, events, job


def gated(folder: Path, gates: Path, cost: float = 0.6) -> Path:
    """Three agents, each spending `cost` and waiting for its gate before it ends."""
    body = 'name = "gated"\n'
    for node in ("plan", "write", "review"):
        body += f"""
[[agents]]
name = "{node}"
command = "{hold(gates, node)}; echo '{{\\"{node}\\": true, \\"_usage\\": {{\\"tokens\\": 100, \\"cost\\": {cost}}}}}' > $SWARMKIT_OUTPUT"
"""
    return write_flow(folder, "gated", body)


def test_a_when_stop_set_while_a_worker_runs_the_run_fires_there_as_whoever_set_it(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    flow = gated(tmp_path, gates)
    worker = cli.start("worker")
    try:
        rid = cli.call("run", str(flow), "--detach").stdout.strip()
        wait_for(lambda: job(cli.store_url, cli.workspace, rid).current_node == "plan" and job(cli.store_url, cli.workspace, rid).status == "running", what="the worker to run plan")
        res = cli.call("stop", rid, "--when", "cost > 1", env={"SWARMKIT_ACTOR": "alice"})
        assert res.returncode == 0 and f"stop --when cost>1 set for {rid[:8]}: it stops at the first agent boundary where cost>1 holds" in res.stdout, res.stdout + res.stderr
        assert "when cost>1 (alice)" in cli.call("status", rid).stdout
        release(gates, "plan", "write", "review")
        row = wait_for(lambda: (r := job(cli.store_url, cli.workspace, rid)).status in ("stopped", "completed") and r, timeout=60, what="the run to stop or end")
        # cost 0.60 after plan does not hold; 1.20 after write does: parked before review, by alice, the stop taken off.
        assert (row.status, row.step, row.stop_requested_by, row.stop_reason, row.stop_when) == ("stopped", 2, "alice", "stop --when cost>1 (cost 1.20)", None)
        assert any(a.actor == "alice" and a.action == "run.stopped" and a.detail.get("reason") == "stop --when cost>1 (cost 1.20)" for a in audit(cli.store_url, cli.workspace, rid))
        # Taken off as it fired: resumed, the worker runs it to its end (the condition still holds, and is gone).
        assert cli.call("resume", rid).returncode == 0
        wait_for(lambda: job(cli.store_url, cli.workspace, rid).status == "completed", timeout=60, what="the worker to finish the run")
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_after_and_before_park_the_run_at_their_boundary_and_clear_takes_them_off(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    flow = gated(tmp_path, gates, cost=0.0)
    release(gates, "plan", "write", "review")
    rid = cli.call("run", str(flow), "--detach").stdout.strip()
    sid = rid[:8]
    # Set on a queued run, no host yet: whichever host takes it holds to them.
    for flag, node in (("--after", "plan"), ("--before", "review")):
        assert cli.call("stop", rid, flag, node, env={"SWARMKIT_ACTOR": "bob"}).returncode == 0
    again = cli.call("stop", rid, "--after", "plan")
    assert again.returncode == 0 and f"stop --after plan is already set for {sid} (by bob at" in again.stdout
    view = json.loads(cli.call("status", rid, "-o", "json").stdout)
    assert [(s["kind"], s["what"], s["by"]) for s in view["stop_when"]["stops"]] == [("after", "plan", "bob"), ("before", "review", "bob")]

    first = cli.call("run", "--resume", rid)
    assert f"{sid} stopped (stop --after plan, set by bob) before 2/3 write." in first.stdout, first.stdout + first.stderr
    row = job(cli.store_url, cli.workspace, rid)
    assert (row.status, row.step, row.stop_requested_by) == ("stopped", 1, "bob") and "after" not in (row.stop_when or "")
    second = cli.call("run", "--resume", rid)
    assert f"{sid} stopped (stop --before review, set by bob) before 3/3 review." in second.stdout, second.stdout + second.stderr
    assert job(cli.store_url, cli.workspace, rid).stop_when is None

    # Refused where they cannot be, in a line that names the node, the flow's agents or how to write one.
    for args, code, words in (
        (["--before", "reviews"], 1, "its flow 'gated' has no agent 'reviews'; its agents are plan, write, review"),
        (["--after", "review"], 1, "review is its flow's last agent"),
        (["--after", "plan"], 1, "it is already at or past plan"),
        (["--before", "review"], 1, "it is already at or past review"),
        (["--when", "price>3"], 2, "--when 'price>3' is not a condition"),
        (["--when", "tokens>lots"], 2, "'lots' is not a whole number"),
        (["--when", "cost>1", "--now"], 2, "give one of --when, --after, --before or --clear"),
    ):
        res = cli.call("stop", rid, *args)
        assert res.returncode == code and words in res.stderr and len(res.stderr.strip().splitlines()) == 1, (args, res.returncode, res.stderr)

    # --clear takes every one off, and says which; with none left it says so.
    assert cli.call("stop", rid, "--when", "nodes>=3").returncode == 0
    assert cli.call("stop", rid, "--when", "tokens>10k").returncode == 0
    cleared = cli.call("stop", rid, "--clear")
    assert cleared.returncode == 0 and f"cleared 2 stops set for later on {sid}: when nodes>=3 (" in cleared.stdout, cleared.stdout
    assert job(cli.store_url, cli.workspace, rid).stop_when is None
    assert "no stops are set for later" in cli.call("stop", rid, "--clear").stdout
    done = cli.call("run", "--resume", rid)
    assert "completed" in done.stdout, done.stdout + done.stderr
    kinds = [e.kind for e in events(cli.store_url, cli.workspace, rid)]
    assert kinds.count("run.stop_set") == 4 and kinds.count("run.stops_cleared") == 1
    assert "is completed; nothing to stop" in cli.call("stop", rid, "--before", "write").stdout


def test_the_http_door_sets_shows_and_clears_a_stop_for_later(cli: Cli, serving):
    serve, folder, gates = serving
    gated(folder, gates)
    s = serve("--no-host")
    rid = s.client.post("/jobs", json={"flow": "gated"}).json()["id"]
    made = s.client.post(f"/jobs/{rid}/stop", json={"before": "write"})
    assert made.status_code == 200 and made.json()["changed"] and made.json()["status"] == "queued", made.text
    assert made.json()["job"]["stop_when"]["stops"][0] | {"at": ""} == {"kind": "before", "what": "write", "by": made.json()["job"]["stop_when"]["stops"][0]["by"], "at": ""}
    assert s.client.get(f"/jobs/{rid}").json()["stop_when"] == json.loads(cli.call("status", rid, "-o", "json").stdout)["stop_when"]
    bad = s.client.post(f"/jobs/{rid}/stop", json={"after": "nowhere"})
    assert bad.status_code == 409 and "has no agent 'nowhere'" in bad.json()["detail"], bad.text
    wrong = s.client.post(f"/jobs/{rid}/stop", json={"when": "price>3"})
    assert wrong.status_code == 422 and "--when 'price>3' is not a condition" in wrong.json()["detail"], wrong.text
    both = s.client.post(f"/jobs/{rid}/stop", json={"when": "cost>1", "now": True})
    assert both.status_code == 422 and "give one of --when, --after, --before or --clear" in both.json()["detail"], both.text
    cleared = s.client.post(f"/jobs/{rid}/stop", json={"clear": True})
    assert cleared.status_code == 200 and cleared.json()["job"]["stop_when"] is None, cleared.text


def test_every_stop_that_holds_at_one_boundary_fires_there_and_none_again_on_resume(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    flow = gated(tmp_path, gates, cost=0.5)
    release(gates, "plan", "write", "review")
    rid = cli.call("run", str(flow), "--detach", "--budget", "cost=1").stdout.strip()
    for args in (["--when", "nodes>=2"], ["--before", "review"], ["--when", "tokens>=10k"]):
        assert cli.call("stop", rid, *args).returncode == 0
    first = cli.call("run", "--resume", rid)
    row = job(cli.store_url, cli.workspace, rid)
    # The budget (1.00 spent after write), nodes>=2 and --before review all hold before review: one stop, all said.
    assert (row.status, row.step, row.stop_requested_by) == ("stopped", 2, "budget"), first.stdout + first.stderr
    assert row.stop_reason == "cost 1.00 of max_cost 1.00; stop --when nodes>=2 (nodes 2); stop --before review", row.stop_reason
    assert [s["what"] for s in json.loads(row.stop_when)["stops"]] == ["tokens>=10k"]
    done = cli.call("run", "--resume", rid, "--budget", "cost=+1")
    assert "completed" in done.stdout, done.stdout + done.stderr
