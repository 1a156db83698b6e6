"""Budgets (issue 32): a run that reaches a limit parks itself, resumable, as the actor `budget`, with the
reason; a resume that does not raise the limit is refused, saying how; a limit below what was spent is
refused at once. Flows of command agents that report usage, on both stores, hosted here and by a worker."""

from __future__ import annotations

import json
from pathlib import Path

from swarmkit.runtime.budgets import Budget, BudgetError, Spent, changed
from swarmkit.runtime.errors import FlowError
from swarmkit.runtime.flow import parse_flow

from .conftest import Cli, hold, release, wait_for, write_flow
from .helpers import audit, checkpoints, events, job, read


async def _outbox(conn, job_id: str) -> list[tuple[str, str]]:
    from sqlalchemy import select

    from swarmkit.store.models import notifications

    return [(r[0], r[1]) for r in await conn.execute(select(notifications.c.kind, notifications.c.body).where(notifications.c.job_id == job_id))]


def spending(folder: Path, name: str, *, budget: str = "", cost: float = 0.6, tokens: int = 400, seen: Path | None = None) -> Path:
    """Three agents, each reporting `tokens` and `cost` in its output; the last copies the state it was given to `seen`."""
    body = f'name = "{name}"\n{budget}\n'
    for i, node in enumerate(("plan", "write", "review")):
        keep = f"cp $SWARMKIT_STATE {seen}; " if seen is not None and i == 2 else ""
        body += f"""
[[agents]]
name = "{node}"
command = "{keep}echo '{{\\"{node}\\": {i}, \\"_usage\\": {{\\"tokens\\": {tokens}, \\"cost\\": {cost}}}}}' > $SWARMKIT_OUTPUT"
"""
    return write_flow(folder, name, body)


def test_a_run_parks_after_the_node_that_passes_max_cost_and_goes_on_from_that_checkpoint_once_raised(cli: Cli, tmp_path: Path):
    seen = tmp_path / "seen.json"
    flow = spending(tmp_path, "spend", budget="[budget]\nmax_cost = 1.0", seen=seen)
    res = cli.call("run", str(flow))
    assert res.returncode == 0, res.stderr
    row = job(cli.store_url, cli.workspace, cli.call("status", "-o", "name").stdout.split()[0])
    sid = row.id[:8]
    # Parked at the boundary after the node that passed the limit (plan 0.60, write 1.20), before review.
    assert f"{sid} stopped by its budget (cost 1.20 of max_cost 1.00) before 3/3 review." in res.stdout, res.stdout
    assert (row.status, row.step, row.stop_requested_by, row.stop_reason) == ("stopped", 2, "budget", "cost 1.20 of max_cost 1.00")
    assert not seen.exists(), "review ran past the budget"
    said = [(a.actor, a.action, a.detail.get("reason")) for a in audit(cli.store_url, cli.workspace, row.id)]
    assert ("budget", "run.stop_requested", "cost 1.20 of max_cost 1.00") in said and ("budget", "run.stopped", "cost 1.20 of max_cost 1.00") in said, said
    assert any(e.kind == "run.stopped" and "requested by budget: cost 1.20 of max_cost 1.00" in e.text for e in events(cli.store_url, cli.workspace, row.id))
    # Through the outbox like any other ending: the receivers are told who stopped it and why.
    outbox = read(cli.store_url, cli.workspace, lambda c: _outbox(c, row.id))
    assert [(kind, "by budget: cost 1.20 of max_cost 1.00" in json.loads(body)["text"]) for kind, body in outbox] == [("run.stopped", True)], outbox
    # The run and its status say who and why.
    shown = cli.call("status", sid).stdout
    assert "stop_requested_by: budget" in shown and "stop_reason: cost 1.20 of max_cost 1.00" in shown and "budget: cost 1.20 of 1.00" in shown, shown
    before = [(c.step, c.state) for c in checkpoints(cli.store_url, cli.workspace, row.id)]

    # A resume that would stop again at once is refused, saying how to raise the limit; one below what was spent too.
    again = cli.call("resume", sid)
    assert again.returncode == 1 and f"its budget is spent (cost 1.20 of max_cost 1.00). Raise it as you resume: `swarmkit resume {sid} --budget cost=+5`" in again.stderr, again.stderr
    lower = cli.call("resume", sid, "--budget", "cost=1.1")
    assert lower.returncode == 1 and "max_cost 1.10 is below what run" in lower.stderr and "(1.20)" in lower.stderr, lower.stderr
    assert cli.call("resume", sid, "--budget", "cost=lots").returncode == 2
    assert job(cli.store_url, cli.workspace, sid).status == "stopped"

    # Raised as it resumes here: it goes on from the checkpoint it parked at, which is left as it was.
    done = cli.call("run", "--resume", sid, "--budget", "cost=+1")
    assert done.returncode == 0 and "completed" in done.stdout, done.stdout + done.stderr
    row = job(cli.store_url, cli.workspace, sid)
    assert (row.status, row.budget and json.loads(row.budget)) == ("completed", {"max_cost": 2.0})
    after = [(c.step, c.state) for c in checkpoints(cli.store_url, cli.workspace, row.id)]
    assert after[: len(before)] == before
    given = json.loads(seen.read_text())
    assert given == json.loads(dict(before)[2])
    assert any(a.action == "run.resumed" and a.detail.get("budget") == "max_cost 2.00" for a in audit(cli.store_url, cli.workspace, row.id))


