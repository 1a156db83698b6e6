"""Frozen records that queries return. ORM objects never leave the store."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .clock import store_now
from .statuses import RUNNING

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

# A running run with no sign of work for this long is shown as stalled.
STALL_AFTER = timedelta(seconds=120)
# The shown status of a running run whose stop was asked for long ago and not taken (stop_overdue_at passed).
OVERDUE = "stop overdue"

# The version of the run list's JSON shape (runtime/schemas/run_list.schema.json).
RUN_LIST_SCHEMA = 1
# jobs columns that hold JSON text: in JSON output they are the objects they hold.
_JSON_COLUMNS = ("inputs", "flow_modules", "budget", "stop_when")


def rfc3339(at: datetime) -> str:
    """A time as every JSON output of Swarmkit gives it: RFC 3339 in UTC, `2026-12-01T15:11:58.835886Z`."""
    if at.tzinfo is None:  # the store's times are UTC; a naive one is UTC too
        at = at.replace(tzinfo=UTC)
    elif at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return at.isoformat().replace("+00:00", "Z")


def json_object(raw: str | None) -> dict[str, Any] | None:
    """A JSON text column as the object it holds (None stays None; what is not an object is kept under "value")."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


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
    node_started_at: datetime | None
    stop_now: bool | None
    stall_at: datetime | None
    stop_overdue_at: datetime | None
    lease_s: float | None  # the lease of the host that claimed it (None: an older host's row)
    # Migration 0009's (issue 32), None by default: a record made by hand (a test, a demo) need not say them.
    budget: str | None = None  # its limits, JSON (runtime/budgets.py); None: none
    ran_s: float | None = None  # the time its agents ran, summed over its hosts (None: an older host's row, 0)
    stop_reason: str | None = None  # why a stop nobody typed at that moment was asked for (its budget, a stop set for later)
    stop_when: str | None = None  # the stops set for later, JSON (runtime/stop_conditions.py); None: none

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

    def as_dict(self) -> dict[str, Any]:
        # Every column, then only the few that need it converted: a page of 50 runs is 50 of these a request.
        out = self.__dict__.copy()
        for name in _TIME_COLUMNS:
            value = out[name]
            if value is not None:
                out[name] = rfc3339(value)
        for name in _JSON_COLUMNS:
            out[name] = json_object(out[name])
        return out


# The jobs table's columns, in its order: `models` checks the table against it.
JOB_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(JobRecord))
# Those that hold times (annotations are text here: `from __future__ import annotations`).
_TIME_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(JobRecord) if str(f.type).startswith("datetime"))


# The event a worker records on a run it cannot load (its flow is gone or broken): the
# detail pane lists them.
UNLOADABLE = "run.unloadable"


@dataclass(frozen=True)
class WorkspaceRecord:
    job_id: str
    path: str
    state: str
    created_at: datetime
    updated_at: datetime
    host: str | None = None


def merged_view(job: JobRecord, workspaces: list[WorkspaceRecord], now: datetime | None = None) -> dict[str, Any]:
    """Every jobs column under its own name, plus the shown status and workspaces."""
    view = job.as_dict()
    view["short_id"] = job.short_id
    view["display_status"] = job.display_status(now)
    view["workspaces"] = [{"path": w.path, "state": w.state} for w in workspaces]
    return view


def run_list(views: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A list of runs, the one shape every JSON output gives one in: `{"schema": 1, "runs": [...]}`."""
    return {"schema": RUN_LIST_SCHEMA, "runs": views, **extra}
