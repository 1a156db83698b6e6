"""What operators see and do: deliveries listed and counted, dead letters retried (the CLI, the API, /metrics)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from .notify import DEAD, PENDING

if TYPE_CHECKING:
    from sqlalchemy import Connection

DELIVERY_FIELDS = (
    "id", "event_id", "run_id", "kind", "receiver", "state", "attempts", "next_at", "last_status", "last_error", "location",
    "created_at", "updated_at", "delivered_at", "dead_at",
)


def list_deliveries(conn: Connection, *, state: str | None = None, run_id: str | None = None, limit: int = 100) -> list[dict]:
    """Deliveries, newest first, as plain dicts (times aware): for `swarmkit notifications` and GET /notifications."""
    from sqlalchemy import select

    from swarmkit.store.models import notification_deliveries as d
    from swarmkit.store.models import notifications as n

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


def delivery_counts(conn: Connection) -> dict[str, int]:
    """Deliveries pending and dead, and `outbox`: notifications not yet settled for every receiver."""
    from sqlalchemy import func, select

    from swarmkit.store.models import notification_deliveries as d
    from swarmkit.store.models import notifications as n

    counts = {s: 0 for s in (PENDING, DEAD)}
    # Not the delivered ones: they only grow, and a scrape must stay cheap.
    for state, count in conn.execute(select(d.c.state, func.count()).where(d.c.state.in_((PENDING, DEAD))).group_by(d.c.state)):
        counts[state] = int(count)
    counts["outbox"] = int(conn.execute(select(func.count()).select_from(n).where(n.c.delivered_at.is_(None))).scalar_one())
    return counts


def retry_dead(conn: Connection, ids: list[int] | None, *, actor: str, now: datetime) -> dict[int, str]:
    """Make dead deliveries pending again, due now with their attempts reset: `ids`, or every dead one (None).

    Each is one conditional UPDATE (dead -> pending), audited `notification.retried`;
    returns each id's outcome: `retried`, the state it is in (`pending`, `delivered`:
    nothing done), or `unknown`.
    """
    from sqlalchemy import select, update

    from swarmkit.store.models import notification_deliveries as d
    from swarmkit.store.models import notifications as n
    from swarmkit.store.named import S

    from .journal import audit_row

    query = select(d.c.id, d.c.state, d.c.notification_id, d.c.event_id, d.c.job_id, d.c.receiver, d.c.attempts)
    query = query.where(d.c.state == DEAD) if ids is None else query.where(d.c.id.in_(ids))
    rows = {r.id: r for r in conn.execute(query.order_by(d.c.id))}
    outcome: dict[int, str] = {i: "unknown" for i in ids or ()}
    for rid, row in rows.items():
        if row.state != DEAD:
            outcome[rid] = row.state
            continue
        res = conn.execute(
            update(d).where(d.c.id == rid, d.c.state == DEAD)
            .values(state=PENDING, attempts=0, next_at=now, dead_at=None, claim=None, updated_at=now)
        )
        if res.rowcount != 1:
            outcome[rid] = "changed"
            continue
        conn.execute(update(n).where(n.c.id == row.notification_id).values(delivered_at=None))
        detail = {"delivery": rid, "event_id": row.event_id, "receiver": row.receiver, "attempts": row.attempts}
        conn.execute(S.INSERT_AUDIT, audit_row(actor, "notification.retried", row.job_id, detail, now))
        outcome[rid] = "retried"
    return outcome
