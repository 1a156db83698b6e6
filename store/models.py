"""The store's tables, as typed SQLAlchemy 2 models.

The runtime and the console use these tables through Core statements
(`select(Job.status)`, `update(jobs)`); ORM objects never leave this package,
queries hand out frozen dataclasses instead (see `store.queries`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Every status the `jobs.status` column may hold. The shown statuses
# (stopping, cancelling, stalled) are derived and never stored.
QUEUED = "queued"
RUNNING = "running"
STOPPED = "stopped"
DEFERRED = "deferred"
LOST = "lost"
COMPLETED = "completed"
FAILED = "failed"
FAULTED = "faulted"
CANCELLED = "cancelled"

STORED_STATUSES = (QUEUED, RUNNING, STOPPED, DEFERRED, LOST, COMPLETED, FAILED, FAULTED, CANCELLED)
TERMINAL_STATUSES = frozenset({COMPLETED, FAILED, FAULTED, CANCELLED})
RESUMABLE_STATUSES = frozenset({STOPPED, DEFERRED, LOST})
ACTIVE_STATUSES = frozenset({QUEUED, RUNNING, STOPPED, DEFERRED, LOST})


NODE_STARTED, NODE_FINISHED = "node.started", "node.finished"
NODE_BOUNDS = "kind IN ('node.started', 'node.finished')"


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


class Base(DeclarativeBase):
    pass


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # The lost-run check of every worker and console (migration 0002).
        Index("ix_jobs_status_heartbeat", "status", "heartbeat_at"),
        # A flow's newest runs, for a node's usual duration (migration 0004).
        Index("ix_jobs_flow_created", "flow", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    flow: Mapped[str] = mapped_column(Text)
    flow_path: Mapped[str | None] = mapped_column(Text)
    flow_source: Mapped[str] = mapped_column(Text)
    inputs: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    stop_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    stop_requested_by: Mapped[str | None] = mapped_column(Text)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancel_requested_by: Mapped[str | None] = mapped_column(Text)
    cancel_keep: Mapped[bool] = mapped_column(Boolean, default=False)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    host: Mapped[str | None] = mapped_column(Text)
    pid: Mapped[int | None] = mapped_column(Integer)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_event_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    current_node: Mapped[str | None] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer, default=0)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    pending_gate: Mapped[str | None] = mapped_column(Text)
    approved_step: Mapped[int | None] = mapped_column(Integer)
    workspace_root: Mapped[str | None] = mapped_column(Text)
    # The host's monotonic clock at its last heartbeat (SQLite stores only: one machine, one clock).
    heartbeat_mono: Mapped[float | None] = mapped_column(Float)
    # JSON {module: source} of the flow's callables that are not installed packages.
    flow_modules: Mapped[str | None] = mapped_column(Text)
    # When the node in flight started (migration 0004): the host sets it at each boundary.
    node_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The stop asked for interrupts the node in flight (migration 0005); None on older rows is False.
    stop_now: Mapped[bool | None] = mapped_column(Boolean, default=False)
    # Shown stalled past this with no sign of work (set by the host at each sign); NULL: the default after the last.
    stall_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A stop not taken by then shows "stop overdue" (a few times its node's usual duration after the request).
    stop_overdue_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (Index("ix_checkpoints_job_step", "job_id", "step", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text)
    epoch: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # JSON partial state of the node at `step`, left at a boundary inside it where a stop landed (migration 0005).
    partial: Mapped[str | None] = mapped_column(Text)


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_job_id", "job_id", "id"),
        # Node boundaries only, for a node's usual duration (migration 0004).
        Index(
            "ix_events_node_bounds", "job_id", "node", "id",
            sqlite_where=text(NODE_BOUNDS), postgresql_where=text(NODE_BOUNDS),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(Text)
    step: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text, default="")


class Audit(Base):
    __tablename__ = "audit"
    __table_args__ = (Index("ix_audit_job_id", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(Text, default="{}")


class Workspace(Base):
    __tablename__ = "workspaces"
    __table_args__ = (Index("ix_workspaces_job_id", "job_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The host that made it: only that host can delete it.
    host: Mapped[str | None] = mapped_column(Text)


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    host: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime)
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_mono: Mapped[float | None] = mapped_column(Float)
    # This worker's wall clock minus the store's, in seconds, measured at its last heartbeat.
    clock_offset_s: Mapped[float | None] = mapped_column(Float)


class Notification(Base):
    """The outbox of notifications (migration 0005): written in the transaction of the transition
    it tells of, delivered at least once by a process that notifies (`--notify URL`)."""

    __tablename__ = "notifications"
    __table_args__ = (Index("ix_notifications_due", "delivered_at", "next_at"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    # What a receiver deduplicates by: the same on every delivery of this notification.
    event_id: Mapped[str] = mapped_column(String(32), unique=True)
    job_id: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(32))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


class Meta(Base):
    """Facts about the store itself (migration 0003): `min_writer`, `store_id`."""

    __tablename__ = "swarmkit_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


jobs: Table = cast(Table, Job.__table__)
checkpoints: Table = cast(Table, Checkpoint.__table__)
events: Table = cast(Table, Event.__table__)
audit: Table = cast(Table, Audit.__table__)
workspaces: Table = cast(Table, Workspace.__table__)
workers: Table = cast(Table, Worker.__table__)
meta: Table = cast(Table, Meta.__table__)
notifications: Table = cast(Table, Notification.__table__)

JOB_COLUMNS: tuple[str, ...] = tuple(c.name for c in jobs.columns)
