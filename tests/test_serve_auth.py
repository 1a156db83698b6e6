"""Tokens: 401 without, 403 for a read token that acts, the token's name in the audit; no token, loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmkit.api.auth import Auth, Denied, TokenError, parse_tokens
from tests.reliability import swarmkit_in_process

from .conftest import Cli
from .serve_helpers import TOKENS, Served, bearer, flows, token_file
from .test_serve import wait_status


def test_tokens_decide_who_may_read_and_act(cli: Cli, tmp_path: Path):
    folder = flows(tmp_path / "flows", tmp_path / "gates")
    s = Served(cli, "--flows", str(folder), "--tokens", str(token_file(tmp_path)))
    try:
        c = s.client
        assert c.get("/health").status_code == 200 and c.get("/health").json()["auth"]
        assert c.get("/openapi.json").status_code == 200
        for path in ("/jobs", "/events", "/metrics"):
            resp = c.get(path)
            assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer", path
        assert c.get("/jobs", headers={"Authorization": "Bearer not-a-token-of-this-server"}).status_code == 401
        assert c.get("/jobs", headers={"Authorization": "Basic " + TOKENS["ops"][1]}).status_code == 401
        assert c.post("/jobs", json={"flow": "quick"}).status_code == 401
        assert c.post("/jobs", json={"flow": "quick"}, headers=bearer("viewer")).status_code == 403
        resp = c.post("/jobs", json={"flow": "quick"}, headers=bearer("ops"))
        assert resp.status_code == 201, resp.text
        job_id = resp.json()["id"]
        c.headers.update(bearer("viewer"))
        wait_status(s, job_id, "completed")
        for act in ("stop", "resume", "cancel", "approve"):
            resp = c.post(f"/jobs/{job_id}/{act}")
            assert resp.status_code == 403 and "scope read" in resp.json()["detail"], act
        assert c.get("/metrics").status_code == 200
        assert c.post(f"/jobs/{job_id}/cancel", headers=bearer("ops")).status_code == 409
        actors = {e["actor"] for e in c.get("/events", params={"job_id": job_id}).json()["events"]}
        assert actors == {"ops"}  # the token's name is the actor the audit records
        for resp in (c.get("/health"), c.get("/jobs"), c.get(f"/jobs/{job_id}")):
            assert "secret" not in resp.text
    finally:
        s.stop()


def test_without_a_token_it_serves_loopback_only(cli: Cli, tmp_path: Path):
    refused = cli.run("serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2 and "refusing to serve on 0.0.0.0 with no token configured" in refused.stderr
    bad = tmp_path / "bad-tokens"
    bad.write_text("ops admin short\n")
    # Through the same main() in this process (the refusal above shows a process's), on a store that cannot
    # be made: a token file taken gets as far as the store and ends the verb there rather than serving on.
    nowhere = tmp_path / "a-file"
    nowhere.write_text("")
    refused = swarmkit_in_process("serve", f"sqlite:///{nowhere}/store.db", "--port", "0", "--tokens", str(bad), cwd=cli.workspace)
    assert refused.returncode == 2 and "line 1" in refused.stderr and "short" not in refused.stderr.replace("shorter", "")
    s = Served(cli, "--host", "0.0.0.0", "--allowed-host", "swarmkit.test", "--insecure", "--no-host")
    try:
        assert "NO AUTH (--insecure)" in s.output()
    finally:
        s.stop()
    s = Served(cli, "--host", "0.0.0.0", "--allowed-host", "swarmkit.test", env={"SWARMKIT_TOKENS": "ops operate " + TOKENS["ops"][1]}, )
    try:
        assert s.client.get("/jobs").status_code == 401 and s.client.get("/jobs", headers=bearer("ops")).status_code == 200
    finally:
        s.stop()


def test_token_files_parse_strictly():
    tokens = parse_tokens('[{"name": "a", "scope": "read", "token": "0123456789abcdefX"}]', "json")
    auth = Auth(tokens, "anon")
    assert auth.check("Bearer 0123456789abcdefX", "read") == "a"
    with pytest.raises(Denied) as denied:
        auth.check("Bearer 0123456789abcdefX", "operate")
    assert denied.value.code == 403
    for text in ("a read", "a root 0123456789abcdefX", "a read short", "a read 0123456789abcdef\na read 0123456789abcdeg", "[1]", "{", "b@d! read 0123456789abcdefX"):
        with pytest.raises(TokenError):
            parse_tokens(text, "t")
    assert Auth([], "me@here").check(None, "operate") == "me@here"


def test_which_error_comes_first_is_fastapis_on_the_routes_that_answer_directly(cli: Cli, tmp_path: Path):
    """`GET /jobs/{id}` and the acts answer their plain requests themselves (api/direct.py); every other
    request FastAPI answers, in its order: a body that is not JSON (422) before the token (401, 403), the
    token before a bad id or a body that is not the act's flags (422), and those before the run (404)."""
    s = Served(cli, "--flows", str(flows(tmp_path / "flows", tmp_path / "gates")), "--tokens", str(token_file(tmp_path)), "--no-host")
    try:
        c = s.client
        job_id = c.post("/jobs", json={"flow": "quick"}, headers=bearer("ops")).json()["id"]
        unknown, stop = "0" * 32, f"/jobs/{job_id}/stop"
        for path in (f"/jobs/{job_id}", "/jobs/not-hex", f"/jobs/{'a' * 33}", f"/jobs/{job_id[:8]}%0A"):
            assert c.get(path).status_code == 401, path
        for path in ("/jobs/not-hex", f"/jobs/{'a' * 33}", f"/jobs/{job_id[:8]}%0A"):
            assert c.get(path, headers=bearer("viewer")).status_code == 422, path
        assert c.get(f"/jobs/{unknown}", headers=bearer("viewer")).status_code == 404
        assert c.get(f"/jobs/{job_id[:8].upper()}", headers=bearer("viewer")).json()["id"] == job_id
        for who in ({}, bearer("viewer"), bearer("ops")):
            resp = c.post(stop, content=b"{not json", headers=who)
            assert resp.status_code == 422 and resp.json()["errors"][0]["type"] == "json_invalid", resp.text
        for body in ({"now": "yes"}, {"later": True}, [True]):
            assert c.post(stop, json=body).status_code == 401, body
            assert c.post(stop, json=body, headers=bearer("viewer")).status_code == 403, body
            assert c.post(stop, json=body, headers=bearer("ops")).status_code == 422, body
        assert c.post("/jobs/not-hex/stop", json={}, headers=bearer("viewer")).status_code == 403
        assert c.post("/jobs/not-hex/stop", json={}, headers=bearer("ops")).status_code == 422
        assert c.post(f"/jobs/{unknown}/stop", json={}, headers=bearer("ops")).status_code == 404
        assert c.get(f"/jobs/{job_id}", headers=bearer("viewer")).json()["status"] == "queued"  # nothing above touched it
        # A plain request's flags are the act's: keep, on a cancel of the queued run by its prefix.
        resp = c.post(f"/jobs/{job_id[:12]}/cancel", json={"keep": True}, headers=bearer("ops"))
        assert resp.status_code == 200 and resp.json()["detail"].endswith("workspaces kept.") and resp.json()["status"] == "cancelled", resp.text
        assert c.post(f"/jobs/{job_id}/cancel", json={}, headers=bearer("ops")).status_code == 409
    finally:
        s.stop()
