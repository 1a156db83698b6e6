"""Acts by filter (issue 32): `swarmkit stop | cancel | resume | approve` with `status`'s filters instead of ids,
and `POST /jobs/<verb>` with the filter in the body. They act on exactly the runs the filter names (checked
against the store), each by the one-run rules, while another process acts on the same runs: no run is
acted on twice and every run has its outcome. One batch id ties each batch's audit entries together."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

from swarmkit.runtime import control
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store

from .conftest import Cli
from .helpers import read


def _flow(name: str):
    return parse_flow(f'name = "{name}"\n[[agents]]\nname = "a"\ncommand = "true"\n[[agents]]\nname = "b"\ncommand = "true"\n')


def make_runs(cli: Cli, plan: dict[str, int]) -> dict[str, list[str]]:
    """Runs made in this process: per flow, `count` queued; a fifth of them then stopped and a tenth cancelled
    (mixed statuses). Returns each flow's ids by status."""

    async def go() -> dict[str, list[str]]:
        store = await Store.open(cli.store_url, cli.workspace)
        made: dict[str, list[str]] = {}
        try:
            for name, count in plan.items():
                flow = _flow(name)
                for i in range(count):
                    job = await control.submit(store, flow, {}, actor="maker")
                    status = "queued"
                    if i % 5 == 1:
                        await control.stop(store, job.id, actor="maker")
                        status = "stopped"
                    elif i % 10 == 2:
                        await control.cancel(store, job.id, actor="maker", keep=True)
                        status = "cancelled"
                    made.setdefault(f"{name}:{status}", []).append(job.id)
        finally:
            await store.close()
        return made

    return asyncio.run(go())


def statuses(cli: Cli) -> dict[str, str]:
    async def fn(conn):
        rows = await conn.exec_driver_sql("SELECT id, status FROM jobs")
        return {r[0]: r[1] for r in rows}

    return read(cli.store_url, cli.workspace, fn)


def stop_audit(cli: Cli) -> list[tuple[str, str, str]]:
    async def fn(conn):
        rows = await conn.exec_driver_sql("SELECT job_id, action, detail FROM audit WHERE actor = 'ops'")
        return [(r[0], r[1], r[2]) for r in rows]

    return read(cli.store_url, cli.workspace, fn)


def test_a_filtered_stop_acts_on_exactly_the_runs_it_names_while_another_process_acts_on_the_same(cli: Cli, tmp_path: Path):
    made = make_runs(cli, {"nightly": 120, "other": 80})
    named = set(made["nightly:queued"])  # stop applies to queued (and running) runs: the stopped and cancelled need nothing
    others = {rid: st for rid, st in statuses(cli).items() if rid not in named}
    listed = cli.call("stop", "--flow", "nightly", "--dry-run")
    assert listed.returncode == 0 and f"would stop {len(named)} runs (--flow nightly); nothing done (--dry-run)." in listed.stdout, listed.stdout
    assert {line.split()[0] for line in listed.stdout.splitlines()[:-1]} == {rid[:8] for rid in named}
    assert set(statuses(cli).values()) >= {"queued"} and all(statuses(cli)[rid] == "queued" for rid in named), "a dry run acted"

    # Two processes at once, on the same filter.
    env = {"SWARMKIT_ACTOR": "ops"}
    procs = [cli.start("stop", "--flow", "nightly", "--status", "queued", "--yes", env=env) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, errs) in zip(procs, outs):
        assert p.returncode == 0, out[-2000:] + errs[-2000:]
    now = statuses(cli)
    assert {rid for rid in named if now[rid] == "stopped"} == named
    assert {rid: now[rid] for rid in others} == others, "a run the filter does not name was acted on"
    # Each run stopped once, by one of the two; the other said it needed nothing.
    entries = [(rid, action, detail) for rid, action, detail in stop_audit(cli) if action == "run.stop_requested"]
    per_run = Counter(rid for rid, _, _ in entries)
    assert set(per_run) == named and set(per_run.values()) == {1}, per_run.most_common(3)
    batches = [re.search(r"^batch (\w+): (\d+) stopped(?:, (\d+) needed nothing)?\.$", out, re.M) for out, _ in outs]
    assert all(batches), [out[-300:] for out, _ in outs]
    assert sum(int(b.group(2)) for b in batches) == len(named)
    # Every run a process listed has its line and is counted: stopped by it, or already stopped by the other.
    for (out, _), b in zip(outs, batches):
        assert len(out.strip().splitlines()) - 1 == int(b.group(2)) + int(b.group(3) or 0), out[-500:]
    ids = {b.group(1) for b in batches}
    assert {re.search(r'"batch": "(\w+)"', d).group(1) for _, _, d in entries} <= ids and len(ids) == 2


