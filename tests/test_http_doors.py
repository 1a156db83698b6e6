"""Every HTTP door shut to strangers, tried as an attacker would, on a real `swarmkit serve`.

The routes are read from the server's own /openapi.json, so a route added later is probed
without a new test: a forged `Host` (DNS rebinding), a foreign `Origin`, `Sec-Fetch-Site:
cross-site`, and a body that is not JSON (the "simple" cross-site request a browser sends
without asking) are each refused, and the store shows that nothing happened.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.reliability import swarmkit_in_process

from .conftest import Cli, wait_for
from .helpers import need
from .serve_helpers import Served, bearer, token_file

JSON = {"Content-Type": "application/json"}


def _routes(s: Served) -> list[tuple[str, str]]:
    spec = s.client.get("/openapi.json").json()
    return sorted((method.upper(), path) for path, ops in spec["paths"].items() for method in ops)


def _fill(path: str, run_id: str) -> str:
    # Every path parameter a run's id: the refusals come before any route is chosen, and the
    # control request below must reach a real run.
    out, _, rest = path.partition("{")
    while rest:
        _name, _, after = rest.partition("}")
        out += run_id
        more, _, rest = after.partition("{")
        out += more
    return out


def _store_state(cli: Cli) -> str:
    """What a refused request must leave as it was: every run's status and flags, and the audit."""
    runs = json.loads(cli.run("status", "--all", "-o", "json", check=True).stdout)["runs"]
    audit = cli.run("audit", "--json", check=True).stdout
    keep = ("id", "status", "stop_requested_at", "cancel_requested_at", "updated_at")
    return json.dumps([{k: r.get(k) for k in keep} for r in sorted(runs, key=lambda r: r["id"])]) + audit


def test_forged_hosts_foreign_origins_and_non_json_acts_are_refused_on_every_route(cli: Cli, serving, tmp_path: Path):
    serve, folder, gates = serving
    s = serve()
    held = s.client.post("/jobs", json={"flow": "held"}).json()
    wait_for(lambda: (gates / "go.waiting").exists() or s.client.get(f"/jobs/{held['id']}").json()["status"] == "running", what="the held run to start")
    routes = _routes(s)
    acts = [(m, p) for m, p in routes if m not in ("GET", "HEAD", "OPTIONS")]
    assert ("POST", "/jobs/{job_id}/cancel") in acts and ("POST", "/jobs") in acts, routes
    before = _store_state(cli)
    port = s.url.rsplit(":", 1)[1]
    tried = 0
    with httpx.Client(base_url=s.url, timeout=30) as raw:
        for method, template in routes:
            path = _fill(template, held["id"])
            # DNS rebinding: the browser sends the attacker's name. Nothing but a 400 comes back.
            for forged in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", "localhost.:1@evil.example"):
                resp = raw.request(method, path, headers={"Host": forged, **JSON}, content=b"{}" if method == "POST" else None)
                assert resp.status_code in (400, 421), (method, path, forged, resp.status_code, resp.text)
                assert "runs" not in resp.text and held["id"] not in resp.text, (method, path, resp.text)
                tried += 1
            for origin in ("http://evil.example", f"http://evil.example:{port}", "null", f"http://localhost:{int(port) + 1}", f"https://127.0.0.1.evil.example:{port}"):
                resp = raw.request(method, path, headers={"Origin": origin, **JSON}, content=b"{}" if method == "POST" else None)
                assert resp.status_code == 403, (method, path, origin, resp.status_code, resp.text)
                tried += 1
            resp = raw.request(method, path, headers={"Sec-Fetch-Site": "cross-site", **JSON}, content=b"{}" if method == "POST" else None)
            assert resp.status_code == 403, (method, path, resp.text)
            if (method, template) in acts:
                # The simple requests a page can send anywhere without a preflight, and a missing type.
                for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
                    headers = {"Content-Type": kind} if kind else {}
                    resp = raw.request(method, path, headers=headers, content=b'{"keep": false}')
                    assert resp.status_code == 415, (method, path, kind, resp.status_code, resp.text)
                    assert "application/json" in resp.json()["detail"]
                    tried += 1
    assert _store_state(cli) == before, "a refused request changed the store"
    assert (cli.workspace / ".swarmkit" / "runs" / held["id"]).exists(), "a refused cancel destroyed the workspace"
    print(f"{tried} refused requests over {len(routes)} routes ({len(acts)} that act)")

    # The same requests from the server's own origin, in JSON, are served.
    own = {"Origin": s.url, "Sec-Fetch-Site": "same-origin", **JSON}
    assert s.client.get("/jobs", headers=own).status_code == 200
    assert s.client.get("/jobs", headers={"Host": f"localhost:{port}"}).status_code == 200
    assert s.client.get("/jobs", headers={"Host": f"[::1]:{port}"}).status_code == 200
    resp = s.client.post(f"/jobs/{held['id']}/cancel", headers=own, json={"keep": True})
    assert resp.status_code in (200, 202), resp.text
    assert wait_for(lambda: s.client.get(f"/jobs/{held['id']}").json()["status"] == "cancelled", what="the cancel from the server's own origin")


