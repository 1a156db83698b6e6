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
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from swarmkit.store.clock import store_now
from swarmkit.store.named import S

from .errors import UsageError

if TYPE_CHECKING:
    # Only for the annotations: SQLAlchemy's asyncio layer loads the ORM, which no one-shot verb needs.
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection

    from swarmkit.store import Store

log = logging.getLogger("swarmkit.notify")

SECRET_ENV = "SWARMKIT_NOTIFY_SECRET"
TIMEOUT_ENV = "SWARMKIT_NOTIFY_TIMEOUT"
ATTEMPTS_ENV = "SWARMKIT_NOTIFY_ATTEMPTS"
GRACE_ENV = "SWARMKIT_SHUTDOWN_GRACE"
# The overall deadline of one attempt (connect, send, read the answer's head), in seconds.
NOTIFY_TIMEOUT_S = 10.0
# Attempts before a delivery is a dead letter: with the backoff below, about 20 minutes of failures.
NOTIFY_ATTEMPTS = 12
# Once signalled, how long a worker or `serve` gives the attempts in flight.
SHUTDOWN_GRACE_S = 10.0
# A claimed delivery is its notifier's for its deadline and this much more: a notifier killed
# mid-post leaves it due again after that (one that shuts down gives it back at once).
CLAIM_MARGIN_S = 20.0
MAX_BACKOFF_S = 300.0
# Attempts in flight at once, per receiver: one that hangs holds only its own.
PER_RECEIVER = 4
FAN_OUT_BATCH = 500
# How long a shutdown waits for the store to take back what it abandoned.
RELEASE_S = 3.0
PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"
STATES = (PENDING, DELIVERED, DEAD)


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


# --- one attempt: a POST with an overall deadline, never following a redirect ---------------------


class Refused(Exception):
    """The receiver answered, but not 2xx: a failed attempt (a 3xx too: it is never followed)."""

    def __init__(self, status: int, location: str | None):
        where = f" (Location: {location})" if location else ""
        super().__init__(f"HTTP {status}{where}")
        self.status = status
        self.location = location


def _clean(text: str, limit: int = 500) -> str:
    """What a receiver said, as the store keeps it: no password, no control character, bounded."""
    from swarmkit.store import masked

    from .text import plain

    return plain(masked(text), limit)


