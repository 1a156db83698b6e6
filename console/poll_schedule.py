"""When the main screen polls next: every interval, at once when asked (never two at once), backing off while the store fails."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.timer import Timer

from swarmkit.runtime.backoff import CAP_S, Backoff

# A poll that takes longer than this is reported: the store may be locked.
SLOW_POLL_S = 3.0


class PollSchedule:
    """Arms one timer for the next poll; the owner's `poll` is an exclusive worker that calls `started` and `finished`."""

    def __init__(self, interval: float, set_timer: Callable[[float, Callable[[], object]], Timer], poll: Callable[[], object]) -> None:
        self.interval = interval
        self._set_timer = set_timer
        self._poll = poll
        # After failures, the store's one outage backoff (runtime/backoff.py), from the interval up.
        self._backoff = Backoff(interval, max(interval, min(CAP_S, interval * 10)))
        self.retry_delay: float | None = None  # the delay before the next try, while failing
        self.polling_since: float | None = None  # monotonic start of the poll in flight
        self._again = False
        self._timer: Timer | None = None
        self.closed = False

    def now(self) -> None:
        """Poll as soon as possible: at once, or right after the poll in flight."""
        if self.closed:
            return
        if self.polling_since is not None:
            self._again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._poll()

    def started(self) -> None:
        self._timer = None
        self.polling_since = time.monotonic()

    def ended(self) -> None:
        """The poll's read is over (good or bad); what it read is applied after."""
        self.polling_since = None

    @property
    def failures(self) -> int:
        """Polls failed in a row."""
        return self._backoff.failures

    def finished(self, ok: bool, soon: bool = False) -> None:
        """Arm the next poll: the interval after a good one (`soon`: 50 ms, the rest of a partial
        first read); after failures, doubling up to a cap."""
        if ok:
            self._backoff.reset()
            self.retry_delay = None
            delay = 0.05 if soon else self.interval
        else:
            delay = self._backoff.next()
            self.retry_delay = round(delay, 1)
        if self._again:
            self._again = False
            delay = 0.01  # Textual timers need a delay above zero
        if not self.closed:
            self._timer = self._set_timer(delay, self._poll)

    def slow_for(self) -> float | None:
        """How long the poll in flight has waited, once that is longer than `SLOW_POLL_S`."""
        if self.polling_since is None:
            return None
        waited = time.monotonic() - self.polling_since
        return waited if waited >= SLOW_POLL_S else None

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
