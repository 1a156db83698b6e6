"""Read queries. Each takes a connection inside a short transaction and returns records."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .models import (
    ACTIVE_STATUSES,
    audit,
    checkpoints,
    events,
    jobs,
    workers,
    workspaces,
)
from .records import (
    AuditRecord,
    CheckpointRecord,
    EventRecord,
    JobRecord,
    WorkerRecord,
    WorkspaceRecord,
    audit_detail,
)

_JOB_COLS = [jobs.c[name] for name in JobRecord.__dataclass_fields__]


def _job(row) -> JobRecord:
    return JobRecord(**row._mapping)


async def get_job(conn: AsyncConnection, job_id: str) -> JobRecord | None:
    row = (await conn.execute(select(*_JOB_COLS).where(jobs.c.id == job_id))).first()
    return _job(row) if row else None


async def jobs_by_prefix(conn: AsyncConnection, prefix: str, limit: int = 20) -> list[JobRecord]:
    # Ids are lowercase hex; anything else cannot match, and the LIKE pattern
    # must never carry the caller's wildcards.
    prefix = prefix.strip().lower()
    if not prefix or any(ch not in "0123456789abcdef" for ch in prefix):
        return []
    stmt = select(*_JOB_COLS).where(jobs.c.id.like(prefix + "%")).order_by(jobs.c.created_at.desc()).limit(limit)
    return [_job(r) for r in await conn.execute(stmt)]


async def get_jobs(conn: AsyncConnection, ids: Iterable[str]) -> list[JobRecord]:
    ids = list(ids)
    if not ids:
        return []
    return [_job(r) for r in await conn.execute(select(*_JOB_COLS).where(jobs.c.id.in_(ids)))]


async def list_jobs(
    conn: AsyncConnection,
    *,
    include_ended: bool = True,
    ended_limit: int = 200,
    text_filter: str | None = None,
) -> list[JobRecord]:
    """Active runs (all of them), then the most recent ended ones, bounded."""
    cond = []
    if text_filter:
        like = "%" + text_filter.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cond.append(
            (jobs.c.flow.ilike(like, escape="\\"))
            | (jobs.c.id.ilike(like, escape="\\"))
            | (jobs.c.status.ilike(like, escape="\\"))
            | (jobs.c.current_node.ilike(like, escape="\\"))
        )
    active = select(*_JOB_COLS).where(jobs.c.status.in_(sorted(ACTIVE_STATUSES)), *cond).order_by(jobs.c.created_at.desc())
    out = [_job(r) for r in await conn.execute(active)]
    if include_ended:
        ended = (
            select(*_JOB_COLS)
            .where(jobs.c.status.not_in(sorted(ACTIVE_STATUSES)), *cond)
            .order_by(jobs.c.updated_at.desc())
            .limit(ended_limit)
        )
        out.extend(_job(r) for r in await conn.execute(ended))
    return out


async def change_marker(conn: AsyncConnection) -> tuple[datetime | None, int]:
    """A cheap answer to "did anything change?": the newest update time and the row count."""
    row = (await conn.execute(select(func.max(jobs.c.updated_at), func.count()).select_from(jobs))).one()
    latest = row[0]
    if isinstance(latest, str):
        latest = datetime.fromisoformat(latest)
    return latest, int(row[1])


async def jobs_changed_since(conn: AsyncConnection, since: datetime) -> list[JobRecord]:
    stmt = select(*_JOB_COLS).where(jobs.c.updated_at >= since).order_by(jobs.c.updated_at)
    return [_job(r) for r in await conn.execute(stmt)]


def _event(row) -> EventRecord:
    return EventRecord(**row._mapping)


_EVENT_COLS = [events.c.id, events.c.job_id, events.c.at, events.c.kind, events.c.node, events.c.step, events.c.text]


async def events_after(conn: AsyncConnection, job_id: str, after_id: int = 0, limit: int = 1000) -> list[EventRecord]:
    stmt = (
        select(*_EVENT_COLS)
        .where(events.c.job_id == job_id, events.c.id > after_id)
        .order_by(events.c.id)
        .limit(limit)
    )
    return [_event(r) for r in await conn.execute(stmt)]


async def events_before(conn: AsyncConnection, job_id: str, before_id: int | None = None, limit: int = 200) -> list[EventRecord]:
    """The `limit` events just before `before_id` (the last page when None), oldest first."""
    cond = [events.c.job_id == job_id]
    if before_id is not None:
        cond.append(events.c.id < before_id)
    stmt = select(*_EVENT_COLS).where(*cond).order_by(events.c.id.desc()).limit(limit)
    rows = [_event(r) for r in await conn.execute(stmt)]
    rows.reverse()
    return rows


async def count_events(conn: AsyncConnection, job_id: str) -> int:
    return int(await conn.scalar(select(func.count()).select_from(events).where(events.c.job_id == job_id)) or 0)


async def audit_for(conn: AsyncConnection, job_id: str | None = None, limit: int = 500) -> list[AuditRecord]:
    stmt = select(audit).order_by(audit.c.id).limit(limit)
    if job_id is not None:
        stmt = stmt.where(audit.c.job_id == job_id)
    out = []
    for r in await conn.execute(stmt):
        m = r._mapping
        out.append(AuditRecord(m["id"], m["at"], m["actor"], m["action"], m["job_id"], audit_detail(m["detail"])))
    return out


async def workspaces_for(conn: AsyncConnection, job_ids: Sequence[str]) -> dict[str, list[WorkspaceRecord]]:
    out: dict[str, list[WorkspaceRecord]] = {jid: [] for jid in job_ids}
    if not job_ids:
        return out
    stmt = (
        select(workspaces.c.job_id, workspaces.c.path, workspaces.c.state, workspaces.c.created_at, workspaces.c.updated_at)
        .where(workspaces.c.job_id.in_(list(job_ids)))
        .order_by(workspaces.c.id)
    )
    for r in await conn.execute(stmt):
        out.setdefault(r.job_id, []).append(WorkspaceRecord(**r._mapping))
    return out


async def checkpoints_for(conn: AsyncConnection, job_id: str) -> list[CheckpointRecord]:
    stmt = (
        select(checkpoints.c.job_id, checkpoints.c.step, checkpoints.c.node, checkpoints.c.state, checkpoints.c.epoch, checkpoints.c.created_at)
        .where(checkpoints.c.job_id == job_id)
        .order_by(checkpoints.c.step)
    )
    return [CheckpointRecord(**r._mapping) for r in await conn.execute(stmt)]


async def latest_checkpoint(conn: AsyncConnection, job_id: str) -> CheckpointRecord | None:
    stmt = (
        select(checkpoints.c.job_id, checkpoints.c.step, checkpoints.c.node, checkpoints.c.state, checkpoints.c.epoch, checkpoints.c.created_at)
        .where(checkpoints.c.job_id == job_id)
        .order_by(checkpoints.c.step.desc())
        .limit(1)
    )
    row = (await conn.execute(stmt)).first()
    return CheckpointRecord(**row._mapping) if row else None


async def live_workers(conn: AsyncConnection, since: datetime) -> list[WorkerRecord]:
    stmt = select(workers).where(workers.c.stopped_at.is_(None), workers.c.heartbeat_at >= since)
    return [WorkerRecord(**r._mapping) for r in await conn.execute(stmt)]


async def status_counts(conn: AsyncConnection) -> dict[str, int]:
    stmt = select(jobs.c.status, func.count()).group_by(jobs.c.status)
    return {status: int(n) for status, n in await conn.execute(stmt)}


# --- Added for the operator console (read-only) -------------------------------


async def running_jobs(conn: AsyncConnection) -> list[JobRecord]:
    """Every `running` row: the console refreshes these on each poll, because
    heartbeats and log lines move `heartbeat_at` and `last_event_at` without
    touching `updated_at`, and the shown statuses (stopping, cancelling,
    stalled) are derived from them."""
    stmt = select(*_JOB_COLS).where(jobs.c.status == "running").order_by(jobs.c.created_at.desc())
    return [_job(r) for r in await conn.execute(stmt)]


async def find_event_before(conn: AsyncConnection, job_id: str, needle: str, before_id: int | None = None) -> EventRecord | None:
    """The newest event of a run, older than `before_id`, whose text or node holds `needle` (case-insensitive)."""
    like = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    cond = [events.c.job_id == job_id, events.c.text.ilike(like, escape="\\") | events.c.node.ilike(like, escape="\\")]
    if before_id is not None:
        cond.append(events.c.id < before_id)
    stmt = select(*_EVENT_COLS).where(*cond).order_by(events.c.id.desc()).limit(1)
    row = (await conn.execute(stmt)).first()
    return _event(row) if row else None


async def count_events_between(conn: AsyncConnection, job_id: str, from_id: int, before_id: int, cap: int) -> int:
    """How many of a run's events have `from_id <= id < before_id`, counting no further than `cap`."""
    inner = (
        select(events.c.id)
        .where(events.c.job_id == job_id, events.c.id >= from_id, events.c.id < before_id)
        .limit(cap)
        .subquery()
    )
    return int(await conn.scalar(select(func.count()).select_from(inner)) or 0)
