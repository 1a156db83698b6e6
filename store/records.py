"""Frozen records that queries return. ORM objects never leave the store."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .clock import store_now
from .models import JOB_COLUMNS, RUNNING

# A running run with no sign of work for this long is shown as stalled.
STALL_AFTER = timedelta(seconds=120)
# The shown status of a running run whose stop was asked for long ago and not taken (stop_overdue_at passed).
OVERDUE = "stop overdue"


@dataclass(frozen=True)
class JobRecord:
    id: str
    flow: str
    flow_path: str | None
    flow_source: str
    inputs: str
    status: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    stop_requested_at: datetime | None
    stop_requested_by: str | None
    cancel_requested_at: datetime | None
    cancel_requested_by: str | None
    cancel_keep: bool
    epoch: int
    host: str | None
    pid: int | None
    heartbeat_at: datetime | None
    last_event_at: datetime | None
    current_node: str | None
    step: int
    steps: int
    tokens: int
    cost: float
    error: str | None
    pending_gate: str | None
    approved_step: int | None
    workspace_root: str | None
    heartbeat_mono: float | None
    flow_modules: str | None
    stop_now: bool | None
    stall_at: datetime | None
    stop_overdue_at: datetime | None

    @property
    def short_id(self) -> str:
        return self.id[:8]

    def display_status(self, now: datetime | None = None, stall_after: timedelta = STALL_AFTER) -> str:
        """The shown status: stored status, or cancelling / overdue / stopping / stalled for a running row.

        `stall_after` is the default for a row whose host set no `stall_at` of its own.
        """
        if self.status != RUNNING:
            return self.status
        if self.cancel_requested_at is not None:
            return "cancelling"
        now = now or store_now()
        if self.stop_requested_at is not None:
            return OVERDUE if self.stop_overdue_at is not None and now > self.stop_overdue_at else "stopping"
        if self.stall_at is not None:
            return "stalled" if now > self.stall_at else RUNNING
        last = self.last_event_at or self.started_at
        if last is not None and now - last > stall_after:
            return "stalled"
        return RUNNING

    def stall_deadline(self, stall_after: timedelta = STALL_AFTER) -> datetime | None:
        """When this running row shows stalled if no sign of work comes first."""
        if self.stall_at is not None:
            return self.stall_at
        last = self.last_event_at or self.started_at
        return last + stall_after if last is not None else None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in JOB_COLUMNS:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = value.isoformat()
            out[name] = value
        return out


assert tuple(f.name for f in dataclasses.fields(JobRecord)) == JOB_COLUMNS, "JobRecord must mirror the jobs table"


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
class WorkspaceRecord:
    job_id: str
    path: str
    state: str
    created_at: datetime
    updated_at: datetime
    host: str | None = None


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


def merged_view(job: JobRecord, workspaces: list[WorkspaceRecord], now: datetime | None = None) -> dict[str, Any]:
    """Every jobs column under its own name, plus the shown status and workspaces."""
    view = job.as_dict()
    view["short_id"] = job.short_id
    view["display_status"] = job.display_status(now)
    view["workspaces"] = [{"path": w.path, "state": w.state} for w in workspaces]
    return view


def audit_detail(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}
