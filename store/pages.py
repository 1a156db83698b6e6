"""Keyset-paged reads for the HTTP API: runs newest first, the audit oldest first.

Keyset, not OFFSET: a page costs the same at the millionth row as at the
first, and a run created while a client pages never shifts what it sees next.
Plain functions of a sync `Connection`, like store/queries.py.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from . import clock
from .models import RUNNING, audit, jobs
from .named import S
from .queries import _job, _read_col
from .records import JobRecord
from .trail_records import AuditRecord, audit_detail


class UnknownCursor(ValueError):
    """A cursor that names no run: the client's page is gone or was never this store's."""


def jobs_page(
    conn: Connection, *, status: str | None = None, flow: str | None = None, limit: int = 50, cursor: str | None = None
) -> tuple[list[JobRecord], bool]:
    """Up to `limit` runs, newest first, after the run `cursor` (an id); and whether more follow.
    Named statements only: it runs on any connection, a lite one too (`Store.run_read(here=True)`)."""
    params: dict[str, object] = {"b_limit": limit + 1, "b_status": status, "b_flow": flow}
    name = "JOBS_PAGE" + ("_STATUS" if status else "") + ("_FLOW" if flow else "")
    if cursor:
        at = conn.scalar(S.CREATED_AT, {"b_id": cursor})
        if at is None:
            raise UnknownCursor(cursor)
        params.update(b_at=at, b_cursor=cursor)
        name += "_AFTER"
    rows = [_job(r) for r in conn.execute(getattr(S, name), params)]
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
