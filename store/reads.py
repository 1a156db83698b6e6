"""The reads a one-shot verb makes (a run, the run list, workspaces, clock skew, a node's usual time),
and the console's poll (console/poller.py: its first read comes before SQLAlchemy loads).

Written once, against named statements (store/named.py): they run on a
SQLAlchemy connection and on a lite SQLite store alike, and this module loads
no SQLAlchemy (issue 13: start-up). `store.queries` re-exports them beside the
other queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from . import clock
from .named import S
from .records import JobRecord, WorkspaceRecord, merged_view
from .statuses import NODE_STARTED

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from sqlalchemy import Connection

_JOB_FIELDS = tuple(JobRecord.__dataclass_fields__)
_new = object.__new__


def _job(row) -> JobRecord:
    """A record from a row of the job columns (selected in the record's field order).

    Filled in place rather than through the frozen dataclass's `__init__`
    (one `object.__setattr__` call a field): much cheaper, the same record
    (JobRecord has no `__post_init__`). Measured in bench/console_poll.py.
    """
    job = _new(JobRecord)
    job.__dict__.update(zip(_JOB_FIELDS, row))
    return job


def get_job(conn: Connection, job_id: str) -> JobRecord | None:
    row = conn.execute(S.GET_JOB, {"b_id": job_id}).first()
    return _job(row) if row else None


def jobs_by_prefix(conn: Connection, prefix: str, limit: int = 20) -> list[JobRecord]:
    # Ids are lowercase hex; anything else cannot match, and the LIKE pattern
    # must never carry the caller's wildcards.
    prefix = prefix.lower()
    if not prefix or any(ch not in "0123456789abcdef" for ch in prefix):
        return []
    return [_job(r) for r in conn.execute(S.JOBS_BY_PREFIX, {"b_pattern": prefix + "%", "b_limit": limit})]


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
    if text_filter:
        from .shown_filter import list_jobs_stmts  # late: built with SQLAlchemy, which a one-shot verb without a filter never loads

        for stmt in list_jobs_stmts(include_ended, ended_limit, text_filter, stall_cutoff, active_limit):
            out.extend(_job(r) for r in conn.execute(stmt))
        return out
    if active_limit is None:
        out.extend(_job(r) for r in conn.execute(S.ACTIVE_JOBS))
    else:
        out.extend(_job(r) for r in conn.execute(S.ACTIVE_JOBS_NEWEST, {"b_limit": active_limit}))
    if include_ended:
        out.extend(_job(r) for r in conn.execute(S.ENDED_JOBS, {"b_limit": ended_limit}))
    return out


def run_views(conn: Connection, jobs: Sequence[JobRecord], now: datetime | None = None) -> list[dict[str, Any]]:
    """Each run's merged view (`swarmkit status ID --json`, the API's runs): its columns, its shown status
    and its workspaces' paths and states, read in one statement for all of them."""
    ws: dict[str, list[Any]] = {j.id: [] for j in jobs}
    if ws:
        for r in conn.execute(S.WORKSPACE_STATES_FOR, {"b_ids": list(ws)}):
            ws[r[0]].append(r)
    now = now or clock.store_now()
    return [merged_view(j, ws[j.id], now) for j in jobs]


def run_view(conn: Connection, job_id: str, now: datetime | None = None) -> tuple[JobRecord, dict[str, Any]] | None:
    """The run with this id and its merged view (as `run_views` gives it), read in one statement; None if there is none."""
    rows = conn.execute(S.JOB_AND_WORKSPACES, {"b_id": job_id}).all()
    if not rows:
        return None
    job = _job(rows[0])  # the job's columns come first: the record takes as many as it has fields
    shown: list[Any] = [r for r in rows if r.path is not None]  # rows with a path and a state, as run_views hands them
    return job, merged_view(job, shown, now or clock.store_now())


