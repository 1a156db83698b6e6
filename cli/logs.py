"""`swarmkit logs RUN_ID`: a run's events, the last N, since a time, followed with -f until the run ends."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING

# Imported with this module, before the store is opened: its connection is not left idle meanwhile.
from swarmkit.runtime import control
from swarmkit.runtime.backoff import Backoff
from swarmkit.runtime.event_follower import EventFollower
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.text import plain
from swarmkit.store import STORE_FAULTS, describe_db_error, is_transient
from swarmkit.store.clock import store_now
from swarmkit.store.queries import events_before
from swarmkit.store.records import rfc3339
from swarmkit.store.trail_records import event_view

from .store_access import err, riding_out, with_store

if TYPE_CHECKING:
    from swarmkit.store import Store
    from swarmkit.store.trail_records import EventRecord


class EventLines:
    """An event as `swarmkit logs` prints it."""

    def __init__(self, output: str, timestamps: bool):
        self.output = output
        self.timestamps = timestamps

    def __call__(self, ev: EventRecord) -> str:
        if self.output == "json":
            # json.dumps (ASCII) escapes every control and bidi character: the line stays inert text.
            return json.dumps(event_view(ev))
        t = rfc3339(ev.at) + " " if self.timestamps else ""
        if ev.kind == "log":
            return f"{t}{plain(ev.node or '-', 20)} | {plain(ev.text)}"
        if ev.kind == "node.started":
            return f"{t}── {plain(ev.text)} ──"
        return f"{t}[{ev.kind}] {plain(ev.text)}"


async def cmd_logs(args) -> int:
    async def go(store: Store) -> int:
        job = await _riding_out(args, store, lambda: control.resolve_run(store, args.run_id))
        line = EventLines(args.output, args.timestamps)
        cutoff = store_now() - args.since if args.since else None
        after = 0
        if args.tail is not None:
            # The last N: one indexed read of the newest events, however long the log.
            tail = await _riding_out(args, store, lambda: store.run_read(lambda c: events_before(c, job.id, None, args.tail))) if args.tail else []
            _print([e for e in tail if cutoff is None or e.at >= cutoff], line)
            if tail:
                after = tail[-1].id
            else:
                after = await _riding_out(args, store, lambda: _last_id(store, job.id))
        return await _follow(store, args, job.id, job.short_id, after, line, cutoff)

    return await with_store(args, go)


async def _riding_out(args, store: Store, read):
    """`read()`, again after a transient fault when following (-f rides out a store that is away); once otherwise."""
    if not args.follow:
        return await read()
    return await riding_out(read, lambda exc: f"lost the store ({describe_db_error(exc, store.loc)}); trying again")


async def _last_id(store: Store, job_id: str) -> int:
    last = await store.run_read(lambda c: events_before(c, job_id, None, 1))
    return last[-1].id if last else 0


def _print(events: list[EventRecord], line: EventLines) -> None:
    if events:
        sys.stdout.write("".join(line(ev) + "\n" for ev in events))
        sys.stdout.flush()


async def _follow(store: Store, args, job_id: str, short_id: str, after: int, line: EventLines, cutoff) -> int:
    settings = Settings.from_env()
    follower = EventFollower(job_id, after, slow=0.3)
    outage: str | None = None
    backoff = Backoff()
    while True:
        try:
            got = await follower.poll(store)
            _print([e for e in got.events if cutoff is None or e.at >= cutoff], line)
            if outage is not None:
                err(f"the store answers again; following {short_id}")
                outage = None
                backoff.reset()
            if got.more:
                continue
            if not args.follow:
                return ExitCode.OK
            current = got.job
            if got.ended:
                _print(await follower.rest(store), line)  # events written just before the end
                if args.output != "json":
                    print(f"-- {short_id} is {current.status if current else 'gone'} --")
                return ExitCode.OK
            await control.mark_lost(store, settings.lease_s)
            delay = follower.next_delay(got)
        except STORE_FAULTS as exc:
            # A tail is a long-running reader: ride out a dropped
            # connection or a store that is away for a while.
            if not args.follow or not is_transient(exc):
                raise
            if outage is None:
                outage = describe_db_error(exc, store.loc)
                err(f"lost the store ({outage}); trying again")
            delay = backoff.next()
        await asyncio.sleep(delay)
