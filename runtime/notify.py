"""Notifications that are never lost: an outbox in the store, delivered at least once.

A transition that an operator wants to hear of (a run deferred at a gate,
stopped, faulted, lost, failed or completed) writes its notification in its
own transaction (`record_notification`), so a crash between the transition
and the delivery loses nothing. A process started with `--notify URL`
(`swarmkit worker`, `swarmkit serve`) runs a `Notifier`: it claims due rows
with a conditional UPDATE (so two notifiers do not post the same row at
once), POSTs the JSON body signed with HMAC-SHA256 over the shared secret
(`SWARMKIT_NOTIFY_SECRET`), and marks the row delivered on a 2xx answer, or
tries again later with a doubling backoff. Delivery is at least once: a
receiver deduplicates by the event id (the body's `event_id` and the
`X-Swarmkit-Event-Id` header), the same on every try.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from swarmkit.store.clock import store_now
from swarmkit.store.named import S

from .errors import UsageError

if TYPE_CHECKING:
    # Only for the annotations: SQLAlchemy's asyncio layer loads the ORM, which no one-shot verb needs.
    from sqlalchemy.ext.asyncio import AsyncConnection

    from swarmkit.store import Store

log = logging.getLogger("swarmkit.notify")

SECRET_ENV = "SWARMKIT_NOTIFY_SECRET"
# A claimed row is someone's for this long: a notifier killed mid-post leaves it due again after it.
CLAIM_S = 30.0
MAX_BACKOFF_S = 300.0
POST_TIMEOUT_S = 10.0
BATCH = 20


async def record_notification(
    conn: AsyncConnection, job_id: str, kind: str, *, flow: str | None, text: str, node: str | None = None, step: int | None = None, at: datetime | None = None,
) -> None:
    """In the transaction of the transition: the notification that tells of it."""
    at = at or store_now()
    event_id = uuid.uuid4().hex
    body = dict(event_id=event_id, kind=kind, run_id=job_id, flow=flow, node=node, step=step, at=at.isoformat(), text=text)
    await conn.execute(S.INSERT_NOTIFICATION, {"b_event_id": event_id, "b_job_id": job_id, "b_kind": kind, "b_body": json.dumps(body, sort_keys=True), "b_at": at})


def signature(secret: str, body: bytes) -> str:
    """What the X-Swarmkit-Signature header carries: `sha256=` and the HMAC of the body, in hex."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def _post(url: str, secret: str, event_id: str, body: bytes) -> None:
    import urllib.request  # only a notifying process pays for it

    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "swarmkit-notify",
        "X-Swarmkit-Event-Id": event_id, "X-Swarmkit-Signature": signature(secret, body),
    })
    with urllib.request.urlopen(req, timeout=POST_TIMEOUT_S) as resp:
        if not 200 <= resp.status < 300:
            raise OSError(f"HTTP {resp.status}")


class Notifier:
    """Delivers the store's due notifications to one URL until cancelled."""

    def __init__(self, store: Store, url: str, secret: str, *, poll_s: float = 0.5, backoff_s: float = 1.0):
        self.store = store
        self.url = url
        self.secret = secret
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self.delivered = 0

    async def run(self) -> None:
        from swarmkit.store import STORE_FAULTS, describe_db_error

        while True:
            try:
                await self.deliver_due()
            except STORE_FAULTS as exc:
                log.warning("notifications: %s", describe_db_error(exc, self.store.loc))
            await asyncio.sleep(self.poll_s)

    async def deliver_due(self) -> int:
        from sqlalchemy import select

        from swarmkit.store.models import notifications

        now = store_now()
        async with self.store.read() as conn:
            due = (await conn.execute(
                select(notifications.c.id, notifications.c.event_id, notifications.c.body, notifications.c.attempts, notifications.c.next_at)
                .where(notifications.c.delivered_at.is_(None), notifications.c.next_at <= now)
                .order_by(notifications.c.id).limit(BATCH)
            )).all()
        sent = 0
        for row in due:
            if not await self._claim(row.id, row.next_at, now):
                continue  # another notifier has it
            try:
                await asyncio.to_thread(_post, self.url, self.secret, row.event_id, row.body.encode("utf-8"))
            except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
                await self._again(row.id, row.attempts + 1, f"{type(exc).__name__}: {exc}"[:500])
                continue
            await self._done(row.id)
            sent += 1
        self.delivered += sent
        return sent

    async def _claim(self, row_id: int, next_at: datetime, now: datetime) -> bool:
        from sqlalchemy import update

        from swarmkit.store.models import notifications

        async with self.store.write() as conn:
            res = await conn.execute(
                update(notifications)
                .where(notifications.c.id == row_id, notifications.c.delivered_at.is_(None), notifications.c.next_at == next_at)
                .values(next_at=now + timedelta(seconds=CLAIM_S), attempts=notifications.c.attempts + 1)
            )
        return res.rowcount == 1

    async def _done(self, row_id: int) -> None:
        from sqlalchemy import update

        from swarmkit.store.models import notifications

        async with self.store.write() as conn:
            await conn.execute(update(notifications).where(notifications.c.id == row_id).values(delivered_at=store_now(), last_error=None))

    async def _again(self, row_id: int, attempts: int, error: str) -> None:
        delay = min(self.backoff_s * 2 ** max(0, attempts - 1), MAX_BACKOFF_S)
        log.info("notification %d not delivered (%s); trying again in %.0fs", row_id, error, delay)
        from sqlalchemy import update

        from swarmkit.store.models import notifications

        async with self.store.write() as conn:
            await conn.execute(
                update(notifications).where(notifications.c.id == row_id, notifications.c.delivered_at.is_(None))
                .values(next_at=store_now() + timedelta(seconds=delay), last_error=error)
            )


def notify_target(url: str | None, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(URL, secret) for a verb's --notify, checked before any work; the secret comes from the environment, never argv."""
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--notify {url!r}: expected an http:// or https:// URL")
    secret = environ.get(SECRET_ENV, "")
    if len(secret) < 16:
        raise UsageError(f"--notify needs a shared secret of at least 16 characters in {SECRET_ENV} (the receiver checks X-Swarmkit-Signature with it)")
    return url, secret
