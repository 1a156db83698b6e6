"""What operators see and do: deliveries listed and counted, dead letters retried (the CLI, the API, /metrics)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from swarmkit.store import notification_rows as rows

from .journal import audit_row
from .notify import DEAD

if TYPE_CHECKING:
    from swarmkit.store.connections import Conn

def list_deliveries(conn: Conn, *, state: str | None = None, run_id: str | None = None, limit: int = 100) -> list[dict]:
    """Deliveries, newest first, as plain dicts (times aware): for `swarmkit notifications` and GET /notifications."""
    return rows.list_deliveries(conn, state=state, run_id=run_id, limit=limit)


def delivery_counts(conn: Conn) -> dict[str, int]:
    """Deliveries pending and dead, and `outbox`: notifications not yet settled for every receiver (/metrics)."""
    return rows.delivery_counts(conn)


def retry_dead(conn: Conn, ids: list[int] | None, *, actor: str, now: datetime) -> dict[int, str]:
    """Make dead deliveries pending again, due now with their attempts reset: `ids`, or every dead one (None).

    Each is one conditional UPDATE (dead -> pending), audited `notification.retried`;
    returns each id's outcome: `retried`, the state it is in (`pending`, `delivered`:
    nothing done), or `unknown`.
    """
    outcome: dict[int, str] = {i: "unknown" for i in ids or ()}
    for row in rows.retry_candidates(conn, ids):
        rid = row.id
        if row.state != DEAD:
            outcome[rid] = row.state
            continue
        if rows.revive_dead(conn, rid, now) != 1:
            outcome[rid] = "changed"
            continue
        detail = {"delivery": rid, "event_id": row.event_id, "receiver": row.receiver, "attempts": row.attempts}
        rows.reopen_retried(conn, row.notification_id, audit_row(actor, "notification.retried", row.job_id, detail, now))
        outcome[rid] = "retried"
    return outcome