async def _lookup(host: str, port: int) -> list[tuple]:
    """getaddrinfo on a daemon thread: a resolver that hangs is abandoned at the deadline, and
    never joined at exit (the loop's default executor would be)."""
    import ipaddress
    import socket
    import threading

    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, host)]
    loop = asyncio.get_running_loop()
    found: asyncio.Future[list[tuple]] = loop.create_future()

    def settle(result: object) -> None:
        if found.done():
            return
        if isinstance(result, BaseException):
            found.set_exception(result)
        else:
            found.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        result: object
        try:
            result = [(fam, addr[0]) for fam, _t, _p, _c, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except Exception as exc:
            result = OSError(f"cannot resolve {host}: {exc}")
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:
            pass  # the loop is gone: nobody waits for the answer

    threading.Thread(target=work, name="notify-resolve", daemon=True).start()
    return await found


async def post(url: str, headers: Mapping[str, str], body: bytes, deadline_s: float) -> int:
    """POST `body` to `url` over HTTP/1.1 and return the status of a 2xx answer.

    Connecting (the name's lookup and TLS too), sending, and reading the status
    line and headers all fall within `deadline_s` (TimeoutError past it), and a
    cancel ends the attempt at once: no thread is left in a socket. Any other
    answer raises `Refused` with its status (and a 3xx's Location, which is not
    followed); a broken exchange raises OSError or ValueError.
    """
    import base64
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname
    if not host:
        raise ValueError("no host in the URL")
    port = parts.port or (443 if tls else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    shown_host = f"[{host}]" if ":" in host else host
    lines = [f"POST {target} HTTP/1.1", f"Host: {shown_host}" + (f":{parts.port}" if parts.port else "")]
    if parts.username is not None:
        token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode("ascii")
        lines.append(f"Authorization: Basic {token}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close"]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    context = None
    if tls:
        import ssl

        context = ssl.create_default_context()
    writer = None
    async with asyncio.timeout(deadline_s):
        failed: OSError | None = None
        for family, address in await _lookup(host, port):
            try:
                reader, writer = await asyncio.open_connection(
                    address, port, family=family, ssl=context, server_hostname=host if tls else None,
                )
                break
            except OSError as exc:
                failed = exc  # the next address, if any; else this is what is said
        if writer is None:
            raise failed or ConnectionError(f"cannot connect to {host}")
        try:
            writer.write(request)
            await writer.drain()
            status_line = (await reader.readline()).decode("latin-1")
            words = status_line.split(None, 2)
            if len(words) < 2 or not words[0].startswith("HTTP/") or not (words[1].isdigit() and len(words[1]) == 3):
                raise ValueError(f"not an HTTP answer: {status_line.strip()[:80]!r}" if status_line else "the receiver closed the connection without an answer")
            status = int(words[1])
            location = None
            for _ in range(200):
                line = (await reader.readline()).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                name, _, value = line.partition(":")
                if name.strip().lower() == "location":
                    location = _clean(value.strip())
        finally:
            writer.transport.abort()  # nothing of the answer's body is read; no lingering close
    if not 200 <= status < 300:
        raise Refused(status, location if 300 <= status < 400 else None)
    return status


# --- the notifier ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotifyConfig:
    """What `--notify URL` (repeatable) and the SWARMKIT_NOTIFY_* variables configure."""

    urls: tuple[str, ...]
    secret: str
    # The overall deadline of one attempt: connect, send and read the answer's head.
    timeout_s: float = NOTIFY_TIMEOUT_S
    # Attempts before a delivery is a dead letter.
    attempts: int = NOTIFY_ATTEMPTS
    # How long a shutdown gives the attempts in flight, from its signal.
    grace_s: float = SHUTDOWN_GRACE_S

    @property
    def receivers(self) -> dict[str, str]:
        """Each receiver as the store and the logs name it (its URL, password masked) -> its URL."""
        from swarmkit.store import masked

        return {masked(u): u for u in self.urls}


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
        from swarmkit.store import STORE_FAULTS, describe_db_error

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
        from sqlalchemy import exists, literal, or_, select

        from swarmkit.store.models import notification_deliveries as d
        from swarmkit.store.models import notifications as n

        missing_any = or_(*(~exists().where(d.c.notification_id == n.c.id, d.c.receiver == r) for r in self.receivers))
        async with self.store.read() as conn:
            # A read first: most polls find nothing to fan out, and take no write lock for it.
            if (await conn.execute(select(n.c.id).where(n.c.delivered_at.is_(None), missing_any).limit(1))).first() is None:
                return
        if self.store.loc.is_sqlite:
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
        async with self.store.write() as conn:
            for receiver in self.receivers:
                missing = (
                    select(
                        n.c.id, n.c.event_id, n.c.job_id, literal(receiver, d.c.receiver.type), literal(PENDING, d.c.state.type), literal(0, d.c.attempts.type),
                        literal(now, d.c.next_at.type), n.c.created_at, literal(now, d.c.updated_at.type),
                    )
                    .where(n.c.delivered_at.is_(None), ~exists().where(d.c.notification_id == n.c.id, d.c.receiver == receiver))
                    .order_by(n.c.id).limit(FAN_OUT_BATCH)
                )
                cols = ["notification_id", "event_id", "job_id", "receiver", "state", "attempts", "next_at", "created_at", "updated_at"]
                await conn.execute(insert(d).from_select(cols, missing).on_conflict_do_nothing())

    async def _due(self, receiver: str, now: datetime, limit: int):
        from sqlalchemy import exists, select

        from swarmkit.store.models import notification_deliveries as d
        from swarmkit.store.models import notifications as n

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
        if self._flights:
            query = query.where(d.c.id.not_in(list(self._flights)))
        async with self.store.read() as conn:
            return (await conn.execute(query)).all()

    async def _claim(self, row_id: int, next_at: datetime, now: datetime) -> str | None:
        from sqlalchemy import update

        from swarmkit.store.models import notification_deliveries as d

        claim = uuid.uuid4().hex
        async with self.store.write() as conn:
            res = await conn.execute(
                update(d)
                .where(d.c.id == row_id, d.c.state == PENDING, d.c.next_at == next_at)
                .values(next_at=now + timedelta(seconds=self.claim_s), attempts=d.c.attempts + 1, claim=claim, updated_at=now)
            )
        return claim if res.rowcount == 1 else None

    async def _attempt(self, row, receiver: str, claim: str) -> None:
        from swarmkit.store import STORE_FAULTS, describe_db_error

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
            error = _clean(error)
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
        self, row, claim: str, *, status: int | None, error: str | None = None, location: str | None = None, dead: bool = False, delay: float = 0.0,
    ) -> bool:
        """Record the attempt's outcome on its delivery (only while the claim is ours), and settle the notification."""
        from sqlalchemy import update

        from swarmkit.store.models import notification_deliveries as d

        now = store_now()
        values: dict = dict(claim=None, updated_at=now, last_status=status, last_error=error, location=location)
        if error is None:
            values.update(state=DELIVERED, delivered_at=now)
        elif dead:
            values.update(state=DEAD, dead_at=now)
        else:
            values.update(next_at=now + timedelta(seconds=delay))
        async with self.store.write() as conn:
            res = await conn.execute(update(d).where(d.c.id == row.id, d.c.claim == claim, d.c.state == PENDING).values(**values))
            if res.rowcount == 1 and (error is None or dead):
                await _settle_notification(conn, row.notification_id, now)
        return res.rowcount == 1

    async def _abandon(self) -> None:
        """End the attempts still in flight and give their deliveries back: pending, due now, the attempt uncounted."""
        from sqlalchemy import update

        from swarmkit.store import STORE_FAULTS, describe_db_error
        from swarmkit.store.models import notification_deliveries as d

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
                        await conn.execute(
                            update(d).where(d.c.id == rid, d.c.claim == flight.claim, d.c.state == PENDING)
                            .values(claim=None, next_at=now, attempts=d.c.attempts - 1, updated_at=now)
                        )
            log.warning("notifications: %d attempt(s) in flight abandoned at shutdown; they stay pending for the next notifier", len(left))
        except (TimeoutError, *STORE_FAULTS) as exc:
            why = "the store did not answer in time" if isinstance(exc, TimeoutError) else describe_db_error(exc, self.store.loc)
            log.warning("notifications: %d attempt(s) in flight abandoned at shutdown, not released (%s); they are due again %.0fs after their claim", len(left), why, self.claim_s)


async def _settle_notification(conn: AsyncConnection, notification_id: int, now: datetime) -> None:
    """The notification is delivered once none of its deliveries is pending."""
    from sqlalchemy import exists, update

    from swarmkit.store.models import notification_deliveries as d
    from swarmkit.store.models import notifications as n

    await conn.execute(
        update(n)
        .where(n.c.id == notification_id, n.c.delivered_at.is_(None), ~exists().where(d.c.notification_id == notification_id, d.c.state == PENDING))
        .values(delivered_at=now)
    )


# --- what operators see and do: dead letters, retries (the CLI, the API, /metrics) ---------------


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
        conn.execute(S.INSERT_AUDIT, {"b_at": now, "b_actor": actor, "b_action": "notification.retried", "b_job_id": row.job_id, "b_detail": json.dumps(detail, sort_keys=True)})
        outcome[rid] = "retried"
    return outcome


def _count_env(name: str, default: int, most: int) -> int:
    """A whole number from the environment, by the rule of every flag's count (quantities.Count)."""
    from .quantities import BadValue, Count
    from .settings import _bad_env

    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return Count(1, most).parse(raw)
    except BadValue as exc:
        _bad_env(f"{name}={raw!r} {exc}")


def notify_config(urls: list[str] | str | None, environ: Mapping[str, str]) -> NotifyConfig | None:
    """What a verb's --notify (repeatable) configures, checked before any work; the secret comes from
    the environment, never argv. Bad timing variables: one line naming the variable, exit 2."""
    from urllib.parse import urlsplit

    from swarmkit.store import masked

    from .settings import env_number

    if isinstance(urls, str):
        urls = [urls]
    urls = [u for u in urls or () if u]
    if not urls:
        return None
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--notify {masked(url)!r}: expected an http:// or https:// URL")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (a port out of range raises here, not at the first delivery)
        except ValueError as exc:
            raise UsageError(f"--notify {masked(url)!r}: {exc}") from None
        if not parts.hostname:
            raise UsageError(f"--notify {masked(url)!r}: no host")
    shown = [masked(u) for u in urls]
    if len(set(shown)) != len(shown):
        raise UsageError("--notify: the same receiver named twice (URLs that differ only in their password count as one)")
    secret = environ.get(SECRET_ENV, "")
    if len(secret) < 16:
        raise UsageError(f"--notify needs a shared secret of at least 16 characters in {SECRET_ENV} (the receiver checks X-Swarmkit-Signature with it)")
    return NotifyConfig(
        urls=tuple(urls), secret=secret,
        timeout_s=env_number(TIMEOUT_ENV, NOTIFY_TIMEOUT_S, most=3600.0),
        attempts=_count_env(ATTEMPTS_ENV, NOTIFY_ATTEMPTS, most=1000),
        grace_s=shutdown_grace_s(),
    )


def shutdown_grace_s() -> float:
    """SWARMKIT_SHUTDOWN_GRACE: how long a worker or `serve` gives its notification attempts in flight once signalled."""
    from .settings import env_number

    return env_number(GRACE_ENV, SHUTDOWN_GRACE_S, most=3600.0)
