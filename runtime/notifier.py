"""The delivery loop: fan each notification out to a delivery per receiver, claim the due ones, attempt
them concurrently (in order per run and receiver), retry with backoff, dead-letter, and give back at shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from swarmkit.store import STORE_FAULTS, describe_db_error
from swarmkit.store import notification_rows as rows
from swarmkit.store.clock import store_now
from swarmkit.store.ids import new_id

from .notify_config import NotifyConfig
from .notify_post import Refused, cleaned, post, signature

if TYPE_CHECKING:
    from swarmkit.store import Store

log = logging.getLogger("swarmkit.notify")

# A claimed delivery is its notifier's for its deadline and this much more: a notifier killed
# mid-post leaves it due again after that (one that shuts down gives it back at once).
CLAIM_MARGIN_S = 20.0
MAX_BACKOFF_S = 300.0
# Attempts in flight at once, per receiver: one that hangs holds only its own.
PER_RECEIVER = 4
FAN_OUT_BATCH = 500
# How long a shutdown waits for the store to take back what it abandoned.
RELEASE_S = 3.0


@dataclass
class _Flight:
    task: asyncio.Task
    receiver: str
    claim: str


def backoff(attempt: int, base_s: float = 1.0) -> float:
    """The wait after failed attempt `attempt` (1-based): doubling from `base_s`, at most MAX_BACKOFF_S."""
    return min(base_s * 2 ** max(0, attempt - 1), MAX_BACKOFF_S)


class Notifier:
    """Delivers the store's notifications to each receiver, concurrently, until drained or cancelled.

    Each notification is fanned out to a delivery row per receiver. Due
    deliveries are claimed with a conditional UPDATE (two notifiers never post
    the same row at once) and attempted concurrently, up to `per_receiver` at
    once per receiver: a receiver that hangs holds only its own slots, and each
    for no longer than the deadline. A run's notifications reach a receiver in
    order: a later one waits while an earlier one to that receiver is pending.
    `drain()` stops starting attempts; those in flight get until the earlier
    of their deadline and the shutdown grace, then are abandoned and released:
    still pending, due at once for the next notifier.
    """

    def __init__(self, store: Store, config: NotifyConfig, *, poll_s: float = 0.5, backoff_s: float = 1.0, per_receiver: int = PER_RECEIVER):
        self.store = store
        self.config = config
        self.receivers = config.receivers
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self.per_receiver = per_receiver
        self.delivered = 0
        self._flights: dict[int, _Flight] = {}
        self._wake = asyncio.Event()
        self._drain_at: float | None = None

    @property
    def claim_s(self) -> float:
        """How long a claimed delivery is this notifier's: past its deadline, so no other notifier
        posts it while an attempt may still be in flight; a notifier killed mid-post leaves it due after it."""
        return self.config.timeout_s + CLAIM_MARGIN_S

    def drain(self) -> None:
        """Shutting down: start no attempt more; those in flight have until the grace, counted from now."""
        if self._drain_at is None:
            self._drain_at = time.monotonic()
        self._wake.set()

    async def run(self) -> None:
        try:
            while self._drain_at is None:
                self._wake.clear()
                try:
                    await self.deliver_due()
                except STORE_FAULTS as exc:
                    log.warning("notifications: %s", describe_db_error(exc, self.store.loc))
                if self._drain_at is not None:
                    break
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=self.poll_s)
                except TimeoutError:
                    pass
            flights = [f.task for f in self._flights.values()]
            if flights:
                left = self._drain_at + self.config.grace_s - time.monotonic()
                await asyncio.wait(flights, timeout=max(0.0, left))
            await self._abandon()
        except asyncio.CancelledError:
            await self._abandon()
            raise

    async def deliver_due(self) -> int:
        """Fan out, then start the due deliveries this notifier has room for; returns how many it started."""
        now = store_now()
        await self._fan_out(now)
        started = 0
        for receiver in self.receivers:
            free = self.per_receiver - sum(1 for f in self._flights.values() if f.receiver == receiver)
            if free <= 0:
                continue
            for row in await self._due(receiver, now, free):
                if self._drain_at is not None:
                    return started
                claim = await self._claim(row.id, row.next_at, now)
                if claim is None:
                    continue  # another notifier has it
                task = asyncio.create_task(self._attempt(row, receiver, claim), name=f"notify-{row.id}")
                self._flights[row.id] = _Flight(task, receiver, claim)
                task.add_done_callback(partial(self._landed, row.id))
                started += 1
        return started

    def _landed(self, row_id: int, _task: asyncio.Task) -> None:
        self._flights.pop(row_id, None)
        self._wake.set()  # the run's next notification to that receiver may go now

    async def _fan_out(self, now: datetime) -> None:
        """A delivery row for each receiver of each notification not yet settled (once: ON CONFLICT DO NOTHING)."""
        async with self.store.read() as conn:
            # A read first: most polls find nothing to fan out, and take no write lock for it.
            if not await rows.any_to_fan_out(conn, list(self.receivers)):
                return
        async with self.store.write() as conn:
            for receiver in self.receivers:
                await rows.fan_out(conn, receiver, now, FAN_OUT_BATCH)

    async def _due(self, receiver: str, now: datetime, limit: int) -> list[rows.DueDelivery]:
        async with self.store.read() as conn:
            return await rows.due_deliveries(conn, receiver, now, limit, skip=list(self._flights))

    async def _claim(self, row_id: int, next_at: datetime, now: datetime) -> str | None:
        claim = new_id()
        async with self.store.write() as conn:
            count = await rows.claim_delivery(conn, row_id, next_at, claim, until=now + timedelta(seconds=self.claim_s), now=now)
        return claim if count == 1 else None

    async def _attempt(self, row: rows.DueDelivery, receiver: str, claim: str) -> None:
        body = row.body.encode("utf-8")
        headers = {
            "Content-Type": "application/json", "User-Agent": "swarmkit-notify",
            "X-Swarmkit-Event-Id": row.event_id, "X-Swarmkit-Signature": signature(self.config.secret, body),
        }
        attempt = row.attempts + 1
        status: int | None = None
        location: str | None = None
        error: str | None = None
        try:
            status = await post(self.receivers[receiver], headers, body, self.config.timeout_s)
        except Refused as exc:
            status, location, error = exc.status, exc.location, str(exc)
        except TimeoutError:
            error = f"no answer within {self.config.timeout_s:g}s"
        except (OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        try:
            if error is None:
                await self._settle(row, claim, status=status)
                self.delivered += 1
                return
            error = cleaned(error)
            dead = attempt >= self.config.attempts
            delay = backoff(attempt, self.backoff_s)
            settled = await self._settle(row, claim, status=status, error=error, location=location, dead=dead, delay=delay)
        except STORE_FAULTS as exc:
            log.warning("notification %s to %s: cannot record the attempt (%s); it is tried again once its claim lapses", row.event_id[:8], receiver, describe_db_error(exc, self.store.loc))
            return
        if not settled:
            return  # no longer ours (a retry or another notifier took it after our claim lapsed)
        if dead:
            log.warning(
                "notification %s (%s of run %s) to %s is a dead letter after %d attempts: %s; retry it with `swarmkit notifications retry %d`",
                row.event_id[:8], row.kind, row.job_id[:8], receiver, attempt, error, row.id,
            )
        else:
            log.warning("notification %s to %s failed (attempt %d of %d): %s; next try in %.0fs", row.event_id[:8], receiver, attempt, self.config.attempts, error, delay)

    async def _settle(
        self, row: rows.DueDelivery, claim: str, *, status: int | None, error: str | None = None, location: str | None = None, dead: bool = False, delay: float = 0.0,
    ) -> bool:
        """Record the attempt's outcome on its delivery (only while the claim is ours), and settle the notification."""
        now = store_now()
        async with self.store.write() as conn:
            if error is None:
                count = await rows.mark_delivered(conn, row.id, claim, now, status=status)
            elif dead:
                count = await rows.mark_dead(conn, row.id, claim, now, status=status, error=error, location=location)
            else:
                count = await rows.mark_failed(conn, row.id, claim, now, status=status, error=error, location=location, next_at=now + timedelta(seconds=delay))
            if count == 1 and (error is None or dead):
                await rows.settle_notification(conn, row.notification_id, now)
        return count == 1

    async def _abandon(self) -> None:
        """End the attempts still in flight and give their deliveries back: pending, due now, the attempt uncounted."""
        left = list(self._flights.items())
        if not left:
            return
        for _rid, flight in left:
            flight.task.cancel()
        await asyncio.gather(*(f.task for _r, f in left), return_exceptions=True)
        now = store_now()
        try:
            async with asyncio.timeout(RELEASE_S):
                async with self.store.write() as conn:
                    for rid, flight in left:
                        await rows.release_delivery(conn, rid, flight.claim, now)
            log.warning("notifications: %d attempt(s) in flight abandoned at shutdown; they stay pending for the next notifier", len(left))
        except (TimeoutError, *STORE_FAULTS) as exc:
            why = "the store did not answer in time" if isinstance(exc, TimeoutError) else describe_db_error(exc, self.store.loc)
            log.warning("notifications: %d attempt(s) in flight abandoned at shutdown, not released (%s); they are due again %.0fs after their claim", len(left), why, self.claim_s)

