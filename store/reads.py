"""The reads a one-shot verb makes (a run, the run list, workspaces, clock skew, a node's usual time).

Written once, against named statements (store/named.py): they run on a
SQLAlchemy connection and on a lite SQLite store alike, and this module loads
no SQLAlchemy (issue 13: start-up). `store.queries` re-exports them beside the
other queries.
"""

from __future__ import annotations

from . import clock
from .named import S
from .records import JobRecord, WorkspaceRecord
from .statuses import NODE_STARTED

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from sqlalchemy import Connection

_JOB_FIELDS = tuple(JobRecord.__dataclass_fields__)
_new = object.__new__


def _job(row) -> JobRecord:
    """A record from a row of the job columns (selected in the record's field order).

    Filled in place rather than through the frozen dataclass's `__init__`
    (29 `object.__setattr__` calls): a third of the cost, the same record
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
    prefix = prefix.strip().lower()
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
    if text_filter or active_limit is not None:
        from .queries import list_jobs_stmts  # built for each filter: SQLAlchemy

        for stmt in list_jobs_stmts(include_ended, ended_limit, text_filter, stall_cutoff, active_limit):
            out.extend(_job(r) for r in conn.execute(stmt))
        return out
    out.extend(_job(r) for r in conn.execute(S.ACTIVE_JOBS))
    if include_ended:
        out.extend(_job(r) for r in conn.execute(S.ENDED_JOBS, {"b_limit": ended_limit}))
    return out


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
