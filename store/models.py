"""The store's tables, as SQLAlchemy Core tables.

The runtime and the console use these tables through Core statements
(`select(jobs.c.status)`, `update(jobs)`); queries hand out frozen
dataclasses (see `store.queries`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)

from .records import JOB_COLUMNS
from .statuses import (  # noqa: F401  (re-exported: the statuses live beside the tables)
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    DEFERRED,
    FAILED,
    FAULTED,
    LOST,
    NODE_BOUNDS,
    NODE_FINISHED,
    NODE_STARTED,
    QUEUED,
    RESUMABLE_STATUSES,
    RUNNING,
    STOPPED,
    STORED_STATUSES,
    TERMINAL_STATUSES,
)


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps stored as naive UTC, handed back timezone-aware.

    SQLite has no timezone type and PostgreSQL's `timestamp` has none either;
    storing naive UTC on both keeps comparisons (leases, `updated_at > :since`)
    identical on the two stores.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # raw text from an unusual SQLite row
            value = datetime.fromisoformat(value)
        return value.replace(tzinfo=UTC)


# Core tables, not ORM classes: every verb imports this module, and a
# declarative mapping costs a one-shot verb the ORM's import and its
# class construction (issue 13: start-up). The migrations create these.
metadata = MetaData()


def _col(name: str, type_, *args, null: bool = False, **kw) -> Column:
    # Not null unless said, as the ORM mapping of `Mapped[...]` made them before.
    return Column(name, type_, *args, nullable=null, **kw)


jobs = Table(
    "jobs",
    metadata,
    _col("id", String(32), primary_key=True),
    _col("flow", Text),
    _col("flow_path", Text, null=True),
    _col("flow_source", Text),
    _col("inputs", Text, default="{}"),
    _col("status", String(16), index=True),
    _col("created_at", UTCDateTime),
    _col("updated_at", UTCDateTime, index=True),
    _col("started_at", UTCDateTime, null=True),
    _col("ended_at", UTCDateTime, null=True),
    _col("stop_requested_at", UTCDateTime, null=True),
    _col("stop_requested_by", Text, null=True),
    _col("cancel_requested_at", UTCDateTime, null=True),
    _col("cancel_requested_by", Text, null=True),
    _col("cancel_keep", Boolean, default=False),
    _col("epoch", Integer, default=0),
    _col("host", Text, null=True),
    _col("pid", Integer, null=True),
    _col("heartbeat_at", UTCDateTime, null=True),
    _col("last_event_at", UTCDateTime, null=True),
    _col("current_node", Text, null=True),
    _col("step", Integer, default=0),
    _col("steps", Integer, default=0),
    _col("tokens", BigInteger, default=0),
    _col("cost", Float, default=0.0),
    _col("error", Text, null=True),
    _col("pending_gate", Text, null=True),
    _col("approved_step", Integer, null=True),
    _col("workspace_root", Text, null=True),
    # The host's monotonic clock at its last heartbeat (SQLite stores only: one machine, one clock).
    _col("heartbeat_mono", Float, null=True),
    # JSON {module: source} of the flow's callables that are not installed packages.
    _col("flow_modules", Text, null=True),
    # When the node in flight started (migration 0004): the host sets it at each boundary.
    _col("node_started_at", UTCDateTime, null=True),
    # The stop asked for interrupts the node in flight (migration 0005); None on older rows is False.
    _col("stop_now", Boolean, null=True, default=False),
    # Shown stalled past this with no sign of work (set by the host at each sign); NULL: the default after the last.
    _col("stall_at", UTCDateTime, null=True),
    # A stop not taken by then shows "stop overdue" (a few times its node's usual duration after the request).
    _col("stop_overdue_at", UTCDateTime, null=True),
    # The lease of the host that claimed the run, in seconds (migration 0006): no judge marks the run
    # lost before it has lapsed, whatever the judge's own lease. NULL (an older host): the judge's.
    _col("lease_s", Float, null=True),
    # The run's limits (migration 0009, runtime/budgets.py): JSON text, NULL for none.
    _col("budget", Text, null=True),
    # The time its agents ran, summed over its hosts: what max_wall is held to. NULL (an older host): 0.
    _col("ran_s", Float, null=True),
    # Why a stop nobody typed was asked for ("cost 5.02 of max_cost 5.00"); cleared with the stop.
    _col("stop_reason", Text, null=True),
    # The stops set for later (stop --when, --after, --before; runtime/stop_conditions.py): JSON text, NULL for none.
    _col("stop_when", Text, null=True),
    # The lost-run check of every worker and console (migration 0002).
    Index("ix_jobs_status_heartbeat", "status", "heartbeat_at"),
    # A flow's newest runs, for a node's usual duration (migration 0004).
    Index("ix_jobs_flow_created", "flow", "created_at"),
    # The console's header without a pass over the running rows (migration 0008): how many show
    # stalled (a range of stall_at), and their cost together (read from the index alone).
    Index("ix_jobs_status_stall", "status", "stall_at", "cost"),
    # The lost-run check on SQLite, by the monotonic clock (migration 0008): a range, not every running row.
    Index("ix_jobs_status_mono", "status", "heartbeat_mono"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("job_id", String(32), ForeignKey("jobs.id", ondelete="CASCADE")),
    _col("step", Integer),
    _col("node", Text, null=True),
    _col("state", Text),
    _col("epoch", Integer),
    _col("created_at", UTCDateTime),
    # JSON partial state of the node at `step`, left at a boundary inside it where a stop landed (migration 0005).
    _col("partial", Text, null=True),
    Index("ix_checkpoints_job_step", "job_id", "step", unique=True),
)

events = Table(
    "events",
    metadata,
    _col("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    _col("job_id", String(32), ForeignKey("jobs.id", ondelete="CASCADE")),
    _col("at", UTCDateTime),
    _col("kind", String(32)),
    _col("node", Text, null=True),
    _col("step", Integer, null=True),
    _col("text", Text, default=""),
    Index("ix_events_job_id", "job_id", "id"),
    # Node boundaries only, for a node's usual duration (migration 0004): partial, see
    # declare_dialect_options.
    Index("ix_events_node_bounds", "job_id", "node", "id"),
)

audit = Table(
    "audit",
    metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("at", UTCDateTime),
    _col("actor", Text),
    _col("action", String(64)),
    _col("job_id", String(32), null=True),
    _col("detail", Text, default="{}"),
    Index("ix_audit_job_id", "job_id", "id"),
)

workspaces = Table(
    "workspaces",
    metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("job_id", String(32), ForeignKey("jobs.id", ondelete="CASCADE")),
    _col("path", Text),
    _col("state", String(16)),
    _col("created_at", UTCDateTime),
    _col("updated_at", UTCDateTime),
    # The host that made it: only that host can delete it.
    _col("host", Text, null=True),
    Index("ix_workspaces_job_id", "job_id"),
)

workers = Table(
    "workers",
    metadata,
    _col("id", String(32), primary_key=True),
    _col("host", Text),
    _col("pid", Integer),
    _col("concurrency", Integer),
    _col("started_at", UTCDateTime),
    _col("heartbeat_at", UTCDateTime),
    _col("stopped_at", UTCDateTime, null=True),
    _col("heartbeat_mono", Float, null=True),
    # This worker's wall clock minus the store's, in seconds, measured at its last heartbeat.
    _col("clock_offset_s", Float, null=True),
    # Its lease, in seconds (migration 0006): it counts as live until that lapsed too (jobs.lease_s).
    _col("lease_s", Float, null=True),
)

# The outbox of notifications (migration 0005): written in the transaction of the transition
# it tells of, delivered at least once by a process that notifies (`--notify URL`).
notifications = Table(
    "notifications",
    metadata,
    _col("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    # What a receiver deduplicates by: the same on every delivery of this notification.
    _col("event_id", String(32), unique=True),
    _col("job_id", String(32)),
    _col("kind", String(32)),
    _col("body", Text),
    _col("created_at", UTCDateTime),
    _col("next_at", UTCDateTime),
    _col("attempts", Integer, default=0),
    _col("delivered_at", UTCDateTime, null=True),
    _col("last_error", Text, null=True),
    Index("ix_notifications_due", "delivered_at", "next_at"),
)

# Each notification's delivery to each receiver (migration 0007): a notifier fans an undelivered
# notification out to its receivers (`--notify URL`, repeatable), delivers each on its own, and
# marks the notification delivered once every delivery of it is settled (delivered or dead).
# The receiver is its URL with any password masked: a password never reaches the store.
notification_deliveries = Table(
    "notification_deliveries",
    metadata,
    _col("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    _col("notification_id", BigInteger().with_variant(Integer, "sqlite")),
    _col("event_id", String(32)),
    _col("job_id", String(32)),
    _col("receiver", Text),
    # pending (due at next_at; while an attempt is in flight, next_at is when its claim lapses),
    # delivered (a 2xx answer), dead (attempts exhausted: an operator may retry it).
    _col("state", String(16)),
    _col("attempts", Integer, default=0),
    _col("next_at", UTCDateTime),
    # Who holds the attempt in flight (a token per attempt): only it settles or releases the row.
    _col("claim", String(32), null=True),
    _col("created_at", UTCDateTime),
    _col("updated_at", UTCDateTime),
    _col("last_status", Integer, null=True),
    _col("last_error", Text, null=True),
    # The Location a 3xx answered with (never followed).
    _col("location", Text, null=True),
    _col("delivered_at", UTCDateTime, null=True),
    _col("dead_at", UTCDateTime, null=True),
    UniqueConstraint("notification_id", "receiver", name="uq_notification_deliveries_receiver"),
    Index("ix_notification_deliveries_due", "state", "receiver", "next_at"),
    Index("ix_notification_deliveries_order", "job_id", "receiver", "notification_id"),
)

# Facts about the store itself (migration 0003): `min_writer`, `store_id`.
meta = Table(
    "swarmkit_meta",
    metadata,
    _col("key", String(64), primary_key=True),
    _col("value", Text),
)

assert tuple(c.name for c in jobs.columns) == JOB_COLUMNS, "JobRecord must mirror the jobs table"


def declare_dialect_options() -> None:
    """The dialect-only parts of the tables, for Alembic (migrations/env.py): the partial index's WHERE.

    Not declared on the tables above: a dialect option loads its dialect when it
    is declared, and PostgreSQL's brings every one of its drivers, a cost every
    one-shot verb on SQLite would pay at import (issue 13: start-up).
    Idempotent; the schema itself is made by the migrations (0004 for this one).
    """
    index = next(ix for ix in events.indexes if ix.name == "ix_events_node_bounds")
    for dialect in ("sqlite", "postgresql"):
        index.dialect_kwargs[f"{dialect}_where"] = text(NODE_BOUNDS)