def workspaces_for(conn: Connection, job_ids: Sequence[str]) -> dict[str, list[WorkspaceRecord]]:
    out: dict[str, list[WorkspaceRecord]] = {jid: [] for jid in job_ids}
    if not job_ids:
        return out
    for r in conn.execute(S.WORKSPACES_FOR, {"b_ids": list(job_ids)}):
        out.setdefault(r[0], []).append(WorkspaceRecord(*r))
    return out


def skewed_workers(conn: Connection, lease_s: float, now: datetime | None = None) -> list[tuple[str, float]]:
    """(host, offset) of live workers whose clock is more than a few seconds from the store's, worst first."""
    sqlite = conn.dialect.name == "sqlite"
    stmt = S.WORKER_SKEW_SQLITE if sqlite else S.WORKER_SKEW
    return [(r[0], float(r[1])) for r in conn.execute(stmt, clock.age_params(lease_s, sqlite, now))]


def node_durations(conn: Connection, flow: str, node: str, exclude: str = "", runs: int = 50) -> list[float]:
    """How long `node` took, in seconds, in the newest `runs` runs of `flow` that finished it (newest first).

    A duration is a node.finished less the node.started just before it: a node
    run again after a stop or a lost host counts from its last start.
    """
    ids = [r[0] for r in conn.execute(S.FLOW_RECENT, {"b_flow": flow, "b_exclude": exclude, "b_runs": runs})]
    if not ids:
        return []
    rank = {job_id: i for i, job_id in enumerate(ids)}
    found: dict[str, float] = {}
    started: dict[str, datetime] = {}
    for job_id, kind, at in conn.execute(S.NODE_BOUNDS_OF, {"b_ids": ids, "b_node": node}):
        if kind == NODE_STARTED:
            started[job_id] = at
        elif job_id in started:
            found[job_id] = max(0.0, (at - started.pop(job_id)).total_seconds())
    return [found[j] for j in sorted(found, key=rank.__getitem__)]


def node_costs(conn: Connection, flow: str, exclude: str = "", runs: int = 50) -> list[float]:
    """What a node of `flow` cost, a run at a time: each of its newest `runs` completed runs' cost over its nodes."""
    return [float(cost) / steps for cost, steps in conn.execute(S.FLOW_COSTS, {"b_flow": flow, "b_exclude": exclude, "b_runs": runs}) if steps]


