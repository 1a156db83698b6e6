"""The statements a one-shot verb runs, as SQLAlchemy Core, each under its own name.

Code runs them by name through `store.named.S` (`conn.execute(S.GET_JOB, {...})`):
on a SQLAlchemy connection the name is this module's statement; on a lite
SQLite store (store/lite.py) it is the same statement compiled once for the
SQLite dialect into store/compiled_sqlite.py, run by the standard library's
sqlite3 without importing SQLAlchemy (issue 13: start-up). Every public
upper-case name here is such a statement; `python scripts/compile_sqlite.py`
writes the compiled module and tests/test_compiled_sqlite.py holds the two
together. Values are bound parameters, never part of the SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Boolean, DateTime, Float, Select, Text, TypeDecorator, and_, bindparam, column, func, insert, or_, select, table, text, type_coerce, union_all, update
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.sql.base import Executable

from . import clock, host_statements, liveness
from .models import (
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    DEFERRED,
    NODE_BOUNDS,
    QUEUED,
    RUNNING,
    STOPPED,
    UTCDateTime,
    audit,
    events,
    jobs,
    meta,
    notifications,
    workers,
    workspaces,
)
from .records import JobRecord
from .statuses import WS_ACTIVE as ACTIVE
from .statuses import WS_KEPT as KEPT
from .statuses import WS_PENDING as PENDING


class _UTCRead(TypeDecorator[datetime]):
    """`UTCDateTime` for reading rows in bulk: the same values, one Python call each instead of three.

    The console reads thousands of rows at a full reload; seven timestamps a row
    made this a large part of the cost of turning rows into records (bench/console_poll.py).
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
_ACTIVE = sorted(ACTIVE_STATUSES)

# --- runs ----------------------------------------------------------------------

GET_JOB = select(*_JOB_COLS).where(jobs.c.id == bindparam("b_id"))
# `b_pattern`: a checked hex prefix and `%` (store.reads.jobs_by_prefix).
JOBS_BY_PREFIX = select(*_JOB_COLS).where(jobs.c.id.like(bindparam("b_pattern"))).order_by(jobs.c.created_at.desc()).limit(bindparam("b_limit"))
# The run list with no filter: every active run, newest first, then the newest ended ones.
ACTIVE_JOBS = select(*_JOB_COLS).where(jobs.c.status.in_(_ACTIVE)).order_by(jobs.c.created_at.desc())
ENDED_JOBS = select(*_JOB_COLS).where(jobs.c.status.not_in(_ACTIVE)).order_by(jobs.c.updated_at.desc()).limit(bindparam("b_limit"))
# A page of the run list, newest first (store.pages.jobs_page): a statement for each mix of its filters
# (status, flow, after the cursor's run), each planned for its own indexes.
_AFTER = or_(
    jobs.c.created_at < bindparam("b_at", type_=jobs.c.created_at.type),
    and_(jobs.c.created_at == bindparam("b_at", type_=jobs.c.created_at.type), jobs.c.id < bindparam("b_cursor")),
)


def _page(status: bool, flow: bool, after: bool) -> Select:
    cond = [c for c, on in ((jobs.c.status == bindparam("b_status"), status), (jobs.c.flow == bindparam("b_flow"), flow), (_AFTER, after)) if on]
    return select(*_JOB_COLS).where(*cond).order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(bindparam("b_limit"))


