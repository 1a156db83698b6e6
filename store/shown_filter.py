"""The run list filtered by a text, matched against what the table shows: a run's shown status
(`JobRecord.display_status`) in SQL, beside its flow, id and node.

Apart from store/reads.py, which builds these only when a filter is given: a one-shot verb without
one loads no SQLAlchemy.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, bindparam, case, func, literal, select

from .clock import store_now
from .models import RUNNING, UTCDateTime, jobs
from .records import OVERDUE, STALL_AFTER
from .statements import _ACTIVE, _JOB_COLS


def shown_status(stall_cutoff: datetime, now: datetime | None = None):
    """`JobRecord.display_status` in SQL, for filtering by what the table shows (a test holds the two together).

    `stall_cutoff` is `now` less the default stall threshold (rows whose host set no `stall_at`)."""
    running = jobs.c.status == RUNNING
    last = func.coalesce(jobs.c.last_event_at, jobs.c.started_at)
    at = bindparam("b_shown_now", now or stall_cutoff + STALL_AFTER, type_=UTCDateTime())
    return case(
        (and_(running, jobs.c.cancel_requested_at.is_not(None)), literal("cancelling")),
        (and_(running, jobs.c.stop_requested_at.is_not(None), jobs.c.stop_overdue_at.is_not(None), jobs.c.stop_overdue_at < at), literal(OVERDUE)),
        (and_(running, jobs.c.stop_requested_at.is_not(None)), literal("stopping")),
        (and_(running, jobs.c.stall_at.is_not(None), jobs.c.stall_at < at), literal("stalled")),
        (and_(running, jobs.c.stall_at.is_(None), last < bindparam("b_stall_cutoff", stall_cutoff, type_=UTCDateTime())), literal("stalled")),
        else_=jobs.c.status,
    )


def list_jobs_stmts(include_ended: bool, ended_limit: int, text_filter: str | None, stall_cutoff: datetime | None = None, active_limit: int | None = None):
    cond = []
    if text_filter:
        like = "%" + text_filter.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        status = shown_status(stall_cutoff or store_now() - STALL_AFTER)
        cond.append(
            (jobs.c.flow.ilike(like, escape="\\"))
            | (jobs.c.id.ilike(like, escape="\\"))
            | (status.ilike(like, escape="\\"))
            | (jobs.c.current_node.ilike(like, escape="\\"))
        )
    stmts = [select(*_JOB_COLS).where(jobs.c.status.in_(_ACTIVE), *cond).order_by(jobs.c.created_at.desc()).limit(active_limit)]
    if include_ended:
        stmts.append(
            select(*_JOB_COLS)
            .where(jobs.c.status.not_in(_ACTIVE), *cond)
            .order_by(jobs.c.updated_at.desc())
            .limit(ended_limit)
        )
    return stmts