# --- the console's poll, run whole inside `Store.run_read` (on SQLite: one thread hop per poll) --


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
    `count(*)` over 100,000 rows costs milliseconds on both stores. Both are
    ranges as long as the active runs, though (1.5 ms at 20,000 on SQLite):
    a reader may ask for `latest` alone (`counted=False`) between counts, and
    then `active` and `window` are None.
    """

    latest: datetime | None
    active: int | None
    window: int | None
    window_after: datetime | None = None


def change_marker(conn: Connection, window_after: datetime | None = None, *, counted: bool = True) -> ChangeMarker:
    if not counted:
        return ChangeMarker(_utc_latest(conn.execute(S.CHANGE_MARKER_LATEST).one()[0]), None, None, window_after)
    if window_after is None:
        row = conn.execute(S.CHANGE_MARKER).one()
    else:
        row = conn.execute(S.CHANGE_MARKER_WINDOW, {"b_window_after": window_after}).one()
    return ChangeMarker(_utc_latest(row[0]), int(row[1]), int(row[2]) if window_after is not None else 0, window_after)


def _utc_latest(latest: datetime | str | None) -> datetime | None:
    if isinstance(latest, str):  # SQLite's max() of a timestamp column, as text
        latest = datetime.fromisoformat(latest)
    return latest.replace(tzinfo=UTC) if latest is not None else None


def read_keys(conn: Connection, ended_limit: int) -> tuple[list[tuple[str, datetime]], list[tuple[str, datetime]]]:
    """(id, updated_at) of the rows `list_jobs` reads, narrow: every active run; the newest `ended_limit` ended ones, newest first."""
    return ([(r[0], r[1]) for r in conn.execute(S.ACTIVE_KEYS)], [(r[0], r[1]) for r in conn.execute(S.ENDED_KEYS, {"b_limit": ended_limit})])


def jobs_changed_after(conn: Connection, after: datetime) -> list[JobRecord]:
    """Rows updated strictly after `after` (the newest update a reader saw last time)."""
    return [_job(r) for r in conn.execute(S.CHANGED_AFTER, {"b_after": after})]


def updated_between(conn: Connection, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
    """(id, updated_at) of the rows updated in [start, end]: a narrow read of the updated_at index's range.

    A reader that already holds most of them fetches whole rows only for the
    ones whose update it has not seen (a write that committed late, or came
    from a host whose clock lags).
    """
    return [(r[0], r[1]) for r in conn.execute(S.UPDATED_BETWEEN, {"b_from": start, "b_to": end})]


def get_jobs(conn: Connection, ids: Iterable[str]) -> list[JobRecord]:
    ids = list(ids)
    # In slices: SQLite binds at most 32,766 values a statement.
    return [_job(r) for i in range(0, len(ids), 10_000) for r in conn.execute(S.GET_JOBS, {"b_ids": ids[i : i + 10_000]})]


def current_counts(conn: Connection, ended_since: datetime) -> dict[str, int]:
    """The active statuses and their counts, and the runs that ended since `ended_since`, by status.

    Neither walks the history: the active rows are a range of the status index
    each (what is active, at any size of store), and an ended run's last update
    is its end, so the recent ones are a range of the `updated_at` index. The
    console's header counts these (`status_counts` walks every run, which on a
    large store is slow at first paint and every full read; issue 12).
    """
    counts = {status: int(n) for status, n in conn.execute(S.ACTIVE_COUNTS)}
    for (status,) in conn.execute(S.ENDED_SINCE, {"b_since": ended_since}):
        counts[status] = counts.get(status, 0) + 1
    return counts


def lease_expired(conn: Connection, lease_s: float) -> bool:
    """Is any running row's heartbeat older than the lease? (What `control.mark_lost` would mark.)"""
    sqlite = conn.dialect.name == "sqlite"
    return conn.execute(S.LEASE_EXPIRED_SQLITE if sqlite else S.LEASE_EXPIRED, clock.age_params(lease_s, sqlite)).first() is not None


def running_active_since(conn: Connection, since: datetime) -> list[JobRecord]:
    """Running rows whose `last_event_at` moved past `since`: log lines and
    heartbeats do not touch `updated_at`, and the shown statuses (stalled)
    and the last-work column are derived from it. (A pass over the running
    rows in SQL, cheap for the running runs there are; not indexed, see migration 0002.)"""
    return [_job(r) for r in conn.execute(S.RUNNING_ACTIVE_SINCE, {"b_since": since})]


def running_active_among(conn: Connection, since: datetime, ids: Sequence[str]) -> list[JobRecord]:
    """`running_active_since`, of these runs only (the console's screen): the others tick unread."""
    return [_job(r) for r in conn.execute(S.RUNNING_ACTIVE_AMONG, {"b_since": since, "b_ids": list(ids)})] if ids else []


def stalled_count(conn: Connection, now: datetime, stall_after: timedelta) -> int:
    """How many running runs show stalled at `now` (`stall_after`: for a row whose host set no `stall_at`); a
    cancelling or stopping run does not. Ranges of an index: it costs what is stalled, not what runs."""
    row = conn.execute(S.STALLED_COUNT, {"b_now": now, "b_cutoff": now - stall_after}).one()
    return int(row[0] or 0) + int(row[1] or 0)


def running_cost(conn: Connection) -> float:
    """What the running runs cost together, read from an index alone."""
    return float(conn.execute(S.RUNNING_COST).scalar() or 0.0)


def count_live_workers(conn: Connection, lease_s: float, now: datetime | None = None) -> int:
    sqlite = conn.dialect.name == "sqlite"
    return int(conn.execute(S.LIVE_WORKERS_SQLITE if sqlite else S.LIVE_WORKERS, clock.age_params(lease_s, sqlite, now)).scalar() or 0)
