"""Acts on many runs at once: by filter (`swarmkit stop --flow nightly`, `POST /jobs/stop`) or on the
console's marked runs, each with the same one-run rules (`acts.perform`), one after the other.

One batch id ties their audit entries together (`journal.BATCH`, written into each entry's detail). A run
another process acted on meanwhile is answered by its own rules ("already stopped": it needed nothing), so
no run is acted on twice and no refusal is lost: every run named has its outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from swarmkit.store.clock import store_now
from swarmkit.store.ids import new_id
from swarmkit.store.reads import list_jobs
from swarmkit.store.statuses import ACTIVE_STATUSES
from swarmkit.store.store_errors import is_store_fault

from .act_base import DONE, REFUSED, ActResult
from .act_table import Act
from .acts import perform
from .errors import SwarmkitError
from .journal import BATCH
from .run_filter import RunFilter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store
    from swarmkit.store.records import JobRecord

# Every ended run a filter may name (a filter reads them all, as `status --status completed` does).
_EVERY = 10**9


@dataclass(frozen=True)
class Outcome:
    """One run's outcome in a batch: the act's result, or why there is none (the run gone, the store away)."""

    short_id: str
    result: ActResult | None
    error: str = ""

    @property
    def refused(self) -> bool:
        return self.result is None or self.result.code != DONE

    @property
    def words(self) -> str:
        return self.result.message if self.result is not None else self.error


@dataclass(frozen=True)
class Batch:
    id: str
    outcomes: tuple[Outcome, ...]

    @property
    def code(self) -> int:
        """0 when every run was acted on or needed nothing, 1 when any was refused."""
        return REFUSED if any(o.refused for o in self.outcomes) else DONE


def tally(outcomes: list[Outcome] | tuple[Outcome, ...]) -> tuple[list[Outcome], list[Outcome], list[Outcome]]:
    """(acted on, needed nothing, refused): how every door counts a batch."""
    done = [o for o in outcomes if o.result is not None and o.result.changed]
    same = [o for o in outcomes if not o.refused and not (o.result is not None and o.result.changed)]
    return done, same, [o for o in outcomes if o.refused]


def summary(act: Act, outcomes: list[Outcome] | tuple[Outcome, ...]) -> str:
    """'3 stopped, 1 needed nothing, 1 refused'."""
    done, same, refused = tally(outcomes)
    parts = [f"{len(done)} {act.done}"] + ([f"{len(same)} needed nothing"] if same else []) + ([f"{len(refused)} refused"] if refused else [])
    return ", ".join(parts)


async def matching(store: Store, act: Act, runs: RunFilter) -> list[JobRecord]:
    """The runs `runs` names that `act` applies to, newest first (a run it does not apply to needs nothing)."""
    if not (runs.narrows or runs.all):
        return []
    now = store_now()
    # Every act applies to runs not yet ended only (act_table): the ended ones, most of a store, are not read.
    ended = not act.applies_to <= ACTIVE_STATUSES
    found = await store.run_read(lambda conn: list_jobs(conn, include_ended=ended, ended_limit=_EVERY))
    return [j for j in found if j.status in act.applies_to and runs.keeps(j, now)]


async def act_on_runs(store: Store, act: Act, run_ids: list[str], *, actor: str | None = None, batch: str | None = None, **options: Any) -> Batch:
    """`act` on each run, one after the other, by the one-run rules; every run has its outcome."""
    batch = batch or new_id()[:12]
    token = BATCH.set(batch)
    outcomes: list[Outcome] = []
    try:
        for rid in run_ids:
            try:
                res = await perform(act, store, rid, actor=actor, **options)
                outcomes.append(Outcome(res.job.short_id if res.job else rid[:8], res))
            except SwarmkitError as exc:  # the run is gone, or its id names no run
                outcomes.append(Outcome(rid[:8], None, str(exc)))
            except Exception as exc:
                if not is_store_fault(exc):
                    raise
                outcomes.append(Outcome(rid[:8], None, f"could not {act.verb} {rid[:8]}: {type(exc).__name__}: {str(exc)[:200]}"))
    finally:
        BATCH.reset(token)
    return Batch(batch, tuple(outcomes))