def test_the_http_door_acts_by_filter_as_the_cli_does(cli: Cli, serving):
    serve, _folder, _gates = serving
    made = make_runs(cli, {"twin-a": 20, "twin-b": 20})
    s = serve("--no-host")
    by_cli = cli.call("cancel", "--flow", "twin-a", "--status", "queued,stopped", "--keep", "--yes")
    listed = s.client.post("/jobs/cancel", json={"flow": ["twin-b"], "status": ["queued", "stopped"], "keep": True, "dry_run": True}).json()
    assert len(listed["runs"]) == len(made["twin-b:queued"]) + len(made["twin-b:stopped"]) and listed["batch"] is None
    by_api = s.client.post("/jobs/cancel", json={"flow": ["twin-b"], "status": ["queued", "stopped"], "keep": True})
    assert by_api.status_code == 200, by_api.text
    body = by_api.json()
    now = statuses(cli)
    for twin in ("twin-a", "twin-b"):
        assert {now[r] for k, ids in made.items() if k.startswith(twin) for r in ids} == {"cancelled"}
    assert by_cli.returncode == 0 and by_cli.stdout.strip().splitlines()[-1].endswith(": 18 cancelled.")
    assert body["summary"] == "18 cancelled" and len(body["results"]) == 18 and not any(r["refused"] for r in body["results"])
    # Nothing left that a resume applies to: neither door acts, both say so.
    assert "nothing to resume" in cli.call("resume", "--flow", "twin-a", "--yes").stdout
    assert s.client.post("/jobs/resume", json={"flow": ["twin-a"]}).json()["results"] == []
    # What the body cannot say is refused, naming it.
    for bad, words in (({}, "name the runs"), ({"flow": ["twin-a"], "keep": True, "now": True}, "now goes with POST /jobs/stop"), ({"since": "soon", "all": True}, "since 'soon'")):
        resp = s.client.post("/jobs/cancel", json=bad)
        assert resp.status_code == 422 and words in resp.json()["detail"], (bad, resp.text)


def test_acts_by_filter_say_what_they_need_in_a_line(cli: Cli):
    make_runs(cli, {"lone": 3})
    before = statuses(cli)
    for args, words in (
        (["stop"], "stop needs a run id, or filters that name the runs"),
        (["stop", "abc123", "--flow", "lone"], "give a run id or filters that name the runs, not both"),
        (["stop", "abc123", "--dry-run"], "--dry-run and --yes go with filters"),
        (["cancel", "--flow", "lone"], "add --yes to cancel them without asking, or --dry-run to list them"),
    ):
        res = cli.call(*args)
        assert res.returncode == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1, (args, res.stderr)
    assert statuses(cli) == before, "a refused or unasked act acted"
    assert cli.call("approve", "--flow", "lone", "--yes").stdout.startswith("no runs it can approve match --flow lone")


def test_a_batch_with_a_refusal_exits_1_and_says_which_run_and_why(cli: Cli, tmp_path: Path):
    from .conftest import write_flow

    flow = write_flow(tmp_path, "spender", 'name = "spender"\n[budget]\nmax_cost = 0.5\n' + "".join(
        f"""[[agents]]\nname = "n{i}"\ncommand = "echo '{{\\"_usage\\": {{\\"tokens\\": 1, \\"cost\\": 0.5}}}}' > $SWARMKIT_OUTPUT"\n""" for i in range(2)
    ))
    spent = cli.call("run", str(flow), "--detach").stdout.strip()
    cli.call("run", "--resume", spent)  # parks by its budget after the first node
    fine = cli.call("run", str(flow), "--detach").stdout.strip()
    assert cli.call("stop", fine).returncode == 0  # stopped while queued: nothing spent
    res = cli.call("resume", "--flow", "spender", "--status", "stopped", "--yes")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"cannot resume {spent[:8]}: its budget is spent (cost 0.50 of max_cost 0.50)" in res.stderr
    assert f"{fine[:8]} queued (was stopped)" in res.stdout and ": 1 resumed, 1 refused." in res.stdout, res.stdout
    assert statuses(cli)[spent] == "stopped" and statuses(cli)[fine] == "queued"
