"""The outbox's statements (notifications and their deliveries), each written once: the notifier's
fan-out, claim, settle and release (runtime/notifier.py) and what operators list, count and retry
(runtime/deliveries.py).

Each function runs one statement on the connection it is handed; the caller opens the transaction
and decides what a row count means. Every change of a delivery's state is one conditional UPDATE
(on its id, its state and, while an attempt is in flight, its claim): two notifiers, or a notifier
and an operator's retry, never both act on one row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import exists, func, literal, or_, select, update

from .models import notification_deliveries as d
from .models import notifications as n
from .named import S
from .statuses import DELIVERY_STATES

if TYPE_CHECKING:
    from .connections import AsyncConn, Conn

PENDING, DELIVERED, DEAD = DELIVERY_STATES

_FAN_OUT_COLUMNS = ["notification_id", "event_id", "job_id", "receiver", "state", "attempts", "next_at", "created_at", "updated_at"]


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A delivery due to be attempted, with what its POST sends."""

    id: int
    notification_id: int
    job_id: str
    attempts: int
    next_at: datetime
    event_id: str
    kind: str
    body: str


@dataclass(frozen=True, slots=True)
class RetryCandidate:
    """A delivery an operator asked to retry, as it stands before the retry."""

    id: int
    state: str
    notification_id: int
    event_id: str
    job_id: str
    receiver: str
    attempts: int


def _missing(receiver: str) -> Any:
    """No delivery of the notification to `receiver` yet."""
    return ~exists().where(d.c.notification_id == n.c.id, d.c.receiver == receiver)


# --- the notifier (async) ---------------------------------------------------------------------


async def any_to_fan_out(conn: AsyncConn, receivers: Sequence[str]) -> bool:
    """Whether a notification not yet settled lacks a delivery to any of `receivers`."""
    query = select(n.c.id).where(n.c.delivered_at.is_(None), or_(*(_missing(r) for r in receivers))).limit(1)
    return (await conn.execute(query)).first() is not None


async def fan_out(conn: AsyncConn, receiver: str, now: datetime, limit: int) -> None:
    """A pending delivery to `receiver`, due now, for up to `limit` notifications not yet settled that have none.

    ON CONFLICT DO NOTHING: two notifiers fanning out at once make each delivery once (its
    unique notification and receiver).
    """
    if conn.dialect.name == "sqlite":
        # late: each dialect's insert from its own module; PostgreSQL's loads every one of its drivers, which a SQLite store never needs
        from sqlalchemy.dialects.sqlite import insert
    else:
        # late: as above, the SQLite dialect's module is not loaded for a PostgreSQL store
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    missing = (
        select(
            n.c.id, n.c.event_id, n.c.job_id, literal(receiver, d.c.receiver.type), literal(PENDING, d.c.state.type), literal(0, d.c.attempts.type),
            literal(now, d.c.next_at.type), n.c.created_at, literal(now, d.c.updated_at.type),
        )
        .where(n.c.delivered_at.is_(None), _missing(receiver))
        .order_by(n.c.id).limit(limit)
    )
    await conn.execute(insert(d).from_select(_FAN_OUT_COLUMNS, missing).on_conflict_do_nothing())


async def due_deliveries(conn: AsyncConn, receiver: str, now: datetime, limit: int, *, skip: Collection[int] = ()) -> list[DueDelivery]:
    """Pending deliveries to `receiver` due by `now`, oldest notification first, but none of `skip` (in flight here)."""
    e = d.alias("earlier")
    query = (
        select(d.c.id, d.c.notification_id, d.c.job_id, d.c.attempts, d.c.next_at, n.c.event_id, n.c.kind, n.c.body)
        .select_from(d.join(n, n.c.id == d.c.notification_id))
        .where(
            d.c.state == PENDING, d.c.receiver == receiver, d.c.next_at <= now,
            # A run's notifications in order: none while an earlier one to this receiver is pending (or in flight).
            ~exists().where(e.c.job_id == d.c.job_id, e.c.receiver == d.c.receiver, e.c.state == PENDING, e.c.notification_id < d.c.notification_id),
        )
        .order_by(d.c.notification_id).limit(limit)
    )
    if skip:
        query = query.where(d.c.id.not_in(list(skip)))
    return [DueDelivery(*row) for row in await conn.execute(query)]


async def claim_delivery(conn: AsyncConn, delivery_id: int, next_at: datetime, claim: str, *, until: datetime, now: datetime) -> int:
    """Take a due delivery for one attempt: still pending and still due at `next_at` (no one took it since it was read).

    The attempt is counted now; `until` is when the claim lapses. Returns the row count (1: ours).
    """
    res = await conn.execute(
        update(d)
        .where(d.c.id == delivery_id, d.c.state == PENDING, d.c.next_at == next_at)
        .values(next_at=until, attempts=d.c.attempts + 1, claim=claim, updated_at=now)
    )
    return res.rowcount


async def _record_attempt(conn: AsyncConn, delivery_id: int, claim: str, now: datetime, *, status: int | None, error: str | None, location: str | None, **values: Any) -> int:
    res = await conn.execute(
        update(d)
        .where(d.c.id == delivery_id, d.c.claim == claim, d.c.state == PENDING)
        .values(claim=None, updated_at=now, last_status=status, last_error=error, location=location, **values)
    )
    return res.rowcount