JOBS_PAGE = _page(False, False, False)
JOBS_PAGE_AFTER = _page(False, False, True)
JOBS_PAGE_STATUS = _page(True, False, False)
JOBS_PAGE_STATUS_AFTER = _page(True, False, True)
JOBS_PAGE_FLOW = _page(False, True, False)
JOBS_PAGE_FLOW_AFTER = _page(False, True, True)
JOBS_PAGE_STATUS_FLOW = _page(True, True, False)
JOBS_PAGE_STATUS_FLOW_AFTER = _page(True, True, True)
CREATED_AT = select(jobs.c.created_at).where(jobs.c.id == bindparam("b_id"))
# What a run's merged view shows of its workspaces (store.reads.run_views).
WORKSPACE_STATES_FOR = (
    select(workspaces.c.job_id, workspaces.c.path, workspaces.c.state)
    .where(workspaces.c.job_id.in_(bindparam("b_ids", expanding=True)))
    .order_by(workspaces.c.id)
)
# A run and its merged view's workspaces in one statement (store.reads.run_view): a row a workspace, in
# their order, or one with NULLs for a run with none. The HTTP door's `GET /jobs/{id}` and an act's
# repeat read this and nothing else (issue 31); `path` and `state` are no column of `jobs`.
JOB_AND_WORKSPACES = (
    select(*_JOB_COLS, workspaces.c.path, workspaces.c.state)
    .select_from(jobs.outerjoin(workspaces, workspaces.c.job_id == jobs.c.id))
    .where(jobs.c.id == bindparam("b_id"))
    .order_by(workspaces.c.id)
)
WORKSPACES_FOR = (
    select(workspaces.c.job_id, workspaces.c.path, workspaces.c.state, workspaces.c.created_at, workspaces.c.updated_at)
    .where(workspaces.c.job_id.in_(bindparam("b_ids", expanding=True)))
    .order_by(workspaces.c.id)
)

# --- claims (runtime/claims.py): a worker's look for queued runs, the oldest first, on any connection --

QUEUED_RUNS = (
    select(jobs.c.id, jobs.c.epoch, jobs.c.flow_source, jobs.c.flow_path, jobs.c.flow_modules)
    .where(jobs.c.status == QUEUED).order_by(jobs.c.created_at).limit(bindparam("b_limit"))
)


# --- leases and clocks (the SQLite and the PostgreSQL spelling of a lapsed heartbeat) --

_STALE_COLS = (
    jobs.c.id, jobs.c.epoch, jobs.c.cancel_requested_at, jobs.c.cancel_keep, jobs.c.cancel_requested_by,
    jobs.c.host, jobs.c.pid, jobs.c.heartbeat_at, jobs.c.flow, jobs.c.current_node,
)
STALE_RUNNING = select(*_STALE_COLS).where(jobs.c.status == RUNNING, liveness.stale(jobs, False))
# On SQLite, each way a heartbeat lapses asked on its own, as a range of an index (liveness.stale_sqlite).
STALE_RUNNING_SQLITE = union_all(*(select(*_STALE_COLS).where(jobs.c.status == RUNNING, lapsed) for lapsed in liveness.stale_sqlite(jobs)))


def _skew(sqlite: bool):
    return (
        select(workers.c.host, workers.c.clock_offset_s)
        .where(workers.c.stopped_at.is_(None), liveness.fresh(workers, sqlite), func.abs(workers.c.clock_offset_s) > clock.SKEW_WARN_S)
        .order_by(func.abs(workers.c.clock_offset_s).desc())
    )


WORKER_SKEW = _skew(False)
WORKER_SKEW_SQLITE = _skew(True)

# --- the console's poll (console/poller.py): each a range of an index, never the history --

