"""Notifications that are never lost: a real HTTP server on loopback receives signed JSON POSTs
from a real `swarmkit worker --notify`, for each kind of transition, and across a kill -9 of the
worker between the transition and the delivery. Both stores."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .conftest import Cli, hold, release, wait_for, write_flow
from .helpers import job

SECRET = "notify-secret-0123456789abcdef"
NOTIFY_ENV = {"SWARMKIT_NOTIFY_SECRET": SECRET}


class Receiver:
    """A loopback HTTP server that checks each POST's signature and keeps what it accepted."""

    def __init__(self):
        self.accepted: list[dict] = []
        self.refused = 0
        self.answer = 200
        self.bad_signatures = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(want, self.headers.get("X-Swarmkit-Signature", "")):
                    receiver.bad_signatures += 1
                    self.send_response(401)
                elif receiver.answer != 200:
                    receiver.refused += 1
                    self.send_response(receiver.answer)
                else:
                    note = json.loads(body)
                    assert note["event_id"] == self.headers["X-Swarmkit-Event-Id"]
                    receiver.accepted.append(note)
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def kinds(self) -> dict[str, str]:
        return {n["run_id"]: n["kind"] for n in self.accepted}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def stop_worker(proc, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.communicate(timeout=30)


def test_each_transition_is_posted_signed_once_per_event_id(cli: Cli, tmp_path: Path, receiver: Receiver):
    gates = tmp_path / "gates"
    flows = {
        "done": 'name = "done"\n[[agents]]\nname = "a"\ncommand = "echo ok"\n',
        "boom": 'name = "boom"\n[[agents]]\nname = "a"\ncommand = "exit 3"\n',
        "gate": 'name = "gate"\n[[agents]]\nname = "a"\ncommand = "true"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "true"\n',
        "odd": 'name = "odd"\n[[agents]]\nname = "a"\ncommand = "rm -f $SWARMKIT_OUTPUT; mkfifo $SWARMKIT_OUTPUT"\n',
        "held": f'name = "held"\n[[agents]]\nname = "a"\ncommand = "echo waiting; {hold(gates, "go")}"\n[[agents]]\nname = "b"\ncommand = "true"\n',
    }
    ids = {}
    for name, body in flows.items():
        res = cli.call("run", str(write_flow(tmp_path, name, body)), "--detach", check=True)
        ids[name] = res.stdout.strip()
    worker = cli.start("worker", "--notify", receiver.url, env=NOTIFY_ENV)
    try:
        wait_for(lambda: (j := job(cli.store_url, cli.workspace, ids["held"])) and j.current_node == "a", what="held to be in flight")
        assert cli.call("stop", ids["held"]).returncode == 0
        release(gates, "go")
        wait_for(lambda: len(receiver.accepted) >= 5, timeout=30, what="five notifications")
    finally:
        stop_worker(worker)
    assert receiver.kinds() == {
        ids["done"]: "run.completed", ids["boom"]: "run.failed", ids["gate"]: "run.deferred", ids["odd"]: "run.faulted", ids["held"]: "run.stopped",
    }
    assert receiver.bad_signatures == 0 and len({n["event_id"] for n in receiver.accepted}) == len(receiver.accepted) == 5
    boom = next(n for n in receiver.accepted if n["kind"] == "run.failed")
    assert (boom["flow"], boom["node"]) == ("boom", "a") and "exited with status 3" in boom["text"]


@pytest.mark.short_lease
def test_a_notification_survives_a_kill_9_of_the_worker_between_the_transition_and_the_delivery(cli: Cli, tmp_path: Path, receiver: Receiver):
    gates = tmp_path / "gates"
    done = cli.call("run", str(write_flow(tmp_path, "done", 'name = "done"\n[[agents]]\nname = "a"\ncommand = "echo ok"\n')), "--detach", check=True).stdout.strip()
    held = cli.call("run", str(write_flow(tmp_path, "held", f'name = "held"\n[[agents]]\nname = "a"\ncommand = "{hold(gates, "never")}"\n')), "--detach", check=True).stdout.strip()
    receiver.answer = 503  # the receiver is down: nothing can be delivered yet
    worker = cli.start("worker", "--notify", receiver.url, env=NOTIFY_ENV)
    try:
        wait_for(lambda: job(cli.store_url, cli.workspace, done).status == "completed", what="the run to complete")
        wait_for(lambda: receiver.refused >= 1, what="a first delivery refused")
        wait_for(lambda: job(cli.store_url, cli.workspace, held).status == "running", what="held to be hosted")
    finally:
        stop_worker(worker, signal.SIGKILL)  # between the transition and its delivery
    assert receiver.accepted == []
    # The killed worker's run goes lost when someone looks: that is a notification too.
    wait_for(lambda: cli.call("status", held, "--json").stdout and job(cli.store_url, cli.workspace, held).status == "lost", timeout=30, what="held to be lost")
    receiver.answer = 200
    again = cli.start("worker", "--notify", receiver.url, env=NOTIFY_ENV)
    try:
        wait_for(lambda: len(receiver.accepted) >= 2, timeout=30, what="both notifications after the restart")
    finally:
        stop_worker(again)
    assert receiver.kinds() == {done: "run.completed", held: "run.lost"}
    assert sorted(n["event_id"] for n in receiver.accepted) == sorted({n["event_id"] for n in receiver.accepted}), "once per event id"


def test_notify_needs_a_secret_and_a_url(cli: Cli):
    res = cli.call("worker", "--notify", "http://127.0.0.1:9/x")
    assert res.returncode == 2 and "SWARMKIT_NOTIFY_SECRET" in res.stderr
    res = cli.call("worker", "--notify", "ftp://x", env=NOTIFY_ENV)
    assert res.returncode == 2 and "http:// or https://" in res.stderr


def test_serve_notify_delivers_what_the_runs_it_hosts_do(cli: Cli, serving, receiver: Receiver):
    serve, _folder, _gates = serving
    s = serve("--notify", receiver.url, env=NOTIFY_ENV)
    resp = s.client.post("/jobs", json={"flow": "gated", "inputs": {}})
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["id"]
    wait_for(lambda: receiver.kinds().get(run_id) == "run.deferred", timeout=30, what="the deferral to be posted")
    assert s.client.post(f"/jobs/{run_id}/approve").status_code == 200
    wait_for(lambda: receiver.kinds().get(run_id) == "run.completed", timeout=30, what="the completion to be posted")
    assert [n["kind"] for n in receiver.accepted] == ["run.deferred", "run.completed"] and receiver.bad_signatures == 0


def test_a_deliverys_states_have_one_home():
    """store/statuses.py names them; the store's statements, the runtime and the CLI's --state choices
    (spelled out there: `swarmkit --help` imports no store) read one column."""
    from swarmkit.cli import notifications_parser
    from swarmkit.runtime import notify
    from swarmkit.store import notification_rows
    from swarmkit.store.statuses import DELIVERY_STATES

    assert (notification_rows.PENDING, notification_rows.DELIVERED, notification_rows.DEAD) == DELIVERY_STATES
    assert notify.STATES == DELIVERY_STATES == notifications_parser.STATES
