"""Read queries. Each takes a connection inside a short transaction and returns records.

Each is written once, as a plain function of a sync `Connection`: run it whole in its own
transaction through `Store.run_read` (on SQLite, one hop to the store thread), or inside an
open `AsyncConnection` through `await conn.run_sync(query, ...)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, DateTime, LargeBinary, TypeDecorator, and_, bindparam, case, cast, func, literal, select, text, type_coerce

from . import clock
from .clock import store_now
from .models import (
    ACTIVE_STATUSES,
    NODE_BOUNDS,
    NODE_STARTED,
    RUNNING,
    UTCDateTime,
    audit,
    checkpoints,
    events,
    jobs,
    workers,
    workspaces,
)
from .records import (
    OVERDUE,
    STALL_AFTER,
    AuditRecord,
    CheckpointRecord,
    EventRecord,
    JobRecord,
    WorkerRecord,
    WorkspaceRecord,
    audit_detail,
)


class _UTCRead(TypeDecorator[datetime]):
    """`UTCDateTime` for reading rows in bulk: the same values, one Python call each instead of three.

    The console reads thousands of rows at a full reload; seven timestamps a row
    made this half of the cost of turning rows into records (bench/console_poll.py).
    """

    impl = DateTime
    cache_ok = True

    def result_processor(self, dialect, coltype):
        utc = UTC
        if dialect.name == "sqlite":
            parse = datetime.fromisoformat

            def process(value):
                if value is None:
                    return None
                if isinstance(value, str):
                    return parse(value).replace(tzinfo=utc)
                return value.replace(tzinfo=utc)

            return process

        def process_native(value):
            return None if value is None else value.replace(tzinfo=utc)

        return process_native


def _read_col(name: str):
    col = jobs.c[name]
    return type_coerce(col, _UTCRead()).label(name) if isinstance(col.type, UTCDateTime) else col


_JOB_FIELDS = tuple(JobRecord.__dataclass_fields__)
_JOB_COLS = [_read_col(name) for name in _JOB_FIELDS]
_new = object.__new__


def _job(row) -> JobRecord:
    """A record from a row of `_JOB_COLS` (selected in the record's field order).

    Filled in place rather than through the frozen dataclass's `__init__`
    (29 `object.__setattr__` calls): a third of the cost, the same record
    (JobRecord has no `__post_init__`). Measured in bench/console_poll.py.
    """
    job = _new(JobRecord)
    job.__dict__.update(zip(_JOB_FIELDS, row))
    return job


def jobs_by_prefix(conn: Connection, prefix: str, limit: int = 20) -> list[JobRecord]:
    # Ids are lowercase hex; anything else cannot match, and the LIKE pattern
    # must never carry the caller's wildcards.
    prefix = prefix.strip().lower()
    if not prefix or any(ch not in "0123456789abcdef" for ch in prefix):
        return []
    stmt = select(*_JOB_COLS).where(jobs.c.id.like(prefix + "%")).order_by(jobs.c.created_at.desc()).limit(limit)
    return [_job(r) for r in conn.execute(stmt)]


_ACTIVE = sorted(ACTIVE_STATUSES)


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


def _list_jobs_stmts(include_ended: bool, ended_limit: int, text_filter: str | None, stall_cutoff: datetime | None = None, active_limit: int | None = None):
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


def list_jobs(
    conn: Connection,
    *,
    include_ended: bool = True,
    ended_limit: int = 200,
    text_filter: str | None = None,
    stall_cutoff: datetime | None = None,
    active_limit: int | None = None,
) -> list[JobRecord]:
    """Active runs (all of them, or the `active_limit` newest), then the most recent ended ones, bounded.
    A filter matches the shown status."""
    out: list[JobRecord] = []
    for stmt in _list_jobs_stmts(include_ended, ended_limit, text_filter, stall_cutoff, active_limit):
        out.extend(_job(r) for r in conn.execute(stmt))
    return out


@dataclass(frozen=True)
class ChangeMarker:
    """A cheap answer to "did anything change?", read in one statement from two indexes.

    `latest`: the newest `updated_at` (an index-only max). Every transition and
    every node boundary moves it. Deleted rows and rows written by a writer
    whose clock lags do not, so two counts come along: `active`, the rows in an
    active status (a range of the status index, a few thousand entries at
    most), and `window`, the rows updated after `window_after` (a range of the
    updated_at index; the console passes the oldest ended run it shows). A
    reader that holds every active run and every run updated after the window
    compares both counts with what it holds. Neither counts the whole table:
    `count(*)` over 100,000 rows costs milliseconds on both stores.
    """

    latest: datetime | None
    active: int
    window: int
    window_after: datetime | None = None


_W = bindparam("b_window_after", type_=UTCDateTime())
_MARKER_LATEST = select(func.max(jobs.c.updated_at)).scalar_subquery()
_MARKER_ACTIVE = select(func.count()).select_from(jobs).where(jobs.c.status.in_(_ACTIVE)).scalar_subquery()
_MARKER_WINDOW = select(func.count()).select_from(jobs).where(jobs.c.updated_at > _W).scalar_subquery()
_MARKER = select(_MARKER_LATEST, _MARKER_ACTIVE)
_MARKER_W = select(_MARKER_LATEST, _MARKER_ACTIVE, _MARKER_WINDOW)


def _marker(row, window_after: datetime | None) -> ChangeMarker:
    latest = row[0]
    if isinstance(latest, str):
        latest = UTCDateTime().process_result_value(datetime.fromisoformat(latest), None)
    return ChangeMarker(latest, int(row[1]), int(row[2]) if window_after is not None else 0, window_after)


def change_marker(conn: Connection, window_after: datetime | None = None) -> ChangeMarker:
    if window_after is None:
        return _marker(conn.execute(_MARKER).one(), None)
    return _marker(conn.execute(_MARKER_W, {"b_window_after": window_after}).one(), window_after)


_CHANGED_AFTER = select(*_JOB_COLS).where(jobs.c.updated_at > bindparam("b_after", type_=UTCDateTime())).order_by(jobs.c.updated_at)
_UPDATED_BETWEEN = select(jobs.c.id, type_coerce(jobs.c.updated_at, _UTCRead()).label("updated_at")).where(
    jobs.c.updated_at >= bindparam("b_from", type_=UTCDateTime()), jobs.c.updated_at <= bindparam("b_to", type_=UTCDateTime())
)
_GET_JOBS = select(*_JOB_COLS).where(jobs.c.id.in_(bindparam("b_ids", expanding=True)))



def jobs_changed_after(conn: Connection, after: datetime) -> list[JobRecord]:
    """Rows updated strictly after `after` (the newest update a reader saw last time)."""
    return [_job(r) for r in conn.execute(_CHANGED_AFTER, {"b_after": after})]


def updated_between(conn: Connection, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
    """(id, updated_at) of the rows updated in [start, end]: a narrow read of the updated_at index's range.

    A reader that already holds most of them fetches whole rows only for the
    ones whose update it has not seen (a write that committed late, or came
    from a host whose clock lags).
    """
    return [(r[0], r[1]) for r in conn.execute(_UPDATED_BETWEEN, {"b_from": start, "b_to": end})]


def get_jobs(conn: Connection, ids: Iterable[str]) -> list[JobRecord]:
    ids = list(ids)
    return [_job(r) for r in conn.execute(_GET_JOBS, {"b_ids": ids})] if ids else []


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


def workspaces_for(conn: Connection, job_ids: Sequence[str]) -> dict[str, list[WorkspaceRecord]]:
    out: dict[str, list[WorkspaceRecord]] = {jid: [] for jid in job_ids}
    if not job_ids:
        return out
    stmt = (
        select(workspaces.c.job_id, workspaces.c.path, workspaces.c.state, workspaces.c.created_at, workspaces.c.updated_at)
        .where(workspaces.c.job_id.in_(list(job_ids)))
        .order_by(workspaces.c.id)
    )
    for r in conn.execute(stmt):
        out.setdefault(r.job_id, []).append(WorkspaceRecord(**r._mapping))
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
    stmt = select(workers).where(workers.c.stopped_at.is_(None), clock.fresh(workers, sqlite))
    return [WorkerRecord(**r._mapping) for r in conn.execute(stmt, clock.age_params(lease_s, sqlite))]


_STATUS_COUNTS = select(jobs.c.status, func.count()).group_by(jobs.c.status)



def shown_running_counts(conn: Connection, stall_cutoff: datetime) -> dict[str, int]:
    """How many running rows are shown stopping, cancelling or stalled: a pass over the running rows only."""
    status = shown_status(stall_cutoff).label("shown")
    stmt = select(status, func.count()).where(jobs.c.status == RUNNING).group_by(status)
    return {shown: int(n) for shown, n in conn.execute(stmt) if shown != RUNNING}


def status_counts(conn: Connection) -> dict[str, int]:
    """Every status and its count: a walk of the whole status index (milliseconds at 100,000 runs)."""
    return {status: int(n) for status, n in conn.execute(_STATUS_COUNTS)}


_ACTIVE_COUNTS = select(jobs.c.status, func.count()).where(jobs.c.status.in_(sorted(ACTIVE_STATUSES))).group_by(jobs.c.status)
# Counted here, not by GROUP BY: grouping makes SQLite walk the status index instead of the updated_at range.
_ENDED_SINCE = select(jobs.c.status).where(jobs.c.updated_at >= bindparam("since", type_=UTCDateTime), jobs.c.status.not_in(sorted(ACTIVE_STATUSES)))


def current_counts(conn: Connection, ended_since: datetime) -> dict[str, int]:
    """The active statuses and their counts, and the runs that ended since `ended_since`, by status.

    Neither walks the history: the active rows are a range of the status index
    each (what is active, at any size of store), and an ended run's last update
    is its end, so the recent ones are a range of the `updated_at` index. The
    console's header counts these (`status_counts` walked every run: 111 ms at
    a million, at first paint and every full read; issue 12).
    """
    counts = {status: int(n) for status, n in conn.execute(_ACTIVE_COUNTS)}
    for (status,) in conn.execute(_ENDED_SINCE, {"since": ended_since}):
        counts[status] = counts.get(status, 0) + 1
    return counts



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


# --- For the console's poll, run whole inside `Store.run_read` ----------------
# (on SQLite: one thread hop per poll instead of one per statement).

_GET_JOB = select(*_JOB_COLS).where(jobs.c.id == bindparam("b_id"))
_LEASE_EXPIRED = {
    sqlite: select(jobs.c.id).where(jobs.c.status == RUNNING, clock.stale(jobs, sqlite)).limit(1) for sqlite in (False, True)
}
_RUNNING_ACTIVE_SINCE = select(*_JOB_COLS).where(
    jobs.c.status == RUNNING, jobs.c.last_event_at > bindparam("b_since", type_=UTCDateTime())
)
_LIVE_WORKERS = {
    sqlite: select(func.count()).select_from(workers).where(workers.c.stopped_at.is_(None), clock.fresh(workers, sqlite))
    for sqlite in (False, True)
}
_WORKER_SKEW = {
    sqlite: select(workers.c.host, workers.c.clock_offset_s)
    .where(workers.c.stopped_at.is_(None), clock.fresh(workers, sqlite), func.abs(workers.c.clock_offset_s) > clock.SKEW_WARN_S)
    .order_by(func.abs(workers.c.clock_offset_s).desc())
    for sqlite in (False, True)
}


def get_job(conn: Connection, job_id: str) -> JobRecord | None:
    row = conn.execute(_GET_JOB, {"b_id": job_id}).first()
    return _job(row) if row else None


def lease_expired(conn: Connection, lease_s: float) -> bool:
    """Is any running row's heartbeat older than the lease? (What `control.mark_lost` would mark.)"""
    sqlite = conn.dialect.name == "sqlite"
    return conn.execute(_LEASE_EXPIRED[sqlite], clock.age_params(lease_s, sqlite)).first() is not None


