"""Which runs a filter names: `swarmkit status`'s list, the acts by filter (`swarmkit stop --flow nightly`),
`POST /jobs/stop`: one rule for every door.

`statuses` are shown statuses (running, stalled, stopping, ...) or stored ones; `flows` and `nodes` match
a run's flow and the node it is at; `since` keeps runs changed within that long, `older_than` those not
changed within it (its complement). A filter with none of them names no run unless it says `all`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from swarmkit.store.records import JobRecord


@dataclass(frozen=True)
class RunFilter:
    statuses: frozenset[str] = field(default_factory=frozenset)
    flows: frozenset[str] = field(default_factory=frozenset)
    nodes: frozenset[str] = field(default_factory=frozenset)
    since: timedelta | None = None
    older_than: timedelta | None = None
    all: bool = False

    @classmethod
    def of(
        cls, statuses: Iterable[str] = (), flows: Iterable[str] = (), nodes: Iterable[str] = (),
        since: timedelta | None = None, older_than: timedelta | None = None, every: bool = False,
    ) -> RunFilter:
        """From a door's flags: statuses may come comma-separated (`--status running,stalled`)."""
        split = frozenset(s.strip() for v in statuses for s in v.split(",") if s.strip())
        return cls(split, frozenset(flows), frozenset(nodes), since, older_than, every)

    @property
    def narrows(self) -> bool:
        """It says something of the runs it keeps (else it keeps every run: only with `all`)."""
        return bool(self.statuses or self.flows or self.nodes or self.since or self.older_than)

    def keeps(self, job: JobRecord, now: datetime) -> bool:
        if self.statuses and job.status not in self.statuses and job.display_status(now) not in self.statuses:
            return False
        if self.flows and job.flow not in self.flows:
            return False
        if self.nodes and job.current_node not in self.nodes:
            return False
        if self.since is not None and job.updated_at < now - self.since:
            return False
        return self.older_than is None or job.updated_at < now - self.older_than

    def words(self) -> str:
        """The filter as the CLI's flags say it: `--flow nightly --status running`."""
        parts = [f"--status {','.join(sorted(self.statuses))}"] if self.statuses else []
        parts += [f"--flow {f}" for f in sorted(self.flows)] + [f"--node {n}" for n in sorted(self.nodes)]
        parts += [f"--since {_span(self.since)}"] if self.since else []
        parts += [f"--older-than {_span(self.older_than)}"] if self.older_than else []
        return " ".join(parts) or ("--all" if self.all else "(no filter)")


def _span(d: timedelta) -> str:
    s = d.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"
