"""What a run not yet ended will cost (issue 32): spent so far, its burn, and an estimate at completion from
the same flow's completed runs (the median cost of a node), labelled as an estimate on every door."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from swarmkit.console.run_views import detail_facts
from swarmkit.runtime.estimates import estimate_of
from swarmkit.store.clock import store_now

from .conftest import Cli, write_flow
from .helpers import job


def costly(folder: Path, name: str, cost: float) -> Path:
    body = f'name = "{name}"\n' + "".join(
        f"""[[agents]]\nname = "{n}"\ncommand = "echo '{{\\"_usage\\": {{\\"tokens\\": 10, \\"cost\\": {cost}}}}}' > $SWARMKIT_OUTPUT"\n"""
        for n in ("plan", "write", "review")
    )
    return write_flow(folder, name, body)


def test_a_stopped_run_is_estimated_from_its_flows_completed_runs_on_every_door(cli: Cli, serving):
    serve, folder, _gates = serving
    flow = costly(folder, "costly", 0.5)
    for _ in range(3):
        assert "completed" in cli.call("run", str(flow)).stdout
    rid = cli.call("run", str(flow), "--detach").stdout.strip()
    assert cli.call("stop", rid, "--before", "write").returncode == 0
    cli.call("run", "--resume", rid)
    row = job(cli.store_url, cli.workspace, rid)
    assert (row.status, row.step, row.cost) == ("stopped", 1, 0.5)
    words = "$1.50 at completion (an estimate: $0.50 a node, the median of 3 completed runs); $0.50 so far"
    shown = cli.call("status", rid).stdout
    assert f"estimate: {words}" in shown, shown
    s = serve("--no-host")
    got = s.client.get(f"/jobs/{rid[:10]}/estimate").json()
    # Stopped: it spends nothing a minute (burn is a running run's).
    assert got == {"job_id": rid, "cost": 0.5, "burn_per_min": None, "median_node_cost": 0.5, "basis_runs": 3, "estimate_at_completion": 1.5, "is_estimate": True}
    # A flow no run of which has completed: said so, no figure made up.
    other = costly(folder, "fresh", 0.25)
    fresh = cli.call("run", str(other), "--detach").stdout.strip()
    assert "no estimate (no completed run of its flow to go by)" in cli.call("status", fresh).stdout
    assert s.client.get(f"/jobs/{fresh}/estimate").json()["estimate_at_completion"] is None
    # An ended run shows no estimate: what it cost is what it cost.
    done = job(cli.store_url, cli.workspace, cli.call("status", "--status", "completed", "-o", "name").stdout.split()[0])
    assert "estimate:" not in cli.call("status", done.id).stdout


def test_the_console_detail_pane_shows_the_estimate_beside_the_budget(cli: Cli, tmp_path: Path):
    flow = costly(tmp_path, "costly", 0.5)
    rid = cli.call("run", str(flow), "--detach", "--budget", "cost=5").stdout.strip()
    row = dataclasses.replace(job(cli.store_url, cli.workspace, rid), status="running", step=1, cost=0.5, started_at=store_now() - timedelta(seconds=60))
    facts = dict(detail_facts(row, store_now(), None, [0.4, 0.5, 0.9]))
    assert facts["estimate"] == "$1.50 at completion (an estimate: $0.50 a node, the median of 3 completed runs); $0.50 so far; burning $0.5/m", facts
    assert facts["budget"] == "cost 0.50 of 5.00"
    assert estimate_of(dataclasses.replace(row, status="completed"), [0.5], store_now()).at_completion is None