def running_active_since(conn: Connection, since: datetime) -> list[JobRecord]:
    """Running rows whose `last_event_at` moved past `since`: log lines and
    heartbeats do not touch `updated_at`, and the shown statuses (stalled)
    and the last-work column are derived from it. (A pass over the running
    rows in SQL, ~0.2 ms at 1,000 of them; not indexed, see migration 0002.)"""
    return [_job(r) for r in conn.execute(_RUNNING_ACTIVE_SINCE, {"b_since": since})]



def count_live_workers(conn: Connection, lease_s: float, now: datetime | None = None) -> int:
    sqlite = conn.dialect.name == "sqlite"
    return int(conn.execute(_LIVE_WORKERS[sqlite], clock.age_params(lease_s, sqlite, now)).scalar() or 0)


def skewed_workers(conn: Connection, lease_s: float, now: datetime | None = None) -> list[tuple[str, float]]:
    """(host, offset) of live workers whose clock is more than a few seconds from the store's, worst first."""
    sqlite = conn.dialect.name == "sqlite"
    return [(r[0], float(r[1])) for r in conn.execute(_WORKER_SKEW[sqlite], clock.age_params(lease_s, sqlite, now))]


# A flow's newest runs (ix_jobs_flow_created), then their boundaries of one node
# (ix_events_node_bounds, partial: no log line is visited).
_FLOW_RECENT = (
    select(jobs.c.id)
    .where(jobs.c.flow == bindparam("b_flow"), jobs.c.id != bindparam("b_exclude"))
    .order_by(jobs.c.created_at.desc())
    .limit(bindparam("b_runs"))
)
_NODE_BOUNDS = (
    select(events.c.job_id, events.c.kind, type_coerce(events.c.at, _UTCRead()).label("at"))
    .where(
        events.c.job_id.in_(bindparam("b_ids", expanding=True)),
        events.c.node == bindparam("b_node"),
        text(NODE_BOUNDS),
    )
    .order_by(events.c.job_id, events.c.id)
)


def node_durations(conn: Connection, flow: str, node: str, exclude: str = "", runs: int = 50) -> list[float]:
    """How long `node` took, in seconds, in the newest `runs` runs of `flow` that finished it (newest first).

    A duration is a node.finished less the node.started just before it: a node
    run again after a stop or a lost host counts from its last start.
    """
    ids = [r[0] for r in conn.execute(_FLOW_RECENT, {"b_flow": flow, "b_exclude": exclude, "b_runs": runs})]
    if not ids:
        return []
    rank = {job_id: i for i, job_id in enumerate(ids)}
    found: dict[str, float] = {}
    started: dict[str, datetime] = {}
    for job_id, kind, at in conn.execute(_NODE_BOUNDS, {"b_ids": ids, "b_node": node}):
        if kind == NODE_STARTED:
            started[job_id] = at
        elif job_id in started:
            found[job_id] = max(0.0, (at - started.pop(job_id)).total_seconds())
    return [found[j] for j in sorted(found, key=rank.__getitem__)]