def test_tokens_nodes_and_wall_each_park_the_run_where_they_are_reached(cli: Cli, tmp_path: Path):
    flow = spending(tmp_path, "spend", cost=0.0)
    slow = write_flow(tmp_path, "slow", 'name = "slow"\n' + "".join(f'[[agents]]\nname = "n{i}"\ncommand = "sleep 0.3"\n' for i in range(3)))
    for path, term, step, reason in (
        (flow, "tokens=1k", 3 - 0, None),  # 1,200 tokens are spent only by the last node: the run completes
        (flow, "tokens=800", 2, "tokens 800 of max_tokens 800"),
        (flow, "nodes=1", 1, "nodes 1 of max_nodes 1"),
        (slow, "wall=0.25s", 1, "wall 0."),
    ):
        rid = cli.call("run", str(path), "--budget", term, "--detach").stdout.strip()
        res = cli.call("run", "--resume", rid)
        row = job(cli.store_url, cli.workspace, rid)
        if reason is None:
            assert row.status == "completed", res.stdout + res.stderr
            continue
        assert (row.status, row.step, row.stop_requested_by) == ("stopped", step, "budget"), (term, res.stdout, res.stderr)
        assert row.stop_reason.startswith(reason), (term, row.stop_reason)
    # wall counts the time the agents ran: at least the 0.3 s the first slept.
    assert (job(cli.store_url, cli.workspace, rid).ran_s or 0) >= 0.3