def test_tokens_come_only_from_the_authorization_header(cli: Cli, serving, tmp_path: Path):
    serve, _folder, _gates = serving
    s = serve("--tokens", str(token_file(tmp_path)))
    secret = bearer("ops")["Authorization"].split()[1]
    assert s.client.get("/jobs", headers=bearer("viewer")).status_code == 200
    assert s.client.get("/jobs", params={"token": secret}).status_code == 401
    assert s.client.get("/jobs", params={"access_token": secret}).status_code == 401
    assert s.client.get("/jobs", headers={"Cookie": f"token={secret}; Authorization=Bearer {secret}"}).status_code == 401
    assert s.client.post("/jobs", params={"token": secret}, json={"flow": "quick"}).status_code == 401


def test_cors_stays_off_unless_origins_are_named(cli: Cli, serving, tmp_path: Path):
    serve, _folder, _gates = serving
    preflight = {"Origin": "https://dash.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    plain = serve()
    resp = plain.client.options("/jobs", headers=preflight)
    assert "access-control-allow-origin" not in resp.headers and resp.status_code == 403, (resp.status_code, resp.headers)
    named = serve("--cors-origin", "https://dash.example.com")
    resp = named.client.options("/jobs", headers=preflight)
    assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == "https://dash.example.com", resp.headers
    # The named origin may act; another may not, even on a server with CORS on.
    assert named.client.post("/jobs", headers={"Origin": "https://dash.example.com"}, json={"flow": "quick"}).status_code == 201
    assert named.client.post("/jobs", headers={"Origin": "https://other.example.com"}, json={"flow": "quick"}).status_code == 403


def test_a_wildcard_bind_needs_the_names_it_answers_to(cli: Cli, tmp_path: Path):
    tokens = str(token_file(tmp_path))
    res = cli.run("serve", "--host", "0.0.0.0", "--port", "0", "--no-host", "--tokens", tokens, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "--allowed-host" in lines[0], res.stderr
    # The other refusals through the same main() in this process (the real process above shows how a refusal
    # of `serve` ends one), on a store that cannot be made: a value taken gets as far as the store and ends
    # the verb there (exit 1, other words) rather than serving on.
    nowhere = tmp_path / "a-file"
    nowhere.write_text("")
    unmade = f"sqlite:///{nowhere}/store.db"
    for bad in ("evil.example:80", "http://x", "", "a b", "*"):
        res = swarmkit_in_process("serve", unmade, "--allowed-host", bad, "--port", "0", "--no-host", cwd=cli.workspace)
        assert res.returncode == 2 and "--allowed-host" in res.stderr and "Traceback" not in res.stderr, (bad, res.stderr)
    res = swarmkit_in_process("serve", unmade, "--cors-origin", "dash.example.com/path", "--port", "0", "--no-host", cwd=cli.workspace)
    assert res.returncode == 2 and "--cors-origin" in res.stderr, res.stderr
    s = Served(cli, "--host", "0.0.0.0", "--allowed-host", "swarmkit.test", "--allowed-host", "*.fleet.test", "--tokens", str(token_file(tmp_path)), "--no-host")
    try:
        port = s.url.rsplit(":", 1)[1]
        for name in ("swarmkit.test", "a.fleet.test", "localhost", "127.0.0.1"):
            assert s.client.get("/health", headers={"Host": f"{name}:{port}"}).status_code == 200, name
        for name in ("evil.example", "fleet.test.evil.example", "swarmkit.test.evil.example"):
            assert s.client.get("/health", headers={"Host": f"{name}:{port}"}).status_code == 400, name
    finally:
        s.stop()


def test_ids_match_exactly_and_errors_name_no_path(cli: Cli, serving, tmp_path: Path):
    serve, folder, _gates = serving
    s = serve()
    run = s.client.post("/jobs", json={"flow": "quick"}).json()
    assert s.client.get(f"/jobs/{run['id']}").status_code == 200
    for tail in ("%20", "%0a", "%00", "/", "%09"):
        resp = s.client.get(f"/jobs/{run['id']}{tail}")
        assert resp.status_code in (404, 422) and resp.json()["detail"], (tail, resp.text)
    resp = s.client.get(f"/jobs/{run['id']}%20")
    assert resp.status_code == 422 and "job_id" in resp.json()["detail"], resp.text
    res = cli.run("status", run["id"] + " ")
    assert res.returncode == 2 and "no run matches" in res.stderr, res.stderr
    # Error bodies name the id or the field, never where the store or the flows lie.
    secrets = [str(cli.workspace), str(folder), str(tmp_path)]
    bodies = [
        s.client.get("/jobs/abcdef12").text,
        s.client.get("/jobs/abcdef12/events").text,
        s.client.post("/jobs/abcdef12/stop", json={}).text,
        s.client.post("/jobs", json={"flow": "broken"}).text,
        s.client.post("/jobs", json={"flow": "nosuch"}).text,
        s.client.get("/events", params={"job_id": "abcdef12"}).text,
    ]
    for body in bodies:
        assert "detail" in body and not any(p in body for p in secrets), body
    assert "no run matches 'abcdef12'" in bodies[0] and "broken.toml" in bodies[3]


@pytest.mark.parametrize("value", ["\ud800", "a\x00b", "\x1b[2J", "x" * 20_000])
def test_one_bad_character_is_a_422_naming_the_field_never_a_500(cli: Cli, serving, value: str):
    serve, _folder, _gates = serving
    s = serve()
    for body in ({"flow": "quick", "inputs": {"k": value}}, {"flow": "quick", "inputs": {value: "v"}}, {"flow": value}, {"flow": "quick", value: 1}):
        raw = json.dumps(body).encode("ascii")  # JSON's own escapes: a lone surrogate travels as \\ud800
        resp = s.client.post("/jobs", content=raw)
        if value == "\x1b[2J" and body == {"flow": "quick", "inputs": {"k": value}}:
            # Not refused everywhere: an input's value may hold text the terminal shows as inert.
            assert resp.status_code == 422 or resp.status_code == 201, resp.text
            continue
        assert resp.status_code in (413, 422), (body if len(value) < 100 else "long", resp.status_code, resp.text[:300])
        detail = resp.json()["detail"]
        assert detail and ("inputs" in detail or "input" in detail or "flow" in detail or "body" in detail), detail[:300]
        assert "\x1b" not in resp.text and "\x00" not in resp.text
    assert "Traceback" not in s.output()


def test_a_control_character_in_an_inputs_key_is_refused_by_the_cli_too(cli: Cli, tmp_path: Path):
    flow = tmp_path / "one.toml"
    flow.write_text('name = "one"\n[[agents]]\nname = "a"\ncommand = "true"\n', encoding="utf-8")
    res = subprocess.run(cli.argv("run", str(flow), "--detach", "--input", "k\x1b[31m=v", str(cli.workspace)), capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "control character" in res.stderr and "\x1b" not in res.stderr, res.stderr
    res = cli.run("run", str(flow), "--detach", "--input", "k=" + "v" * 20_000)
    assert res.returncode == 2 and "at most" in res.stderr, res.stderr[:300]


def test_a_store_that_is_away_is_a_503_naming_no_url(tmp_path: Path):
    """The store's URL (its host, port, user, password) is the server's business: a 503 says the store
    is away and the server's log says why."""
    from .pg_instance import PgInstance, pg_bin

    need(pg_bin() is not None, "no PostgreSQL server binaries (initdb, pg_ctl) are installed")
    inst = PgInstance().start()
    try:
        url = inst.url.replace("postgres@", "postgres:s3cret-password@")
        cli = Cli(url, tmp_path)
        cli.run("db", "upgrade", check=True)
        s = Served(cli, "--no-host")
        try:
            assert s.client.get("/jobs").status_code == 200
            inst.down()
            resp = s.client.get("/jobs")
            assert resp.status_code == 503 and resp.headers["retry-after"], resp.text
            for secret in ("s3cret", str(inst.port), "127.0.0.1", "postgres", "Traceback"):
                assert secret not in resp.text, (secret, resp.text)
            assert s.client.post("/jobs/abcdef12/stop", json={}).status_code == 503
            inst.up()
            assert wait_for(lambda: s.client.get("/jobs").status_code == 200, what="the store back")
            # Said in the server's log in a line, not as a traceback (one dropped the client's connection).
            assert "s3cret" not in s.output() and "Traceback" not in s.output() and "cannot reach the store" in s.output(), s.output()[-2000:]
        finally:
            s.stop()
    finally:
        inst.stop()