# Its first read: the newest screenful of active runs (then ENDED_JOBS), shown before the rest is read.
ACTIVE_JOBS_NEWEST = ACTIVE_JOBS.limit(bindparam("b_limit"))
# Its check every FULL_EVERY_S: the same rows as ACTIVE_JOBS and ENDED_JOBS, by (id, updated_at) only; whole rows
# are read only where an update differs from what the console holds.
ACTIVE_KEYS = select(jobs.c.id, type_coerce(jobs.c.updated_at, _UTCRead()).label("updated_at")).where(jobs.c.status.in_(_ACTIVE))
ENDED_KEYS = (
    select(jobs.c.id, type_coerce(jobs.c.updated_at, _UTCRead()).label("updated_at"))
    .where(jobs.c.status.not_in(_ACTIVE)).order_by(jobs.c.updated_at.desc()).limit(bindparam("b_limit"))
)
# The change marker (store.reads.ChangeMarker): the newest update, the active rows, and the
# rows updated after a window's start (the oldest ended run the console holds).
_LATEST = select(func.max(jobs.c.updated_at)).scalar_subquery()
_N_ACTIVE = select(func.count()).select_from(jobs).where(jobs.c.status.in_(_ACTIVE)).scalar_subquery()
_N_WINDOW = (
    select(func.count()).select_from(jobs).where(jobs.c.updated_at > bindparam("b_window_after", type_=UTCDateTime())).scalar_subquery()
)
CHANGE_MARKER = select(_LATEST, _N_ACTIVE)
# The newest update alone (an index's last entry): the marker between counts, where counting is dear (ChangeMarker).
CHANGE_MARKER_LATEST = select(_LATEST)
CHANGE_MARKER_WINDOW = select(_LATEST, _N_ACTIVE, _N_WINDOW)
CHANGED_AFTER = select(*_JOB_COLS).where(jobs.c.updated_at > bindparam("b_after", type_=UTCDateTime())).order_by(jobs.c.updated_at)
UPDATED_BETWEEN = select(jobs.c.id, type_coerce(jobs.c.updated_at, _UTCRead()).label("updated_at")).where(
    jobs.c.updated_at >= bindparam("b_from", type_=UTCDateTime()), jobs.c.updated_at <= bindparam("b_to", type_=UTCDateTime())
)
GET_JOBS = select(*_JOB_COLS).where(jobs.c.id.in_(bindparam("b_ids", expanding=True)))
# Log lines and heartbeats move last_event_at, not updated_at (a pass over the running rows).
RUNNING_ACTIVE_SINCE = select(*_JOB_COLS).where(jobs.c.status == RUNNING, jobs.c.last_event_at > bindparam("b_since", type_=UTCDateTime()))
# The same, for the runs on the console's screen only: the others tick unread (issue 31). By their
# ids alone (a run of theirs that is not running moved its updated_at too): SQLite then reads them
# by primary key, where a status term led it to walk every running row.
RUNNING_ACTIVE_AMONG = select(*_JOB_COLS).where(jobs.c.id.in_(bindparam("b_ids", expanding=True)), jobs.c.last_event_at > bindparam("b_since", type_=UTCDateTime()))
# What the console's header says of every running run, from ranges of ix_jobs_status_stall, never a
# pass over the rows: how many show stalled (JobRecord.display_status: past their stall_at; a row whose
# host set none, by its last sign of work), and what they cost together (the header's burn).
_QUIET = and_(jobs.c.status == RUNNING, jobs.c.cancel_requested_at.is_(None), jobs.c.stop_requested_at.is_(None))
STALLED_COUNT = select(
    select(func.count()).select_from(jobs).where(_QUIET, jobs.c.stall_at < bindparam("b_now", type_=UTCDateTime())).scalar_subquery(),
    select(func.count()).select_from(jobs).where(
        _QUIET, jobs.c.stall_at.is_(None), func.coalesce(jobs.c.last_event_at, jobs.c.started_at) < bindparam("b_cutoff", type_=UTCDateTime())
    ).scalar_subquery(),
)
# A pass over the index's running entries (not the rows): a few milliseconds at 20,000 running runs, so the
# console asks it every few seconds, not every poll.
RUNNING_COST = select(func.coalesce(func.sum(jobs.c.cost), 0.0)).where(jobs.c.status == RUNNING)
ACTIVE_COUNTS = select(jobs.c.status, func.count()).where(jobs.c.status.in_(_ACTIVE)).group_by(jobs.c.status)
# Counted by the reader, not by GROUP BY: grouping makes SQLite walk the status index instead of the updated_at range.
ENDED_SINCE = select(jobs.c.status).where(jobs.c.updated_at >= bindparam("b_since", type_=UTCDateTime()), jobs.c.status.not_in(_ACTIVE))
LEASE_EXPIRED = select(jobs.c.id).where(jobs.c.status == RUNNING, liveness.stale(jobs, False)).limit(1)
_LAPSED_SQLITE = union_all(*(select(jobs.c.id).where(jobs.c.status == RUNNING, lapsed) for lapsed in liveness.stale_sqlite(jobs))).subquery()
LEASE_EXPIRED_SQLITE = select(_LAPSED_SQLITE.c.id).limit(1)
LIVE_WORKERS = select(func.count()).select_from(workers).where(workers.c.stopped_at.is_(None), liveness.fresh(workers, False))
LIVE_WORKERS_SQLITE = select(func.count()).select_from(workers).where(workers.c.stopped_at.is_(None), liveness.fresh(workers, True))

