"""The store's clock: the one time that decides leases, stalls and ages, whatever a host's clock says.

On PostgreSQL the store's time is the server's. A process asks for it once
(`SELECT clock_timestamp()`, halving the round trip) and then runs it on its
own boot clock, which no NTP step, `date -s` or libfaketime offset moves and
which keeps counting through a suspended VM; it asks again every minute or so.
A host whose wall clock is minutes off therefore stamps and judges with the
server's time, and its offset is recorded for the operator to see.

On SQLite every process is on the one machine: the store's time is that
machine's wall clock, but a lease is judged on its boot clock (the
`heartbeat_mono` columns), so a clock step does not make a healthy run look
dead. A heartbeat from a boot clock ahead of ours is from before a reboot:
stale.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

# How long an anchor is trusted before it is measured again: the boot clock
# and the server's drift apart by parts per million, a few milliseconds a day.
RESYNC_S = 60.0
# A worker whose clock is further than this from the store's is named in warnings.
SKEW_WARN_S = 5.0

try:
    _BOOT = time.CLOCK_BOOTTIME  # counts through suspend, unlike CLOCK_MONOTONIC

    def boot_clock() -> float:
        return time.clock_gettime(_BOOT)
except AttributeError:  # not Linux
    boot_clock = time.monotonic


# (the store's time at the anchor, the boot clock then)
_anchor: tuple[datetime, float] | None = None


def wall_now() -> datetime:
    return datetime.now(UTC)


def store_now() -> datetime:
    """The store's time as this process knows it (its wall clock until a PostgreSQL store has been asked)."""
    anchor = _anchor
    if anchor is None:
        return datetime.now(UTC)
    at, boot = anchor
    return at + timedelta(seconds=boot_clock() - boot)


def offset_s() -> float:
    """This host's wall clock minus the store's, in seconds (0 until a PostgreSQL store has been asked)."""
    return (wall_now() - store_now()).total_seconds() if _anchor is not None else 0.0


def anchor_due() -> bool:
    anchor = _anchor
    return anchor is None or boot_clock() - anchor[1] > RESYNC_S


def anchor(server: datetime, t0: float, t1: float) -> None:
    """Anchor the store's time on the server's (PostgreSQL): `server` was read between boot clock
    readings `t0` and `t1` (store.py asks it); the round trip is halved."""
    global _anchor
    if server.tzinfo is None:
        server = server.replace(tzinfo=UTC)
    _anchor = (server.astimezone(UTC) + timedelta(seconds=(t1 - t0) / 2), t1)


def forget() -> None:
    """Drop the anchor (a test that opens stores of several kinds in one process)."""
    global _anchor
    _anchor = None


def beat() -> dict[str, Any]:
    """The values a heartbeat stamps: the store's time, and the boot clock for a one-machine store."""
    return {"heartbeat_at": store_now(), "heartbeat_mono": boot_clock()}


def age_params(age_s: float, sqlite: bool, now: datetime | None = None) -> dict[str, Any]:
    """`now`: judge by another clock than the store's (a console frozen in time for its snapshots)."""
    at = now or store_now()
    params: dict[str, Any] = {"b_cutoff": at - timedelta(seconds=age_s), "b_now": at}
    if sqlite:
        boot = boot_clock()
        params.update(b_mono_cutoff=boot - age_s, b_mono_now=boot, b_mono_future=boot + 1.0)
    return params
