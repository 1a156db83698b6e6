"""Notifications that are never lost and never said delivered when they were not.

A transition that an operator wants to hear of (a run deferred at a gate,
stopped, faulted, lost, failed or completed) writes its notification in its
own transaction (`record_notification`), so a crash between the transition
and the delivery loses nothing. A process started with `--notify URL`
(repeatable; `swarmkit worker`, `swarmkit serve`) runs a `Notifier`: it fans
each notification out to a delivery per receiver (`notification_deliveries`),
claims due deliveries with a conditional UPDATE (so two notifiers do not post
the same one at once), and POSTs the JSON body signed with HMAC-SHA256 over the
shared secret (`SWARMKIT_NOTIFY_SECRET`), several at once, each attempt within
an overall deadline (`SWARMKIT_NOTIFY_TIMEOUT`). Only a 2xx answer delivers; a
3xx is a failure (its Location recorded, never followed). A failed attempt is
logged at WARNING and tried again with a doubling backoff; after
`SWARMKIT_NOTIFY_ATTEMPTS` the delivery is a dead letter, which `swarmkit
notifications`, `GET /notifications` and `/metrics` show and an operator may
retry. Delivery is at least once: a receiver deduplicates by the event id (the
body's `event_id` and the `X-Swarmkit-Event-Id` header), the same on every try.

Here: the notification recorded, and a delivery's states. One attempt's POST is
notify_post.py's, the delivery loop notifier.py's (`Notifier`), its settings
notify_config.py's (`NotifyConfig`, `notify_config`), and what operators see and
retry deliveries.py's.
"""

from __future__ import annotations

import json
from datetime import datetime

from swarmkit.store.clock import store_now
from swarmkit.store.ids import new_id
from swarmkit.store.named import S
from swarmkit.store.statuses import DELIVERY_STATES

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from swarmkit.store.connections import AsyncConn

# A delivery's states, as the store names them.
STATES = DELIVERY_STATES
PENDING, DELIVERED, DEAD = DELIVERY_STATES


async def record_notification(
    conn: AsyncConn, job_id: str, kind: str, *, flow: str | None, text: str, node: str | None = None, step: int | None = None, at: datetime | None = None,
) -> None:
    """In the transaction of the transition: the notification that tells of it."""
    at = at or store_now()
    event_id = new_id()
    body = dict(event_id=event_id, kind=kind, run_id=job_id, flow=flow, node=node, step=step, at=at.isoformat(), text=text)
    await conn.execute(S.INSERT_NOTIFICATION, {"b_event_id": event_id, "b_job_id": job_id, "b_kind": kind, "b_body": json.dumps(body, sort_keys=True), "b_at": at})

