"""The one backoff for riding out a store that is away: the pause before each new try, doubling from
`first` up to `cap`, back to `first` once the store answers.

`swarmkit logs -f` and every verb that follows (cli/common.py `riding_out`, cli/logs.py), the HTTP
API's event stream (api/events.py), the console's poll (console/poll_schedule.py) and a host's
retried writes (host_writes.py `retry_transient`) all wait by it.
"""

from __future__ import annotations

# The first pause after a fault, and the longest: a store back after a blip is used again within a
# second; one away for long is tried every few seconds, never hammered.
FIRST_S = 0.3
CAP_S = 5.0


class Backoff:
    def __init__(self, first: float = FIRST_S, cap: float = CAP_S) -> None:
        self.first = first
        self.cap = max(cap, first)
        self.failures = 0  # faults in a row
        self._next = first

    def next(self) -> float:
        """The pause after one more fault in a row."""
        delay = self._next
        self.failures += 1
        self._next = min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        """The store answered: the next fault waits `first` again."""
        self.failures = 0
        self._next = self.first