# --- a node's usual duration: a flow's newest runs (ix_jobs_flow_created), then their
# boundaries of one node (ix_events_node_bounds, partial: no log line is visited) --------

FLOW_RECENT = (
    select(jobs.c.id)
    .where(jobs.c.flow == bindparam("b_flow"), jobs.c.id != bindparam("b_exclude"))
    .order_by(jobs.c.created_at.desc())
    .limit(bindparam("b_runs"))
)
# What a node of `b_flow` costs: the newest completed runs' cost and nodes (runtime/estimates.py), by the
# (flow, created_at) index.
FLOW_COSTS = (
    select(jobs.c.cost, jobs.c.steps)
    .where(jobs.c.flow == bindparam("b_flow"), jobs.c.status == COMPLETED, jobs.c.id != bindparam("b_exclude"))
    .order_by(jobs.c.created_at.desc())
    .limit(bindparam("b_runs"))
)
NODE_BOUNDS_OF = (
    select(events.c.job_id, events.c.kind, type_coerce(events.c.at, _UTCRead()).label("at"))
    .where(
        events.c.job_id.in_(bindparam("b_ids", expanding=True)),
        events.c.node == bindparam("b_node"),
        text(NODE_BOUNDS),
    )
    .order_by(events.c.job_id, events.c.id)
)

# --- the schema and the store's identity (store/schema.py, store/identity.py) -----------

_sqlite_master = table("sqlite_master", column("name"), column("type"))
# What SQLAlchemy's inspector lists on SQLite.
SQLITE_TABLES = (
    select(_sqlite_master.c.name)
    .where(_sqlite_master.c.type == "table", _sqlite_master.c.name.not_like("sqlite~_%", escape="~"))
    .order_by(_sqlite_master.c.name)
)
ALEMBIC_VERSION = select(table("alembic_version", column("version_num")).c.version_num)
META_FACTS = select(meta.c.key, meta.c.value)
STORE_ID = select(meta.c.value).where(meta.c.key == "store_id")

# --- what an act writes beside its transition (runtime/control.py, runtime/notify.py) ----

INSERT_AUDIT = insert(audit).values(
    at=bindparam("b_at"), actor=bindparam("b_actor"), action=bindparam("b_action"), job_id=bindparam("b_job_id"), detail=bindparam("b_detail")
)
INSERT_EVENT = insert(events).values(
    job_id=bindparam("b_job_id"), at=bindparam("b_at"), kind=bindparam("b_kind"), node=bindparam("b_node"), step=bindparam("b_step"), text=bindparam("b_text")
)
INSERT_NOTIFICATION = insert(notifications).values(
    event_id=bindparam("b_event_id"), job_id=bindparam("b_job_id"), kind=bindparam("b_kind"), body=bindparam("b_body"),
    created_at=bindparam("b_at"), next_at=bindparam("b_at"), attempts=0,
)

# --- stop (runtime/control.py `stop`): each one conditional UPDATE, compare-and-set on status and epoch --

