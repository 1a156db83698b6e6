"""A fixed store holding a run in every status, for snapshot tests, screenshots and trying the console.

Everything in it is deterministic: ids, timestamps (relative to `now`), log
lines, audit rows and workspace files. `python -m tests.sample_store DIR`
builds one in DIR; `swarmkit-console DIR` then opens it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from swarmkit.runtime.steps import step_words
from swarmkit.store import Store
from swarmkit.store.models import audit, checkpoints, events, jobs, workers, workspaces

FROZEN_NOW = datetime(2025, 6, 2, 14, 30, 0, tzinfo=UTC)


def run_id(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def _flow_source(name: str, agents: list[str], gate: str | None = None) -> str:
    lines = [f'name = "{name}"', ""]
    for agent in agents:
        lines += ["[[agents]]", f'name = "{agent}"', f'command = "echo {agent}"']
        if agent == gate:
            lines.append("approve = true")
        lines.append("")
    return "\n".join(lines)


# (key, flow, status, agents, step, node, created s ago, updated s ago, extra)
RUNS: list[tuple[str, str, str, list[str], int, str | None, int, int, dict[str, Any]]] = [
    ("queued", "nightly-report", "queued", ["fetch", "summarise", "publish"], 0, None, 12, 12, {}),
    ("cancelling", "bulk-rename", "running", ["scan", "rename"], 0, "rename", 60, 3,
     dict(cancel_requested_s=3, cancel_requested_by="lee@build-01", heartbeat_s=1, last_event_s=1, started_s=58, tokens=2100, cost=0.03)),
    ("stopping", "train-eval", "running", ["prepare", "train", "eval"], 1, "train", 180, 40,
     dict(stop_requested_s=40, stop_requested_by="ana@ops-laptop", heartbeat_s=1, last_event_s=2, started_s=178, node_started_s=100, tokens=120400, cost=1.84)),
    ("running", "research-crawl", "running", ["plan", "fetch-sources", "read", "summarise", "cite", "publish"], 2, "read", 480, 45,
     dict(heartbeat_s=1, last_event_s=1, started_s=478, node_started_s=190, tokens=48210, cost=0.62)),
    ("stalled", "index-docs", "running", ["split", "clean", "embed", "store"], 2, "embed", 900, 370,
     dict(heartbeat_s=1, last_event_s=360, started_s=898, tokens=9800, cost=0.11)),
    ("deferred", "release", "deferred", ["build", "test", "ship"], 2, "ship", 1200, 240,
     dict(pending_gate="ship", started_s=1198, tokens=3050, cost=0.04)),
    ("lost", "summarise-tickets", "lost", ["collect", "draft"], 1, "draft", 1800, 180,
     dict(heartbeat_s=195, last_event_s=200, started_s=1790, host="gpu-07", pid=991, tokens=15500, cost=0.21)),
    ("stopped", "migrate-db", "stopped", ["plan", "apply", "verify"], 1, "apply", 2700, 1140,
     dict(stop_requested_s=1150, stop_requested_by="ana@ops-laptop", started_s=2690, tokens=640, cost=0.01)),
    ("cancelled", "scratch-test", "cancelled", ["try"], 0, None, 400, 60,
     dict(cancel_requested_s=62, cancel_requested_by="lee@build-01", ended_s=60, started_s=390)),
    ("completed", "nightly-report", "completed", ["fetch", "summarise", "publish"], 3, None, 300, 120,
     dict(ended_s=120, started_s=298, tokens=8120, cost=0.09)),
    ("failed", "lint-fix", "failed", ["lint", "fix"], 1, None, 500, 300,
     dict(ended_s=300, started_s=495, error="fix: command exited with status 2", tokens=1200, cost=0.02)),
    ("faulted", "ingest", "faulted", ["pull", "parse"], 1, None, 700, 420,
     dict(ended_s=420, started_s=690, error="runtime fault: ConnectionResetError: harness connection lost")),
]

# How long train-eval's train node took in its past runs: it usually takes 130 s (the median).
PAST_TRAIN_S = (120, 130, 145)

# Files in the workspaces that exist, so that the cancel dialog has sizes to show.
WORKSPACE_FILES = {
    "running": {"notes.md": 2048, "sources/page-01.html": 18_432, "sources/page-02.html": 9_216},
    "stopping": {"model.ckpt": 1_048_576, "metrics.jsonl": 4_096},
    "cancelling": {"renames.csv": 512},
    "stalled": {"chunks.jsonl": 65_536},
    "deferred": {"dist/release.tar.gz": 204_800},
    "lost": {"draft.md": 3_072},
    "stopped": {"plan.sql": 1_024},
}

CRAWL_LOG = [
    ("plan", "node.started", "1/6 plan"),
    ("plan", "log", "reading the brief: 'survey agent run control in open-source schedulers'"),
    ("plan", "log", "planned 3 searches, 12 sources max"),
    ("plan", "node.finished", "1/6 plan done (1840 tokens, $0.0210)"),
    ("fetch-sources", "node.started", "2/6 fetch-sources"),
] + [
    ("fetch-sources", "log", f"GET https://docs.example.org/scheduling/page-{i:02d} 200 ({3 + i % 5}.{i % 9} kB)")
    for i in range(1, 13)
] + [
    ("fetch-sources", "runtime", "retrying page-07 after a 503"),
    ("fetch-sources", "node.finished", "2/6 fetch-sources done (22100 tokens, $0.2840)"),
    ("read", "node.started", "3/6 read"),
] + [
    ("read", "log", f"page-{i:02d}: {['lease renewal', 'compare-and-set transitions', 'cooperative stop', 'fencing tokens', 'heartbeats'][i % 5]} — {4 + i % 7} notes")
    for i in range(1, 19)
]


async def build(workspace: Path, now: datetime = FROZEN_NOW) -> str:
    """Build the sample store in `workspace`; returns its URL."""
    workspace = Path(workspace).resolve()
    db = workspace / ".swarmkit" / "store.db"
    if db.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    url = f"sqlite:///{db}"
    runs_dir = workspace / ".swarmkit" / "runs"

    def ago(seconds: float | None) -> datetime | None:
        return None if seconds is None else now - timedelta(seconds=seconds)

    store = await Store.open(url, workspace)
    try:
        async with store.write() as conn:
            for wid, host, beat in (("a1" * 16, "worker-a", 1), ("b2" * 16, "worker-b", 2)):
                await conn.execute(insert(workers).values(id=wid, host=host, pid=4121 if host == "worker-a" else 4377, concurrency=6, started_at=ago(3600), heartbeat_at=ago(beat)))
            for key, flow, status, agents, step, node, created_s, updated_s, extra in RUNS:
                jid = run_id(key)
                gate = extra.get("pending_gate")
                hosted = status in ("running", "lost") or extra.get("started_s") is not None
                values: dict[str, Any] = dict(
                    id=jid, flow=flow, flow_path=f"/srv/flows/{flow}.toml", flow_source=_flow_source(flow, agents, gate),
                    inputs=json.dumps({"env": "staging"} if flow in ("release", "migrate-db") else {}), status=status,
                    created_at=ago(created_s), updated_at=ago(updated_s), started_at=ago(extra.get("started_s")),
                    ended_at=ago(extra.get("ended_s")),
                    stop_requested_at=ago(extra.get("stop_requested_s")), stop_requested_by=extra.get("stop_requested_by"),
                    cancel_requested_at=ago(extra.get("cancel_requested_s")), cancel_requested_by=extra.get("cancel_requested_by"),
                    cancel_keep=False, epoch=1 if hosted else 0,
                    host=extra.get("host", "worker-a" if hosted else None), pid=extra.get("pid", 4121 if hosted else None),
                    heartbeat_at=ago(extra.get("heartbeat_s", updated_s if hosted else None)),
                    last_event_at=ago(extra.get("last_event_s", updated_s if hosted else None)),
                    current_node=node, step=step, steps=len(agents), tokens=extra.get("tokens", 0), cost=extra.get("cost", 0.0),
                    error=extra.get("error"), pending_gate=gate, approved_step=None, workspace_root=str(workspace),
                    node_started_at=ago(extra.get("node_started_s", updated_s if status == "running" else None)),
                )
                await conn.execute(insert(jobs).values(**values))
                await conn.execute(insert(checkpoints).values(job_id=jid, step=0, node=None, state='{"inputs":{}}', epoch=0, created_at=ago(created_s)))
                for i in range(step):
                    await conn.execute(insert(checkpoints).values(job_id=jid, step=i + 1, node=agents[i], state="{}", epoch=1, created_at=ago(created_s - 30 * (i + 1))))
                await conn.execute(insert(audit).values(at=ago(created_s), actor="ana@ops-laptop", action="run.submitted", job_id=jid, detail=json.dumps({"flow": flow})))
                if extra.get("stop_requested_by"):
                    await conn.execute(insert(audit).values(at=ago(extra["stop_requested_s"]), actor=extra["stop_requested_by"], action="run.stop_requested", job_id=jid, detail=json.dumps({"node": node, "step": step_words(step, len(agents))})))
                if status == "stopped":
                    await conn.execute(insert(audit).values(at=ago(updated_s), actor=extra["stop_requested_by"], action="run.stopped", job_id=jid, detail=json.dumps({"boundary": node, "step": step_words(step, len(agents))})))
                if extra.get("cancel_requested_by"):
                    await conn.execute(insert(audit).values(at=ago(extra["cancel_requested_s"]), actor=extra["cancel_requested_by"], action="run.cancel_requested", job_id=jid, detail=json.dumps({"keep": False})))
                if status == "cancelled":
                    await conn.execute(insert(audit).values(at=ago(updated_s), actor=extra["cancel_requested_by"], action="run.cancelled", job_id=jid, detail=json.dumps({"keep": False})))
                if hosted:
                    path = runs_dir / jid
                    alive = key in WORKSPACE_FILES
                    state = "active" if alive else ("destroyed" if status in ("completed", "failed", "cancelled") else "kept")
                    await conn.execute(insert(workspaces).values(job_id=jid, path=str(path), state=state, created_at=ago(created_s - 2), updated_at=ago(updated_s)))
                    for rel, size in WORKSPACE_FILES.get(key, {}).items():
                        f = path / rel
                        f.parent.mkdir(parents=True, exist_ok=True)
                        f.write_bytes(b"x" * size)
            crawl = run_id("running")
            start = 470
            rows = [dict(job_id=crawl, at=ago(start), kind="run.submitted", node=None, step=None, text="research-crawl: 6 agents"),
                    dict(job_id=crawl, at=ago(start - 1), kind="run.claimed", node=None, step=None, text="claimed by worker on worker-a pid 4121 (epoch 1)")]
            for i, (node, kind, text) in enumerate(CRAWL_LOG):
                step = ["plan", "fetch-sources", "read"].index(node)
                rows.append(dict(job_id=crawl, at=ago(start - 10 - i * 9), kind=kind, node=node, step=step, text=text))
            await conn.execute(insert(events), rows)
            # Past runs of train-eval, long ended (not shown by default): how long its train node usually takes.
            for i, train_s in enumerate(PAST_TRAIN_S):
                jid = run_id(f"past-train-{i}")
                created = 86_400 * (i + 2)
                agents = ["prepare", "train", "eval"]
                await conn.execute(insert(jobs).values(
                    id=jid, flow="train-eval", flow_path="/srv/flows/train-eval.toml", flow_source=_flow_source("train-eval", agents),
                    inputs="{}", status="completed", created_at=ago(created), updated_at=ago(created - 600), started_at=ago(created),
                    ended_at=ago(created - 600), cancel_keep=False, epoch=1, host="worker-a", pid=4121, current_node="eval", step=3, steps=3,
                    tokens=150_000, cost=2.4, workspace_root=str(workspace),
                ))
                await conn.execute(insert(events), [
                    dict(job_id=jid, at=ago(created - 20), kind="node.started", node="train", step=1, text="2/3 train"),
                    dict(job_id=jid, at=ago(created - 20 - train_s), kind="node.finished", node="train", step=1, text="2/3 train done"),
                ])
            for key, flow, status, agents, step, node, created_s, updated_s, extra in RUNS:
                if key == "running":
                    continue
                jid = run_id(key)
                await conn.execute(insert(events).values(job_id=jid, at=ago(created_s), kind="run.submitted", node=None, step=None, text=f"{flow}: {len(agents)} agents"))
    finally:
        await store.close()
    return url


def build_sample_store(workspace: str | Path, now: datetime = FROZEN_NOW) -> str:
    return asyncio.run(build(Path(workspace), now))


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "swarmkit-sample")
    folder.mkdir(parents=True, exist_ok=True)
    print(build_sample_store(folder, datetime.now(UTC)))
