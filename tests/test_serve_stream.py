"""`GET /jobs/{id}/stream`: one server-sent event per run event, then a closing `end` event for each ending."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .conftest import Cli, release, wait_for
from .serve_helpers import Served, flows
from .test_serve import submit, wait_status


def ending(frames: list[dict]) -> dict:
    assert frames[-1].get("event") == "end", frames[-3:]
    return frames[-1]["data"]


def run_events(frames: list[dict]) -> list[dict]:
    return [f for f in frames if "data" in f and f.get("event") is None]


@pytest.mark.parametrize("flow, status, last_kind", [
    ("quick", "completed", "run.completed"),
    ("gated", "deferred", "run.deferred"),
    ("failing", "failed", "run.failed"),
    ("faulting", "faulted", "run.faulted"),
])
def test_a_stream_closes_at_each_ending(cli: Cli, serving, flow: str, status: str, last_kind: str):
    serve, _folder, _gates = serving
    s = serve()
    run = submit(s, flow)
    frames = s.stream(run["id"])
    end = ending(frames)
    assert end["status"] == status and end["job"]["id"] == run["id"], end
    evs = run_events(frames)
    assert evs[0]["data"]["kind"] == "run.submitted" and evs[-1]["data"]["kind"] == last_kind
    # Every event once, in order, `id:` its event id; the same as the paged route.
    assert [int(f["id"]) for f in evs] == [f["data"]["id"] for f in evs] == [e["id"] for e in s.client.get(f"/jobs/{run['id']}/events").json()["events"]]


def test_stopped_and_cancelled_endings_keep_alives_and_last_event_id(cli: Cli, serving):
    serve, _folder, gates = serving
    s = serve(env={"SWARMKIT_SSE_KEEPALIVE": "0.3"})
    run = submit(s, "held")
    wait_for(lambda: any(e["kind"] == "log" for e in s.client.get(f"/jobs/{run['id']}/events").json()["events"]), what="the agent to start")
    s.client.post(f"/jobs/{run['id']}/stop").raise_for_status()
    seen: list[dict] = []
    frame: dict = {}
    with s.client.stream("GET", f"/jobs/{run['id']}/stream") as resp:
        for line in resp.iter_lines():
            if line == "":
                if frame:
                    seen.append(frame)
                    if "keep-alive" in " ".join(frame.get("comment", [])):
                        release(gates, "go")  # a quiet run is kept alive; now let it reach its boundary
                frame = {}
            elif line.startswith(":"):
                frame.setdefault("comment", []).append(line[1:].strip())
            else:
                key, _, value = line.partition(": ")
                frame[key] = value
    assert any("keep-alive" in " ".join(f.get("comment", [])) for f in seen)
    assert seen[-1]["event"] == "end" and '"status":"stopped"' in seen[-1]["data"]
    ids = [int(f["id"]) for f in seen if "id" in f]
    # Reconnecting with Last-Event-ID replays only what came after it.
    again = s.stream(run["id"], headers={"Last-Event-ID": str(ids[1])})
    assert [int(f["id"]) for f in run_events(again)] == ids[2:] and ending(again)["status"] == "stopped"
    assert s.client.get(f"/jobs/{run['id']}/stream", headers={"Last-Event-ID": "x"}).status_code == 422
    assert s.client.get(f"/jobs/{'0' * 32}/stream").status_code == 404

    (gates / "go").unlink()
    other = submit(s, "held")
    wait_status(s, other["id"], "running")
    s.client.post(f"/jobs/{other['id']}/cancel").raise_for_status()
    assert ending(s.stream(other["id"]))["status"] == "cancelled"


@pytest.mark.short_lease
def test_a_stream_closes_when_the_host_is_lost(cli: Cli, tmp_path: Path):
    folder = flows(tmp_path / "flows", tmp_path / "gates")
    s = Served(cli, "--no-host", "--flows", str(folder))
    worker = cli.start("worker", str(cli.workspace))
    try:
        run = submit(s, "held")
        wait_status(s, run["id"], "running")
        os.killpg(worker.pid, signal.SIGKILL)  # the host and its agent, gone without a word
        worker.wait(10)
        end = ending(s.stream(run["id"], timeout=60))
        assert end["status"] == "lost", end
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        s.stop()