_THIS_RUN = (jobs.c.id == bindparam("b_id"), jobs.c.epoch == bindparam("b_epoch"))
# A queued run is stopped at once: no host holds it.
STOP_QUEUED = (
    update(jobs)
    .where(*_THIS_RUN, jobs.c.status == QUEUED)
    .values(status=STOPPED, stop_requested_at=bindparam("b_at"), stop_requested_by=bindparam("b_actor"), stop_now=False, updated_at=bindparam("b_at"))
)
# A running run is asked to stop, once: its host takes the request at its next boundary.
STOP_RUNNING = (
    update(jobs)
    .where(*_THIS_RUN, jobs.c.status == RUNNING, jobs.c.cancel_requested_at.is_(None), jobs.c.stop_requested_at.is_(None))
    .values(
        updated_at=bindparam("b_at"), stop_now=bindparam("b_now"), stop_requested_at=bindparam("b_at"),
        stop_requested_by=bindparam("b_actor"), stop_overdue_at=bindparam("b_overdue_at"),
    )
)
# A plain stop not yet taken is made a stop --now; it keeps who asked first and when.
STOP_RUNNING_NOW = (
    update(jobs)
    .where(*_THIS_RUN, jobs.c.status == RUNNING, jobs.c.cancel_requested_at.is_(None), jobs.c.stop_requested_at.is_not(None), jobs.c.stop_now.is_not(True))
    .values(updated_at=bindparam("b_at"), stop_now=bindparam("b_now"))
)

# --- resume and approve (runtime/acts.py `resume`): back in the queue, every request and ending cleared --

# What a resume clears, whoever resumes: a worker's queue here, `run --resume` (resumed_values).
RESUME_CLEARS: dict[str, object] = dict(
    stop_requested_at=None, stop_requested_by=None, stop_now=False, stop_overdue_at=None, stop_reason=None,
    stall_at=None, pending_gate=None, ended_at=None, error=None,
)
# The budget as the resume leaves it (the run's own, or raised by the resume: runtime/budgets.py).
_REQUEUED: dict[str, object] = dict(RESUME_CLEARS, status=QUEUED, updated_at=bindparam("b_at"), budget=bindparam("b_budget"))


def resumed_values(status: str, step: int, at: datetime) -> dict[str, object]:
    """What a resume of a run in `status` writes beside its claim (`run --resume`, runtime/claims.py): the
    clears, and a deferred run's gate approved at its step, as RESUME and APPROVE write them."""
    values: dict[str, object] = dict(RESUME_CLEARS, updated_at=at)
    if status == DEFERRED:
        values["approved_step"] = step
    return values

# A stopped or lost run, if it is still `b_status` at its epoch.
RESUME = update(jobs).where(*_THIS_RUN, jobs.c.status == bindparam("b_status")).values(**_REQUEUED)
# A run waiting at a gate: approved, it passes the gate at `b_step` when a worker takes it.
APPROVE = update(jobs).where(*_THIS_RUN, jobs.c.status == DEFERRED).values(**_REQUEUED, approved_step=bindparam("b_step"))

# --- cancel (runtime/acts.py `cancel`) ---------------------------------------------------------

_CANCEL_ASKED: dict[str, object] = dict(cancel_requested_at=bindparam("b_at"), cancel_requested_by=bindparam("b_actor"), cancel_keep=bindparam("b_keep"), updated_at=bindparam("b_at"))
# A running run asked to cancel, once: its host ends it.
REQUEST_CANCEL = update(jobs).where(*_THIS_RUN, jobs.c.status == RUNNING, jobs.c.cancel_requested_at.is_(None)).values(**_CANCEL_ASKED)
# A run no host holds (queued, stopped, deferred, lost) cancelled at once, if it is still `b_status` at its epoch.
CANCEL_UNHOSTED = update(jobs).where(*_THIS_RUN, jobs.c.status == bindparam("b_status")).values(**_CANCEL_ASKED, status=CANCELLED, ended_at=bindparam("b_at"))

# --- workspaces (store/workspace_rows.py): a run's folders recorded, kept, due for destruction, destroyed --

