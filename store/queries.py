"""Read queries. Each takes a connection inside a short transaction and returns records.

Each is written once, as a plain function of a sync `Connection`: run it whole in its own
transaction through `Store.run_read` (on SQLite, one hop to the store thread), or inside an
open `AsyncConnection` through `await conn.run_sync(query, ...)`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, LargeBinary, bindparam, cast, func, select, type_coerce

from . import clock, liveness
from .models import (
    RUNNING,
    audit,
    checkpoints,
    events,
    jobs,
    workers,
)

# The reads of a one-shot verb live in store/reads.py (no SQLAlchemy there); here beside the others.
from .reads import (  # noqa: F401
    ChangeMarker,
    _job,
    change_marker,
    count_live_workers,
    current_counts,
    get_job,
    get_jobs,
    jobs_by_prefix,
    jobs_changed_after,
    lease_expired,
    list_jobs,
    node_durations,
    running_active_since,
    skewed_workers,
    updated_between,
    workspaces_for,
)
from .shown_filter import list_jobs_stmts, shown_status  # noqa: F401
from .statements import _ACTIVE, _JOB_COLS, _read_col, _UTCRead  # noqa: F401
from .trail_records import AuditRecord, CheckpointRecord, EventRecord, WorkerRecord, audit_detail

_new = object.__new__




_EVENT_FIELDS = tuple(EventRecord.__dataclass_fields__)

def _event(row) -> EventRecord:
    """A record from a row of `_EVENT_COLS`, filled in place like `_job` (a log that follows
    10,000 lines a second turns them into records as they come)."""
    event = _new(EventRecord)
    event.__dict__.update(zip(_EVENT_FIELDS, row))
    return event


_EVENT_COLS = [
    type_coerce(events.c[name], _UTCRead()).label(name) if name == "at" else events.c[name] for name in _EVENT_FIELDS
]


_EVENTS_AFTER = (
    select(*_EVENT_COLS)
    .where(events.c.job_id == bindparam("b_job"), events.c.id > bindparam("b_after"))
    .order_by(events.c.id)
    .limit(bindparam("b_limit"))
)


def events_after(conn: Connection, job_id: str, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
    return [_event(r) for r in conn.execute(_EVENTS_AFTER, {"b_job": job_id, "b_after": after_id, "b_limit": limit})]


def _events_before_stmt(job_id: str, before_id: int | None, limit: int):
    cond = [events.c.job_id == job_id]
    if before_id is not None:
        cond.append(events.c.id < before_id)
    return select(*_EVENT_COLS).where(*cond).order_by(events.c.id.desc()).limit(limit)


def events_before(conn: Connection, job_id: str, before_id: int | None = None, limit: int = 200) -> list[EventRecord]:
    """The `limit` events just before `before_id` (the last page when None), oldest first."""
    rows = [_event(r) for r in conn.execute(_events_before_stmt(job_id, before_id, limit))]
    rows.reverse()
    return rows


def log_bytes(conn: Connection, job_id: str) -> int:
    """Bytes (UTF-8) of log text a run has written so far: where its log cap stands (a resumed run carries it on)."""
    size = func.octet_length(events.c.text) if conn.dialect.name == "postgresql" else func.length(cast(events.c.text, LargeBinary))
    stmt = select(func.coalesce(func.sum(size), 0)).where(events.c.job_id == job_id, events.c.kind == "log")
    return int(conn.scalar(stmt) or 0)


def count_events(conn: Connection, job_id: str) -> int:
    return int(conn.scalar(select(func.count()).select_from(events).where(events.c.job_id == job_id)) or 0)


def audit_for(conn: Connection, job_id: str | None = None, limit: int = 500) -> list[AuditRecord]:
    stmt = select(audit).order_by(audit.c.id).limit(limit)
    if job_id is not None:
        stmt = stmt.where(audit.c.job_id == job_id)
    out = []
    for r in conn.execute(stmt):
        m = r._mapping
        out.append(AuditRecord(m["id"], m["at"], m["actor"], m["action"], m["job_id"], audit_detail(m["detail"])))
    return out


def checkpoints_for(conn: Connection, job_id: str) -> list[CheckpointRecord]:
    stmt = (
        select(checkpoints.c.job_id, checkpoints.c.step, checkpoints.c.node, checkpoints.c.state, checkpoints.c.epoch, checkpoints.c.created_at, checkpoints.c.partial)
        .where(checkpoints.c.job_id == job_id)
        .order_by(checkpoints.c.step)
    )
    return [CheckpointRecord(**r._mapping) for r in conn.execute(stmt)]


def latest_checkpoint(conn: Connection, job_id: str) -> CheckpointRecord | None:
    stmt = (
        select(checkpoints.c.job_id, checkpoints.c.step, checkpoints.c.node, checkpoints.c.state, checkpoints.c.epoch, checkpoints.c.created_at, checkpoints.c.partial)
        .where(checkpoints.c.job_id == job_id)
        .order_by(checkpoints.c.step.desc())
        .limit(1)
    )
    row = conn.execute(stmt).first()
    return CheckpointRecord(**row._mapping) if row else None


def live_workers(conn: Connection, lease_s: float) -> list[WorkerRecord]:
    """Workers that have not stopped and heart-beat within the lease (on the store's clock)."""
    sqlite = conn.dialect.name == "sqlite"
    stmt = select(workers).where(workers.c.stopped_at.is_(None), liveness.fresh(workers, sqlite))
    return [WorkerRecord(**r._mapping) for r in conn.execute(stmt, clock.age_params(lease_s, sqlite))]


_STATUS_COUNTS = select(jobs.c.status, func.count()).group_by(jobs.c.status)



def shown_running_counts(conn: Connection, stall_cutoff: datetime) -> dict[str, int]:
    """How many running rows are shown stopping, cancelling or stalled: a pass over the running rows only."""
    status = shown_status(stall_cutoff).label("shown")
    stmt = select(status, func.count()).where(jobs.c.status == RUNNING).group_by(status)
    return {shown: int(n) for shown, n in conn.execute(stmt) if shown != RUNNING}


def status_counts(conn: Connection) -> dict[str, int]:
    """Every status and its count: a walk of the whole status index (it grows with the store: the console's header uses `current_counts`)."""
    return {status: int(n) for status, n in conn.execute(_STATUS_COUNTS)}


# --- Added for the operator console (read-only) -------------------------------



def find_event_before(conn: Connection, job_id: str, needle: str, before_id: int | None = None) -> EventRecord | None:
    """The newest event of a run, older than `before_id`, whose text or node holds `needle` (case-insensitive)."""
    like = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    cond = [events.c.job_id == job_id, events.c.text.ilike(like, escape="\\") | events.c.node.ilike(like, escape="\\")]
    if before_id is not None:
        cond.append(events.c.id < before_id)
    stmt = select(*_EVENT_COLS).where(*cond).order_by(events.c.id.desc()).limit(1)
    row = conn.execute(stmt).first()
    return _event(row) if row else None


def count_events_between(conn: Connection, job_id: str, from_id: int, before_id: int, cap: int) -> int:
    """How many of a run's events have `from_id <= id < before_id`, counting no further than `cap`."""
    inner = (
        select(events.c.id)
        .where(events.c.job_id == job_id, events.c.id >= from_id, events.c.id < before_id)
        .limit(cap)
        .subquery()
    )
    return int(conn.scalar(select(func.count()).select_from(inner)) or 0)
