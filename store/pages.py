"""Keyset-paged reads for the HTTP API: runs newest first, the audit oldest first.

Keyset, not OFFSET: a page costs the same at the millionth row as at the
first, and a run created while a client pages never shifts what it sees next.
Plain functions of a sync `Connection`, like store/queries.py.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, or_, select

from . import clock
from .models import RUNNING, audit, jobs
from .queries import _JOB_COLS, _job, _read_col
from .records import JobRecord
from .trail_records import AuditRecord, audit_detail


class UnknownCursor(ValueError):
    """A cursor that names no run: the client's page is gone or was never this store's."""


def jobs_page(
    conn: Connection, *, status: str | None = None, flow: str | None = None, limit: int = 50, cursor: str | None = None
) -> tuple[list[JobRecord], bool]:
    """Up to `limit` runs, newest first, after the run `cursor` (an id); and whether more follow."""
    cond = []
    if status:
        cond.append(jobs.c.status == status)
    if flow:
        cond.append(jobs.c.flow == flow)
    if cursor:
        at = conn.scalar(select(jobs.c.created_at).where(jobs.c.id == cursor))
        if at is None:
            raise UnknownCursor(cursor)
        cond.append(or_(jobs.c.created_at < at, and_(jobs.c.created_at == at, jobs.c.id < cursor)))
    stmt = select(*_JOB_COLS).where(*cond).order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit + 1)
    rows = [_job(r) for r in conn.execute(stmt)]
    return rows[:limit], len(rows) > limit


def audit_page(conn: Connection, *, after: int = 0, limit: int = 100, job_id: str | None = None) -> tuple[list[AuditRecord], bool]:
    """Up to `limit` audit rows with an id past `after`, oldest first; and whether more follow."""
    stmt = select(audit).where(audit.c.id > after).order_by(audit.c.id).limit(limit + 1)
    if job_id is not None:
        stmt = stmt.where(audit.c.job_id == job_id)
    out = []
    for r in conn.execute(stmt):
        m = r._mapping
        out.append(AuditRecord(m["id"], m["at"], m["actor"], m["action"], m["job_id"], audit_detail(m["detail"])))
    return out[:limit], len(out) > limit


def heartbeat_ages(conn: Connection) -> list[float]:
    """Seconds since each running run's last heartbeat, on the store's one clock (for /metrics)."""
    now = clock.store_now()
    stmt = select(_read_col("heartbeat_at")).where(jobs.c.status == RUNNING, jobs.c.heartbeat_at.is_not(None))
    return [(now - hb).total_seconds() for (hb,) in conn.execute(stmt)]