_W = workspaces.c
WORKSPACE_ID = select(_W.id).where(_W.job_id == bindparam("b_job_id"), _W.path == bindparam("b_path"))
ADD_WORKSPACE = insert(workspaces).values(
    job_id=bindparam("b_job_id"), path=bindparam("b_path"), state=ACTIVE, created_at=bindparam("b_at"), updated_at=bindparam("b_at"), host=bindparam("b_host"),
)
REACTIVATE_WORKSPACE = update(workspaces).where(_W.id == bindparam("b_id")).values(state=ACTIVE, updated_at=bindparam("b_at"), host=bindparam("b_host"))
OPEN_WORKSPACES = select(_W.id, _W.path).where(_W.job_id == bindparam("b_job_id"), _W.state.in_((ACTIVE, KEPT)))
SET_WORKSPACE_STATE = update(workspaces).where(_W.id == bindparam("b_id")).values(state=bindparam("b_state"), updated_at=bindparam("b_at"))
DESTROYS_DUE = select(_W.id, _W.path, _W.host).where(_W.job_id == bindparam("b_job_id"), _W.state == PENDING)
RUNS_WITH_DESTROYS_DUE = select(_W.job_id).where(_W.state == PENDING, _W.host == bindparam("b_host")).distinct()
# Only while it is still due: a destruction carried out (`destroyed`) or given up (`kept`).
END_DESTROY = update(workspaces).where(_W.id == bindparam("b_id"), _W.state == PENDING).values(state=bindparam("b_state"), updated_at=bindparam("b_at"))


def named() -> dict[str, Executable]:
    """Every statement of this module and of store/host_statements.py by its name (no name is in both)."""
    found: dict[str, Executable] = {}
    for module in (globals(), vars(host_statements)):
        for name, value in module.items():
            if name.isupper() and not name.startswith("_") and isinstance(value, Executable):
                assert found.setdefault(name, value) is value, f"statement {name} is named twice"
    return found


def _kind(type_, dialect, what: str) -> str | None:
    """What the lite runner (store/named.py) does to a value of this type: the types whose values
    SQLAlchemy processes on SQLite. Any other processing is refused here, at compile time."""
    impl = type_.impl if isinstance(type_, TypeDecorator) else type_
    kind = next((k for cls, k in ((DateTime, "datetime"), (Boolean, "bool"), (Float, "float")) if isinstance(impl, cls)), None)
    if kind == "datetime" and not isinstance(type_, (UTCDateTime, _UTCRead)):
        raise TypeError(f"{type_!r}: the store's times are UTCDateTime (naive UTC in the file, aware when read)")
    if what == "result" and kind == "float":
        kind = None  # sqlite3 hands back floats as they are
    typ = type_.dialect_impl(dialect)
    processor = typ.bind_processor(dialect) if what == "bind" else typ.result_processor(dialect, None)
    if kind is None and processor is not None:
        raise TypeError(f"{type_!r} processes {what} values on SQLite, and the lite runner does not know how")
    return kind


def compile_for_sqlite(stmt: Executable) -> tuple[str, dict, dict[str, str], tuple[str, ...], tuple[str | None, ...]]:
    """`stmt` for sqlite3: (SQL with `:name` parameters, constant parameters, bind kinds, result columns, their kinds)."""
    dialect = SQLiteDialect_pysqlite(paramstyle="named")
    compiled = stmt.compile(dialect=dialect)  # type: ignore[attr-defined]
    defaults, kinds = {}, {}
    for b, name in compiled.bind_names.items():
        if not b.required:
            value = b.effective_value
            defaults[name] = list(value) if isinstance(value, (list, tuple)) else value
        kind = _kind(b.type, dialect, "bind")
        if kind:
            kinds[name] = kind
    columns = tuple(rc[0] for rc in compiled._result_columns)
    result_kinds = tuple(_kind(rc[3], dialect, "result") for rc in compiled._result_columns)
    return compiled.string, defaults, kinds, columns, result_kinds


def compiled() -> dict[str, tuple]:
    """Every statement compiled for sqlite3: what store/compiled_sqlite.py must hold."""
    return {name: compile_for_sqlite(stmt) for name, stmt in sorted(named().items())}

# --- stops set for later (runtime/stop_later.py): the list compared and set, so that none set meanwhile is lost --
SET_STOP_WHEN = (
    update(jobs)
    .where(jobs.c.id == bindparam("b_id"), jobs.c.status.in_(_ACTIVE), jobs.c.stop_when.is_not_distinct_from(bindparam("b_old", type_=Text())))
    .values(stop_when=bindparam("b_when", type_=Text()), updated_at=bindparam("b_at"))
)