def test_a_hard_budget_interrupts_the_node_in_flight_and_a_worker_takes_it_on_once_raised(cli: Cli, tmp_path: Path):
    gates = tmp_path / "gates"
    marks = tmp_path / "marks"
    marks.mkdir()
    # The node reports 0.4 a line, waiting for the gate between lines: the host hears it at its heartbeats.
    flow = write_flow(tmp_path, "burn", f"""name = "burn"
[budget]
max_cost = 1.0
hard = true

[[agents]]
name = "burn"
command = "echo >> {marks}/burn; for i in 1 2 3 4; do echo '{{\\"tokens\\": 5, \\"cost\\": 0.4}}' >> $SWARMKIT_USAGE; sleep 0.2; done; {hold(gates, 'burn')}"

[[agents]]
name = "after"
command = "echo after > {marks}/after"
""")
    worker = cli.start("worker")
    try:
        rid = cli.call("run", str(flow), "--detach").stdout.strip()
        row = wait_for(lambda: (r := job(cli.store_url, cli.workspace, rid)).status == "stopped" and r, timeout=60, what="the run to park by its hard budget")
        assert (row.stop_requested_by, row.stop_now, row.step) == ("budget", True, 0)
        assert row.stop_reason.startswith("cost 1.") and row.stop_reason.endswith("of max_cost 1.00")
        assert not (marks / "after").exists()
        texts = [e.text for e in events(cli.store_url, cli.workspace, rid)]
        assert any("stop --now requested by budget" in t and "interrupting burn" in t for t in texts), texts
        assert any(t.startswith("stopped before 1/2 burn (stop --now: burn was interrupted") and "requested by budget" in t for t in texts), texts
        # Raised as it is queued again: the worker runs the interrupted node from its start, then the next.
        release(gates, "burn")
        res = cli.call("resume", rid, "--budget", "cost=+10")
        assert res.returncode == 0, res.stderr
        wait_for(lambda: job(cli.store_url, cli.workspace, rid).status == "completed", timeout=60, what="the worker to finish the run")
        assert (marks / "burn").read_text().count("\n") == 2 and (marks / "after").exists()
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_budgets_that_cannot_be_are_refused_in_a_line(cli: Cli, tmp_path: Path):
    good = spending(tmp_path, "ok")
    for term, words in (
        ("cost=-1", "'-1' is not an amount of dollars more than zero"),
        ("tokens=1.5", "'1.5' is not a whole number more than zero"),
        ("wall=soon", "'soon' is not a duration"),
        ("speed=3", "is not a limit; write cost=5"),
        ("cost=+1", "the flow has no max_cost to raise"),
    ):
        res = cli.call("run", str(good), "--budget", term, "--detach")
        assert res.returncode == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1, (term, res.stderr)
    assert cli.call("status", "-o", "name").stdout.strip() == "", "a refused budget created a run"
    for table, words in (
        ("[budget]\nmax_cost = 'abc'", "<flow>:2: [budget]: max_cost 'abc' is not an amount of dollars"),
        ("[budget]\nmax_money = 3", "unknown key 'max_money'"),
        ("[budget]\nhard = 'yes'", "hard must be true or false"),
        ("budget = 5", "budget must be a table written [budget]"),
    ):
        try:
            parse_flow(f'name = "x"\n{table}\n[[agents]]\nname = "a"\ncommand = "true"\n')
        except FlowError as exc:
            assert words in str(exc), (table, str(exc))
        else:
            raise AssertionError(f"{table!r} was taken")
    # The rules themselves: raising, the first limit reached, a limit below what was spent.
    b = changed(Budget(max_cost=5.0), ["cost=+2.5", "tokens=100k", "hard"])
    assert (b.max_cost, b.max_tokens, b.hard) == (7.5, 100_000, True)
    assert b.reached(Spent(cost=7.5)) == "cost 7.50 of max_cost 7.50" and b.reached(Spent(cost=7.4, tokens=99_999)) is None
    try:
        changed(b, ["tokens=10"], Spent(tokens=11))
    except BudgetError as exc:
        assert "max_tokens 10 is below what the run has spent already (11)" in str(exc)
    else:
        raise AssertionError("a limit below what was spent was taken")


def test_the_http_door_sets_and_raises_a_budget_as_the_cli_does(cli: Cli, serving):
    serve, folder, _gates = serving
    spending(folder, "spend", budget="[budget]\nmax_nodes = 3")
    s = serve("--no-host")
    made = s.client.post("/jobs", json={"flow": "spend", "budget": {"max_cost": 1.0, "max_tokens": "2k"}})
    assert made.status_code == 201, made.text
    by_cli = cli.call("run", str(folder / "spend.toml"), "--budget", "cost=1", "--budget", "tokens=2k", "--detach").stdout.strip()
    assert made.json()["budget"] == cli_budget(cli, by_cli) == {"max_cost": 1.0, "max_tokens": 2000, "max_nodes": 3}
    bad = s.client.post("/jobs", json={"flow": "spend", "budget": {"max_cost": -1}})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("budget 'max_cost=-1.0': '-1.0' is not an amount of dollars"), bad.text
    rid = made.json()["id"]
    assert cli.call("run", "--resume", rid).returncode == 0
    assert job(cli.store_url, cli.workspace, rid).stop_reason == "cost 1.20 of max_cost 1.00"
    refused = s.client.post(f"/jobs/{rid}/resume")
    assert refused.status_code == 409 and "its budget is spent (cost 1.20 of max_cost 1.00)" in refused.json()["detail"], refused.text
    raised = s.client.post(f"/jobs/{rid}/resume", json={"budget": {"max_cost": "+1"}})
    assert raised.status_code == 200 and raised.json()["job"]["budget"]["max_cost"] == 2.0 and raised.json()["status"] == "queued", raised.text


def cli_budget(cli: Cli, rid: str) -> dict:
    return json.loads(cli.call("status", rid, "-o", "json").stdout)["budget"]
