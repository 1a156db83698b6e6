"""What every act on a run shares: the run it names (by id or unique prefix) and what it answers.

runtime/acts.py (stop, resume, approve, cancel) and runtime/stop_later.py (the stops set for later)
build on these; the doors reach them through `control`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from swarmkit.store.reads import get_job, jobs_by_prefix, run_view, run_views
from swarmkit.store.records import JobRecord

from .errors import AmbiguousRun, RunNotFound
from .exit_code import ExitCode

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store


# Exit codes: 0 done or no-op, 1 refused or failed, 2 bad usage or unknown run.
# The exit codes the CLI gives for an act's result: the one ExitCode list.
DONE, REFUSED, USAGE = ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE
# How many times an act that lost a race to another writer looks again.
RETRIES = 20


@dataclass(frozen=True)
class ActResult:
    """What an act did, in words an operator reads as they are."""

    code: int
    changed: bool
    message: str
    job: JobRecord | None = None
    # A stop or cancel that found the same request already pending (re-reported, nothing stacked).
    already: bool = False
    # The run's merged view (store.reads.run_views) when the act wrote nothing: read with the run, so a
    # door answers an idempotent repeat without reading again.
    view: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.code == DONE


def at_words(value: datetime | None) -> str:
    # strftime's "%Y-%m-%d %H:%M:%S" at a fraction of its cost (it was a twentieth of an HTTP stop's repeat).
    return value.isoformat(" ", "seconds")[:19] + " UTC" if value else "an unknown time"


def _matches(conn: Any, ref: str) -> list[JobRecord]:
    """The runs `ref` names: the one with that id, else up to 11 whose ids begin with it (newest first)."""
    job = get_job(conn, ref.lower()) if len(ref) == 32 else None
    return [job] if job is not None else jobs_by_prefix(conn, ref, limit=11)


async def resolve_run(store: Store, ref: str | JobRecord) -> JobRecord:
    """A run by its id or any unique prefix of it (in either case: ids are hex). Nothing is stripped:
    `abc ` is not `abc`. A record is its own run, already read (`perform` reads it with its view)."""
    if isinstance(ref, JobRecord):
        return ref
    return (await resolved_with_view(store, ref, False))[0]


async def resolve_view(store: Store, ref: str) -> dict[str, Any]:
    """`resolve_run`'s run as its merged view (store.reads.run_views), read with it."""
    return (await resolved_with_view(store, ref, True))[1]


async def resolved_with_view(store: Store, ref: str, view: bool) -> tuple[JobRecord, Any]:
    ref = ref or ""
    if not ref or len(ref) > 32 or any(ch not in "0123456789abcdefABCDEF" for ch in ref):
        raise RunNotFound(f"no run matches {ref!r}", store.loc.display)  # no id holds anything else: no store read

    def read(conn: Any) -> tuple[list[JobRecord], Any]:
        if view and len(ref) == 32 and (both := run_view(conn, ref.lower())) is not None:
            return [both[0]], both[1]
        found = _matches(conn, ref)
        return found, run_views(conn, found)[0] if view and len(found) == 1 else None

    # A short read by the primary key (or its prefix): on this thread (Store.run_read's `here`).
    found, shown = await store.run_read(read, here=True)
    if not found:
        raise RunNotFound(f"no run matches {ref!r}", store.loc.display)
    if len(found) > 1:
        listed = ", ".join(f"{j.short_id} ({j.status}, {j.flow})" for j in found[:10])
        more = " and more" if len(found) > 10 else ""
        raise AmbiguousRun(f"{ref!r} matches {len(found)} runs: {listed}{more}; give more of the id", [j.id for j in found[:10]])
    return found[0], shown


async def reload_run(store: Store, job_id: str) -> JobRecord:
    job = await store.run_read(lambda c: get_job(c, job_id), here=True)
    if job is None:  # deleted under us
        raise RunNotFound(f"run {job_id[:8]} no longer exists", store.loc.display)
    return job
