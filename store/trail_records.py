"""The records of what happens around runs: their events, the audit entries, checkpoints and workers' rows.

Apart from records.py (the run's own record): each frozen dataclass compiles its
methods when its module loads, and a one-shot verb (`swarmkit stop`) needs only
the run's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .records import json_object, rfc3339

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class EventRecord:
    id: int
    job_id: str
    at: datetime
    kind: str
    node: str | None
    step: int | None
    text: str


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: datetime
    actor: str
    action: str
    job_id: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class CheckpointRecord:
    job_id: str
    step: int
    node: str | None
    state: str
    epoch: int
    created_at: datetime
    # The node's own partial state, where a stop landed inside it (None: it starts afresh).
    partial: str | None = None


@dataclass(frozen=True)
class WorkerRecord:
    id: str
    host: str
    pid: int
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    heartbeat_mono: float | None = None
    clock_offset_s: float | None = None
    lease_s: float | None = None


def event_view(ev: EventRecord) -> dict[str, Any]:
    """An event as JSON (`swarmkit logs -o json`, the HTTP API)."""
    return {"id": ev.id, "job_id": ev.job_id, "at": rfc3339(ev.at), "kind": ev.kind, "node": ev.node, "step": ev.step, "text": ev.text}


def audit_view(a: AuditRecord) -> dict[str, Any]:
    """An audit entry as JSON (`swarmkit audit -o json`, the HTTP API)."""
    return {"id": a.id, "at": rfc3339(a.at), "actor": a.actor, "action": a.action, "job_id": a.job_id, "detail": a.detail}


def audit_detail(raw: str | None) -> dict[str, Any]:
    return json_object(raw or "{}") or {}
