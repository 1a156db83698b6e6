"""`swarmkit serve`, end to end: a real server process on SQLite and PostgreSQL, driven over HTTP.

Every route and its codes; acts over HTTP on runs hosted by the server and
by a CLI worker, and CLI acts on runs the server hosts; the CLI and the API
saying the same thing for the same act on the same run.
"""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from swarmkit.store.models import JOB_COLUMNS

from .conftest import Cli, release, wait_for
from .serve_helpers import Served


def status_of(s: Served, job_id: str) -> str:
    return s.client.get(f"/jobs/{job_id}").json()["status"]


def wait_status(s: Served, job_id: str, *want: str, timeout: float = 60) -> dict:
    return wait_for(lambda: (v := s.client.get(f"/jobs/{job_id}").json()) and v["status"] in want and v, timeout=timeout, what=f"{job_id[:8]} to be {want}")


def submit(s: Served, flow: str, **inputs: str) -> dict:
    resp = s.client.post("/jobs", json={"flow": flow, "inputs": inputs})
    assert resp.status_code == 201, resp.text
    return resp.json()


def test_routes_answer_with_their_codes(cli: Cli, serving):
    serve, folder, _gates = serving
    s = serve()
    health = s.client.get("/health").json()
    assert health["ok"] and health["schema_revision"] == health["schema_head"] and health["hosting"]

    view = submit(s, "quick", who="world")
    assert set(JOB_COLUMNS) <= set(view) and {"display_status", "workspaces", "short_id"} <= set(view)
    assert view["status"] in ("queued", "running") and view["inputs"] == {"who": "world"}
    wait_status(s, view["id"], "completed")
    # The host destroys the run's workspace just after the run ends: compare once it has.
    done = wait_for(lambda: (v := s.client.get(f"/jobs/{view['id']}").json()) and all(w["state"] == "destroyed" for w in v["workspaces"]) and v, what="the workspace to go")
    # The merged view is `swarmkit status ID --json`, column for column.
    cli_view = json.loads(cli.run("status", view["id"], "--json", check=True).stdout)
    assert s.client.get(f"/jobs/{view['id']}").json() == cli_view == done
    assert s.client.get(f"/jobs/{view['id'][:6]}").json()["id"] == view["id"]

    # Submits the CLI would refuse, refused with its words.
    assert s.client.post("/jobs", json={"flow": "nosuch"}).status_code == 404
    cli_says = cli.run("run", str(folder / "broken.toml")).stderr.strip().removeprefix("swarmkit: ")
    resp = s.client.post("/jobs", json={"flow": "broken"})
    # ... naming the file as the client named it: no path of the server's shows in an error.
    assert resp.status_code == 422 and resp.json()["detail"] == cli_says.replace(str((folder / "broken.toml").resolve()), "broken.toml"), (resp.text, cli_says)
    resp = s.client.post("/jobs", json={"flow": "quick", "inputs": {" ": "x"}})
    assert resp.status_code == 422 and resp.json()["detail"] == cli.run("run", str(folder / "quick.toml"), "--input", " =x").stderr.strip().removeprefix("swarmkit: ")
    for bad in ({"flow": "quick", "inputs": {"a": 1}}, {"flow": "quick", "extra": True}, {"flow": 5}, {}, {"flow": "../quick"}, {"flow": "a/b"}):
        resp = s.client.post("/jobs", json=bad)
        assert resp.status_code == 422 and resp.json()["detail"], (bad, resp.text)
    resp = s.client.post("/jobs", content=b"{not json", headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    resp = s.client.post("/jobs", content=b'{"flow": "' + b"x" * 100_000 + b'"}', headers={"content-type": "application/json"})
    assert resp.status_code == 413, resp.text

    # Lists, pages, filters.
    second = submit(s, "quick")
    wait_status(s, second["id"], "completed")
    page = s.client.get("/jobs", params={"limit": 1}).json()
    # The run list's one shape, as `swarmkit status -o json` gives it, with the page's cursor beside it.
    assert page["schema"] == 1 and set(page) == {"schema", "runs", "next_cursor", "has_more"}
    assert [j["id"] for j in page["runs"]] == [second["id"]] and page["has_more"]
    page2 = s.client.get("/jobs", params={"limit": 1, "cursor": page["next_cursor"]}).json()
    assert [j["id"] for j in page2["runs"]] == [view["id"]] and not page2["has_more"] and page2["next_cursor"] is None
    assert len(s.client.get("/jobs", params={"status": "completed", "flow": "quick"}).json()["runs"]) == 2
    assert s.client.get("/jobs", params={"status": "running"}).json()["runs"] == []
    for params in ({"status": "bogus"}, {"limit": 0}, {"limit": "x"}, {"cursor": "zz"}, {"cursor": "0" * 32}):
        assert s.client.get("/jobs", params=params).status_code == 422, params

    # Events and the audit.
    evs = s.client.get(f"/jobs/{view['id']}/events").json()
    kinds = [e["kind"] for e in evs["events"]]
    assert kinds[0] == "run.submitted" and kinds[-1] == "run.completed" and not evs["has_more"]
    one = s.client.get(f"/jobs/{view['id']}/events", params={"after": evs["events"][0]["id"], "limit": 1}).json()
    assert one["events"][0]["id"] == evs["events"][1]["id"] and one["has_more"]
    audit = s.client.get("/events", params={"limit": 1}).json()
    assert audit["events"][0]["action"] == "run.submitted" and audit["events"][0]["actor"] == "tester@ci" and audit["has_more"]
    rest = s.client.get("/events", params={"after": audit["next_cursor"]}).json()
    assert [e["job_id"] for e in rest["events"]] == [second["id"]]
    assert [e["job_id"] for e in s.client.get("/events", params={"job_id": second["id"][:8]}).json()["events"]] == [second["id"]]

    # Acts on an ended run: 409, naming its status, in the CLI's words.
    for act in ("stop", "resume", "cancel", "approve"):
        resp = s.client.post(f"/jobs/{view['id']}/{act}")
        assert resp.status_code == 409 and resp.json()["status"] == "completed" and "completed" in resp.json()["detail"], (act, resp.text)
        assert s.client.post(f"/jobs/{'f' * 32}/{act}").status_code == 404
    assert s.client.post(f"/jobs/{view['id']}/cancel", json={"keep": "yes"}).status_code == 422
    resp = s.client.post(f"/jobs/{view['id']}/stop", json={"now": True})  # stop --now on an ended run: nothing to stop
    assert resp.status_code == 409 and resp.json()["status"] == "completed", resp.text
    assert s.client.post(f"/jobs/{view['id']}/stop", json={"now": "yes"}).status_code == 422

    # Unknown and odd ids: 4xx with a message, never a 500.
    for ref in ("zzzz", "ffffffff", "%00", "a%20b", "x" * 60, "'; drop table jobs;--"):
        resp = s.client.get(f"/jobs/{ref}")
        assert resp.status_code in (404, 422) and resp.json()["detail"], (ref, resp.text)
    assert s.client.get("/nowhere").status_code == 404
    assert s.client.delete("/jobs").status_code == 405

    assert s.client.get("/openapi.json").json()["paths"]["/jobs/{job_id}/stop"]
    families = {f.name: f for f in text_string_to_metric_families(s.client.get("/metrics").text)}
    runs = {smp.labels["status"]: smp.value for smp in families["swarmkit_runs"].samples}
    assert runs["completed"] == 2 and runs["running"] == 0
    served = {(smp.labels["route"], smp.labels["code"]): smp.value for smp in families["swarmkit_http_requests"].samples if smp.name.endswith("_total")}
    assert served[("/jobs", "201")] == 2 and served[("/jobs/{job_id}/stop", "409")] == 2
    assert "swarmkit_store_errors" in families and "swarmkit_heartbeat_age_seconds_max" in families
    # The runs this server hosted went through boundaries it timed.
    boundary = {smp.name: smp.value for smp in families["swarmkit_boundary_check_seconds"].samples}
    assert boundary["swarmkit_boundary_check_seconds_count"] >= 2 and boundary["swarmkit_boundary_check_seconds_sum"] > 0


def test_stop_resume_and_cancel_over_http_on_runs_the_server_hosts(cli: Cli, serving):
    serve, _folder, gates = serving
    s = serve()
    run = submit(s, "held")
    wait_status(s, run["id"], "running")
    wait_for(lambda: any(e["kind"] == "log" for e in s.client.get(f"/jobs/{run['id']}/events").json()["events"]), what="the agent to start")
    first = s.client.post(f"/jobs/{run['id']}/stop")
    assert first.status_code == 200, first.text
    body = first.json()
    assert set(body) >= {"job_id", "stop_requested_at", "already_requested", "detail"}
    assert body["job_id"] == run["id"] and not body["already_requested"] and body["stop_requested_at"] and body["display_status"] == "stopping"
    assert "it will stop at the next agent boundary" in body["detail"]
    again = s.client.post(f"/jobs/{run['id']}/stop").json()
    assert again["already_requested"] and again["stop_requested_at"] == body["stop_requested_at"] and again["stop_requested_by"] == "tester@ci"
    # The CLI re-reports the same pending request, in the same words.
    assert cli.run("stop", run["id"]).stdout.strip() == again["detail"]
    release(gates, "go")
    stopped = wait_status(s, run["id"], "stopped")
    assert stopped["current_node"] == "after" or stopped["step"] == 1
    reaction = {smp.name: smp.value for fam in text_string_to_metric_families(s.client.get("/metrics").text) if fam.name == "swarmkit_stop_reaction_seconds" for smp in fam.samples}
    assert reaction["swarmkit_stop_reaction_seconds_count"] == 1 and reaction["swarmkit_stop_reaction_seconds_sum"] > 0

    resumed = s.client.post(f"/jobs/{run['id']}/resume")
    assert resumed.status_code == 200 and resumed.json()["changed"] and resumed.json()["hint"] is None, resumed.text
    wait_status(s, run["id"], "completed")
    actions = [e["action"] for e in s.client.get("/events", params={"job_id": run["id"]}).json()["events"]]
    assert actions == ["run.submitted", "run.stop_requested", "run.stopped", "run.resumed"]

    # A cancel its host carries out: 202, then cancelled.
    (gates / "go").unlink()
    other = submit(s, "held")
    wait_status(s, other["id"], "running")
    resp = s.client.post(f"/jobs/{other['id']}/cancel", json={"keep": True})
    assert resp.status_code == 202 and resp.json()["display_status"] == "cancelling", resp.text
    # The host interrupts the agent at once, so the repeat finds the cancel still pending (re-reported) or
    # already carried out (409 naming the status: seen beside CPU hogs); never a second cancel.
    again = s.client.post(f"/jobs/{other['id']}/cancel")
    if again.status_code == 409:
        assert again.json()["status"] == "cancelled", again.text
    else:
        assert again.status_code in (200, 202) and again.json()["already_requested"], again.text
    wait_status(s, other["id"], "cancelled")

    gated = submit(s, "gated")
    wait_status(s, gated["id"], "deferred")
    assert s.client.post(f"/jobs/{gated['id']}/stop").status_code == 409
    resp = s.client.post(f"/jobs/{gated['id']}/approve")
    assert resp.status_code == 200 and "approved 'ship'" in resp.json()["detail"], resp.text
    wait_status(s, gated["id"], "completed")


def test_the_cli_and_the_api_say_the_same_for_the_same_act(cli: Cli, serving):
    serve, _folder, _gates = serving
    s = serve("--no-host")
    runs = [submit(s, "quick") for _ in range(17)]
    # Seventeen ids share at least one first hex digit: an ambiguous prefix lists the candidates.
    firsts = [r["id"][0] for r in runs]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    resp = s.client.get(f"/jobs/{shared}")
    assert resp.status_code == 400 and "give more of the id" in resp.json()["detail"]
    assert set(resp.json()["candidates"]) == {r["id"] for r in runs if r["id"][0] == shared}
    assert cli.call("status", shared).returncode == 2

    a, b = runs[0]["id"], runs[1]["id"]
    # A stop of a queued run: stopped at once, by either door, in the same words. The CLI's words from a
    # real process here; the rest of its words through the same main() in this process (what is compared
    # is the words, which a process of its own does not change).
    cli_words = cli.run("stop", a, check=True).stdout.strip()
    api = s.client.post(f"/jobs/{b}/stop")
    assert api.status_code == 200 and api.json()["detail"] == cli_words.replace(a[:8], b[:8])
    assert status_of(s, a) == status_of(s, b) == "stopped"
    # Then the same act on the same run, twice over: a no-op the CLI exits 0 on, the API answers 409.
    for act in ("stop", "approve"):
        by_cli = cli.call(act, a)
        api = s.client.post(f"/jobs/{a}/{act}")
        # A no-op is said on stdout (exit 0), a refusal on stderr (exit 1): the same words either way.
        words = by_cli.stdout.strip() or by_cli.stderr.strip().removeprefix("swarmkit: ")
        assert api.status_code == 409 and api.json()["detail"] == words and api.json()["status"] == "stopped", (act, by_cli, api.text)
    # Resume with nobody hosting: the CLI's hint, over HTTP too.
    api = s.client.post(f"/jobs/{b}/resume").json()
    assert api["changed"] and "no live worker is watching this store" in api["hint"]
    assert "no live worker" in cli.call("resume", a).stderr
    assert s.client.get(f"/jobs/{a}").json() | {"updated_at": 0} == json.loads(cli.call("status", a, "--json").stdout) | {"updated_at": 0}
    # Cancel a queued run keeping its workspaces, by each door.
    by_cli = cli.call("cancel", a, "--keep", check=True).stdout.strip()
    api = s.client.post(f"/jobs/{b}/cancel", json={"keep": True})
    assert api.status_code == 200 and api.json()["detail"] == by_cli.replace(a[:8], b[:8]) and api.json()["status"] == "cancelled"
    by_cli = cli.call("cancel", a)
    api = s.client.post(f"/jobs/{a}/cancel")
    assert by_cli.returncode == 0 and api.status_code == 409 and api.json()["detail"] == by_cli.stdout.strip()
    by_cli = cli.call("resume", a)
    api = s.client.post(f"/jobs/{a}/resume")
    assert by_cli.returncode == 1 and api.status_code == 409 and "swarmkit: " + api.json()["detail"] == by_cli.stderr.strip() == "swarmkit: " + f"cannot resume {a[:8]}: it is cancelled."
    audit = s.client.get("/events", params={"job_id": b}).json()["events"]
    assert {e["actor"] for e in audit} == {"tester@ci"}


def test_a_repeated_stop_answers_as_the_act_path_does_and_records_nothing(cli: Cli, serving):
    """A stop of a run already stopping (the idempotent repeat the HTTP door answers from one read): 200
    with the CLI's words, the shape of ActAnswer, the run's view as GET shows it, and no audit row."""
    from swarmkit.api.schemas import ActAnswer

    serve, _folder, gates = serving
    s = serve()
    run = submit(s, "held")
    # In its first agent (a stop asked before it would take at the boundary before it, at once).
    wait_for(lambda: any(e["text"] == "waiting" for e in s.client.get(f"/jobs/{run['id']}/events").json()["events"]), what="the agent to start")
    first = s.client.post(f"/jobs/{run['id']}/stop")
    assert first.status_code == 200 and first.json()["changed"], first.text
    audit = s.client.get("/events", params={"job_id": run["id"]}).json()["events"]
    ticking = {"heartbeat_at": 0, "heartbeat_mono": 0, "last_event_at": 0, "updated_at": 0, "stall_at": 0}  # its host writes these meanwhile
    for _ in range(2):
        again = s.client.post(f"/jobs/{run['id']}/stop", json={})
        body = again.json()
        assert again.status_code == 200 and not body["changed"] and body["already_requested"], again.text
        assert ActAnswer.model_validate(body).model_dump() == body
        assert body["status"] == "running" and body["display_status"] == "stopping" == body["job"]["display_status"]
        assert body["stop_requested_at"] == first.json()["stop_requested_at"] and body["stop_requested_by"] == "tester@ci"
        assert body["job"] | ticking == s.client.get(f"/jobs/{run['id']}").json() | ticking
        by_cli = cli.run("stop", run["id"], check=True).stdout.strip()
        assert body["detail"] == by_cli and "already requested" in by_cli
    assert s.client.get("/events", params={"job_id": run["id"]}).json()["events"] == audit
    release(gates, "go")
    wait_status(s, run["id"], "stopped")


def test_an_http_stop_of_a_run_a_cli_worker_hosts_and_a_cli_stop_of_one_the_server_hosts(cli: Cli, serving):
    serve, _folder, gates = serving
    front = serve("--no-host")
    worker = cli.start("worker", str(cli.workspace))
    try:
        run = submit(front, "held")
        hosted = wait_status(front, run["id"], "running")
        assert hosted["pid"] == worker.pid
        assert front.client.post(f"/jobs/{run['id']}/stop").status_code == 200
        release(gates, "go")
        assert [f for f in front.stream(run["id"]) if f.get("event") == "end"][0]["data"]["status"] == "stopped"
    finally:
        worker.terminate()
        worker.wait(30)
    (gates / "go").unlink()
    host = serve()
    run = submit(host, "held")
    assert wait_status(host, run["id"], "running")["pid"] == host.proc.pid
    said = cli.run("stop", run["id"], check=True).stdout
    assert "stop requested for" in said
    release(gates, "go")
    assert wait_status(host, run["id"], "stopped")["stop_requested_by"] == "tester@ci"
