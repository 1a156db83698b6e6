"""What a hosting process measures of its own runs, for `GET /metrics`: boundary checks, stop reactions, heartbeats.

Plain counters in this process, no client library: the executor observes,
`swarmkit serve` renders them (a worker has no HTTP door, so its figures stay
in its process). Observing is a few additions: nothing here may slow the
boundary it measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Histogram:
    name: str
    help: str
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.total += value
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
                return
        self.counts[-1] += 1

    def lines(self) -> list[str]:
        """The histogram in the Prometheus text format."""
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for edge, n in zip(self.buckets, self.counts):
            cumulative += n
            out.append(f'{self.name}_bucket{{le="{edge}"}} {cumulative}')
        cumulative += self.counts[-1]
        out.append(f'{self.name}_bucket{{le="+Inf"}} {cumulative}')
        out.append(f"{self.name}_sum {self.total:.6f}")
        out.append(f"{self.name}_count {cumulative}")
        return out


_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_SLOW = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)

BOUNDARY = Histogram("swarmkit_boundary_check_seconds", "The node boundary's write transaction (checkpoint and flag read), as this host ran it.", _FAST)
STOP_REACTION = Histogram("swarmkit_stop_reaction_seconds", "From a stop's request to the boundary that honoured it, on the store's clock.", _SLOW)
HEARTBEAT_INTERVAL = Histogram("swarmkit_heartbeat_interval_seconds", "Between two renewals of a run's lease by this host (its lag when above the heartbeat period).", _FAST + (5.0, 10.0))

ALL = (BOUNDARY, STOP_REACTION, HEARTBEAT_INTERVAL)
