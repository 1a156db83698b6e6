"""What the run table's rows need from the store besides the poll, read off it in workers of their own:
a stopping run's node's usual duration (its ETA), and what a node of each flow costs (the runs' estimated
cost at completion, which `$` sorts on). A row shows what it has meanwhile, and is made again when the
read is back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work

from swarmkit.widgets.run_table import RunTable

if TYPE_CHECKING:
    from datetime import datetime

    from swarmkit.store.records import JobRecord
    from swarmkit.widgets.run_row import RunRow

    from .node_costs import NodeCosts
    from .poller import Snapshot
    from .store_link import StoreLink
    from .usual_durations import UsualDurations

log = logging.getLogger("swarmkit.console")


class SideReads:
    """Mixed into the main screen (console/main_screen.py), which holds what these read into."""

    if TYPE_CHECKING:
        usual: UsualDurations
        costs: NodeCosts
        estimate_sort: bool
        jobs: dict[str, JobRecord]
        link: StoreLink
        closing: bool
        _row_at: datetime | None

        def part(self, kind: Any, selector: str | None = None) -> Any: ...

        def _run_row(self, job: JobRecord, at: datetime) -> RunRow: ...

    def read_aside(self, snap: Snapshot) -> None:
        """After a poll: what its rows need that it did not read."""
        if snap.stop_asked and (wanted := self.usual.wanted(snap.stop_asked, snap.at)):
            self._read_usual(wanted)
        if self.estimate_sort and (flows := self.costs.wanted(self.jobs.values())):
            self._read_costs(flows)

    def sorted_on_estimate(self) -> None:
        """`$`: the table sorts on each run's estimated cost at completion; its flows' node costs are read for it."""
        if flows := self.costs.wanted(self.jobs.values()):
            self._read_costs(flows)

    @work(group="costs")
    async def _read_costs(self, flows: set[str]) -> None:
        """What a node of each flow costs; the rows of its runs sort on their estimate after (meanwhile on their cost)."""
        if await self._aside(self.costs.read, flows, "node costs", lambda j: j.flow in flows) and self.estimate_sort:
            table = self.part(RunTable)
            table.sort_by("estimate", table.sort_reverse)

    @work(group="usual")
    async def _read_usual(self, wanted: dict[tuple[str, str], str]) -> None:
        """A stopping run's node: how long it usually takes; its row shows the ETA after (meanwhile the node's time alone)."""
        await self._aside(self.usual.read, wanted, "usual node durations", lambda j: (j.flow, j.current_node) in wanted)

    async def _aside(self, read: Callable[[Any, Any], None], what: Any, words: str, mine: Callable[[JobRecord], bool]) -> bool:
        """`read(conn, what)` in a read transaction off the poll, then the rows of the runs `mine` picks made
        again with what it read. False: the read failed (said in the log) or the screen is going."""

        async def go() -> None:
            store = await self.link.get()
            async with store.read() as conn:
                await conn.run_sync(read, what)

        try:
            await self.link.shielded(go())
        except Exception as exc:
            log.info("reading %s failed: %s", words, exc)
            return False
        if self._row_at is None or self.closing:
            return False
        at = self._row_at
        self.part(RunTable).show(list(self.jobs), {j.id: self._run_row(j, at) for j in self.jobs.values() if mine(j)})
        return True