async def mark_delivered(conn: AsyncConn, delivery_id: int, claim: str, now: datetime, *, status: int | None) -> int:
    """The attempt under `claim` delivered it (while the claim is still ours). Returns the row count."""
    return await _record_attempt(conn, delivery_id, claim, now, status=status, error=None, location=None, state=DELIVERED, delivered_at=now)


async def mark_dead(conn: AsyncConn, delivery_id: int, claim: str, now: datetime, *, status: int | None, error: str, location: str | None) -> int:
    """The attempt under `claim` failed and was the last: a dead letter. Returns the row count."""
    return await _record_attempt(conn, delivery_id, claim, now, status=status, error=error, location=location, state=DEAD, dead_at=now)


async def mark_failed(conn: AsyncConn, delivery_id: int, claim: str, now: datetime, *, status: int | None, error: str, location: str | None, next_at: datetime) -> int:
    """The attempt under `claim` failed: still pending, due again at `next_at`. Returns the row count."""
    return await _record_attempt(conn, delivery_id, claim, now, status=status, error=error, location=location, next_at=next_at)


async def settle_notification(conn: AsyncConn, notification_id: int, now: datetime) -> None:
    """The notification is delivered once none of its deliveries is pending."""
    await conn.execute(
        update(n)
        .where(n.c.id == notification_id, n.c.delivered_at.is_(None), ~exists().where(d.c.notification_id == notification_id, d.c.state == PENDING))
        .values(delivered_at=now)
    )


async def release_delivery(conn: AsyncConn, delivery_id: int, claim: str, now: datetime) -> int:
    """Give back an attempt abandoned under `claim`: pending, due now, the attempt uncounted. Returns the row count."""
    res = await conn.execute(
        update(d).where(d.c.id == delivery_id, d.c.claim == claim, d.c.state == PENDING)
        .values(claim=None, next_at=now, attempts=d.c.attempts - 1, updated_at=now)
    )
    return res.rowcount


# --- what operators see and do (sync: the CLI, the API, /metrics) ----------------------------------


def list_deliveries(conn: Conn, *, state: str | None = None, run_id: str | None = None, limit: int = 100) -> list[dict]:
    """Deliveries, newest first, as plain dicts (times aware), filtered by state and run."""
    query = (
        select(
            d.c.id, d.c.event_id, d.c.job_id.label("run_id"), n.c.kind, d.c.receiver, d.c.state, d.c.attempts, d.c.next_at, d.c.last_status,
            d.c.last_error, d.c.location, d.c.created_at, d.c.updated_at, d.c.delivered_at, d.c.dead_at,
        )
        .select_from(d.join(n, n.c.id == d.c.notification_id))
        .order_by(d.c.id.desc()).limit(limit)
    )
    if state is not None:
        query = query.where(d.c.state == state)
    if run_id is not None:
        query = query.where(d.c.job_id == run_id)
    return [dict(r._mapping) for r in conn.execute(query)]


def delivery_counts(conn: Conn) -> dict[str, int]:
    """Deliveries pending and dead, and `outbox`: notifications not yet settled for every receiver."""
    counts = {s: 0 for s in (PENDING, DEAD)}
    # Not the delivered ones: they only grow, and a scrape must stay cheap.
    for state, count in conn.execute(select(d.c.state, func.count()).where(d.c.state.in_((PENDING, DEAD))).group_by(d.c.state)):
        counts[state] = int(count)
    counts["outbox"] = int(conn.execute(select(func.count()).select_from(n).where(n.c.delivered_at.is_(None))).scalar_one())
    return counts


def retry_candidates(conn: Conn, ids: Collection[int] | None) -> list[RetryCandidate]:
    """The deliveries `ids` whatever their state, or every dead one (None), by id."""
    query = select(d.c.id, d.c.state, d.c.notification_id, d.c.event_id, d.c.job_id, d.c.receiver, d.c.attempts)
    query = query.where(d.c.state == DEAD) if ids is None else query.where(d.c.id.in_(list(ids)))
    return [RetryCandidate(*row) for row in conn.execute(query.order_by(d.c.id))]


def revive_dead(conn: Conn, delivery_id: int, now: datetime) -> int:
    """A dead delivery pending again, due now with its attempts reset (only while still dead). Returns the row count."""
    res = conn.execute(
        update(d).where(d.c.id == delivery_id, d.c.state == DEAD)
        .values(state=PENDING, attempts=0, next_at=now, dead_at=None, claim=None, updated_at=now)
    )
    return res.rowcount


def reopen_retried(conn: Conn, notification_id: int, audit: dict[str, Any]) -> None:
    """After `revive_dead`: its notification is not settled any more, and the retry is audited (`audit`:
    the row `S.INSERT_AUDIT` takes, as runtime/journal.py's `audit_row` builds it)."""
    conn.execute(update(n).where(n.c.id == notification_id).values(delivered_at=None))
    conn.execute(S.INSERT_AUDIT, audit)
