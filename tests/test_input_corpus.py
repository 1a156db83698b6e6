"""A property-based corpus of hostile strings (lone surrogates, NUL and other controls, escape
sequences, long values) against every route of a real `swarmkit serve` and against the flow
loader: never a 5xx, never a traceback, never a path of the server's in an answer.

The routes and their parameters are read from the server's /openapi.json, so a new route is
fed the corpus without a new test. Bounded for CI (SWARMKIT_CORPUS_EXAMPLES, default 100 per
test); the examples are derandomised, so a failure here is the same on every run.
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmkit.runtime.errors import FlowError
from swarmkit.runtime.flow import parse_flow, parse_inputs

from .conftest import Cli
from .serve_helpers import Served, flows

EXAMPLES = int(os.environ.get("SWARMKIT_CORPUS_EXAMPLES", "100"))
CORPUS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

# Text as an attacker writes it: any code point, surrogates and controls included, and the few
# pieces that have broken parsers before, joined at random; sometimes very long.
_PIECES = st.sampled_from(["\ud800", "\udfff", "\x00", "\x1b[2J", "\x1b]8;;http://x\x07", "\x9b", "../", "/etc/passwd", "%00", "\n", "\r\n", "'", '"', "\\", "{", "}", "\u202e", "é", "🙂", "a" * 300])
HOSTILE = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
    st.lists(_PIECES, min_size=1, max_size=6).map("".join),
    st.builds(lambda s, n: s * n, st.sampled_from(["x", "\x00", "\ud800", "9"]), st.integers(1, 70_000)),
)


def _url_part(text: str) -> str:
    # A lone surrogate has no UTF-8: sent as the bytes a careless client would (surrogatepass).
    # At most 500 characters: past 64 KiB no client sends a URL (httpx refuses it), and a query holds several.
    return quote_from_bytes(text[:500].encode("utf-8", "surrogatepass"), safe="")


def _json(value: object) -> bytes:
    return json.dumps(value).encode("ascii")  # JSON's own \\uXXXX escapes carry any code point


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    workspace = root / "ws"
    workspace.mkdir()
    folder = flows(root / "flows", root / "gates")
    s = Served(Cli(f"sqlite:///{workspace / '.swarmkit' / 'store.db'}", workspace), "--flows", str(folder), "--no-host")
    run = s.client.post("/jobs", json={"flow": "quick"}).json()
    spec = s.client.get("/openapi.json").json()
    yield s, spec, run["id"], [str(root)]
    s.stop()


def _operations(spec: dict) -> list[tuple[str, str, list[dict], dict | None]]:
    ops = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body and "$ref" in body:
                body = spec["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
            elif body and "anyOf" in body:
                refs = [b for b in body["anyOf"] if "$ref" in b]
                body = spec["components"]["schemas"][refs[0]["$ref"].rsplit("/", 1)[1]] if refs else None
            ops.append((method.upper(), path, op.get("parameters", []), body))
    return ops


def _check(resp: httpx.Response, what: str, secrets: list[str]) -> None:
    assert resp.status_code < 500, (what, resp.status_code, resp.text[:500])
    text = resp.text
    assert "Traceback" not in text and "\x1b" not in text and "\x00" not in text, (what, text[:500])
    assert not any(p in text for p in secrets) or resp.status_code < 400, (what, text[:500])


@CORPUS
@given(value=HOSTILE)
def test_no_route_answers_a_hostile_string_with_a_5xx(served, value: str):
    s, spec, run_id, secrets = served
    for method, path, params, body in _operations(spec):
        url = path
        query = []
        for p in params:
            if p["in"] == "path":
                url = url.replace("{" + p["name"] + "}", _url_part(value))
            elif p["in"] == "query":
                query.append(f"{_url_part(p['name'])}={_url_part(value)}")
        full = url + ("?" + "&".join(query) if query else "")
        headers = {"Content-Type": "application/json"}
        for p in params:
            if p["in"] == "header":
                # A header carries latin-1 at most: the corpus as it survives that.
                raw = value.encode("utf-8", "surrogatepass")[:500]
                headers[p["name"]] = bytes(b for b in raw if b >= 0x20 and b != 0x7F).strip() or b"x"  # type: ignore[assignment]
        content = None
        if body is not None:
            fields = {name: value for name in body.get("properties", {})}
            if "inputs" in fields:
                fields["inputs"] = {value: value, "k": value}
            content = _json(fields)
        if path.endswith("/stream"):
            # A stream that opens runs to its run's end: its answer's code is what is checked.
            with s.client.stream(method, full, headers=headers, content=content, timeout=30) as resp:
                assert resp.status_code < 500, (method, path, resp.status_code)
            continue
        try:
            resp = s.client.request(method, full, headers=headers, content=content)
        except (httpx.LocalProtocolError, UnicodeEncodeError):
            continue  # the client itself would not send it (a header it cannot encode)
        _check(resp, f"{method} {path}", secrets)
    # And as a path the server does not know, and as a run's id in every act.
    for act in ("stop", "resume", "cancel", "approve"):
        _check(s.client.post(f"/jobs/{_url_part(value)}/{act}", content=b"{}"), act, secrets)
    _check(s.client.get("/" + _url_part(value)), "unknown path", secrets)
    assert "Traceback" not in s.output()


@CORPUS
@given(name=HOSTILE, node=HOSTILE, command=HOSTILE, timeout=HOSTILE)
def test_the_flow_loader_refuses_hostile_flows_in_words(name: str, node: str, command: str, timeout: str):
    """A flow file is read from disk, so it is text; each field may still hold anything TOML can escape."""

    def toml(s: str) -> str:
        return json.dumps(s)  # a TOML basic string is JSON's, escapes and all (a surrogate's is invalid TOML)

    for source in (
        f"name = {toml(name)}\n[[agents]]\nname = {toml(node)}\ncommand = {toml(command)}\ntimeout = {toml(timeout)}\n",
        f"name = {toml(name)}\nstall_after = {toml(timeout)}\n[[agents]]\nname = {toml(node)}\ncall = {toml(command)}\n",
        name.encode("utf-8", "replace").decode("utf-8"),
    ):
        try:
            parse_flow(source, "corpus.toml")
        except FlowError as exc:
            assert str(exc).startswith("corpus.toml"), str(exc)[:300]


@CORPUS
@given(key=HOSTILE, value=HOSTILE)
def test_inputs_are_taken_or_refused_in_words(key: str, value: str):
    try:
        got = parse_inputs([f"{key}={value}"])
    except FlowError as exc:
        assert "--input" in str(exc) and "\x00" not in str(exc) and "\x1b" not in str(exc)
        return
    # What is taken can be stored: no lone surrogate, no NUL, no control but line breaks and tabs.
    (k, v), = got.items()
    k.encode("utf-8")
    v.encode("utf-8")
    assert "\x00" not in k + v and "\x1b" not in k + v
