"""A run's events (paged, and as server-sent events to the run's ending) and the audit (paged).

The stream is the event follower (runtime/event_follower.py) that `swarmkit
logs -f` reads by, in SSE frames: by event id, so a client that reconnects with
`Last-Event-ID` gets nothing twice and misses nothing; the follower says when
the run has ended and reads the rest, so the events written with its ending
are sent before the closing `end` event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from swarmkit.runtime import control
from swarmkit.runtime.backoff import Backoff
from swarmkit.runtime.estimates import estimate_of
from swarmkit.runtime.event_follower import EventFollower
from swarmkit.store import STORE_FAULTS
from swarmkit.store.clock import store_now
from swarmkit.store.pages import audit_page
from swarmkit.store.queries import events_after
from swarmkit.store.reads import node_costs, run_views
from swarmkit.store.trail_records import EventRecord, audit_view, event_view

from .dependencies import BadRequest, Ctx, ctx_of, look_for_lost, reader
from .jobs import RUN_REF, RunId
from .schemas import ERRORS, AuditEntry, AuditPage, EstimateAnswer, Event, EventPage

router = APIRouter(tags=["events"], responses=ERRORS)

_MAX_ID = 2**62
_BATCH = 500
_POLL_S = 0.2


def event_of(ev: EventRecord) -> Event:
    return Event(**event_view(ev))


@router.get("/jobs/{job_id}/events", response_model=EventPage, summary="A run's events after an event id, oldest first")
async def job_events(
    request: Request, job_id: str = RunId, after: int = Query(0, ge=0, le=_MAX_ID), limit: int = Query(500, ge=1, le=5000), _actor: str = Depends(reader)
) -> EventPage:
    ctx = ctx_of(request)
    job = await control.resolve_run(ctx.store, job_id)
    rows = await ctx.store.run_read(lambda c: events_after(c, job.id, after, limit + 1))
    page = rows[:limit]
    return EventPage(events=[event_of(e) for e in page], next_cursor=page[-1].id if page else None, has_more=len(rows) > limit)


@router.get("/jobs/{job_id}/estimate", response_model=EstimateAnswer, summary="What a run spent, how fast, and an estimate of its cost at completion")
async def job_estimate(request: Request, job_id: str = RunId, _actor: str = Depends(reader)) -> dict[str, Any]:
    ctx = ctx_of(request)
    job = await control.resolve_run(ctx.store, job_id)
    costs = await ctx.store.run_read(lambda c: node_costs(c, job.flow, job.id))
    return estimate_of(job, costs, store_now()).as_json(job.id)


@router.get("/events", response_model=AuditPage, summary="The audit: every human act, oldest first, paged by cursor")
async def audit(
    request: Request,
    after: int = Query(0, ge=0, le=_MAX_ID, description="next_cursor of the page before"),
    limit: int = Query(100, ge=1, le=1000),
    job_id: str | None = Query(None, pattern=RUN_REF, description="only this run's acts (an id or a unique prefix)"),
    _actor: str = Depends(reader),
) -> AuditPage:
    ctx = ctx_of(request)
    run = (await control.resolve_run(ctx.store, job_id)).id if job_id else None
    rows, more = await ctx.store.run_read(lambda c: audit_page(c, after=after, limit=limit, job_id=run))
    entries = [AuditEntry(**audit_view(r)) for r in rows]
    return AuditPage(events=entries, next_cursor=rows[-1].id if rows else None, has_more=more)


def _frame(data: dict[str, Any], *, event: str | None = None, id: int | None = None) -> str:
    head = (f"id: {id}\n" if id is not None else "") + (f"event: {event}\n" if event else "")
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _sse(ctx: Ctx, job_id: str, after: int) -> AsyncIterator[str]:
    """The event follower (runtime/event_follower.py: what to read, when the run has ended), in SSE frames."""
    loop = asyncio.get_running_loop()
    yield "retry: 2000\n\n"  # the headers go out at once; a client reconnects after two seconds
    last_sent = loop.time()
    follower = EventFollower(job_id, after, slow=_POLL_S, batch=_BATCH)
    outage = Backoff()
    while True:
        try:
            await look_for_lost(ctx)
            got = await follower.poll(ctx.store)
            # Once ended, the rest: the events written with the ending are sent before the `end` event.
            events = got.events + (await follower.rest(ctx.store) if got.ended else [])
            for ev in events:
                yield _frame(event_of(ev).model_dump(), id=ev.id)
            if events:
                last_sent = loop.time()
            outage.reset()
            if got.ended:
                job = got.job
                if job is None:
                    yield _frame({"status": None, "detail": f"run {job_id[:8]} no longer exists"}, event="end")
                    return
                view = (await ctx.store.run_read(partial(run_views, jobs=[job]), here=True))[0]
                yield _frame({"status": job.status, "display_status": view["display_status"], "job": view}, event="end")
                return
            delay = follower.next_delay(got)
        except STORE_FAULTS:
            # A stream is a long-running reader: ride out a store that is away for a while.
            ctx.metrics.store_errors += 1
            yield ": the store is unavailable; still trying\n\n"
            last_sent = loop.time()
            delay = outage.next()
        if ctx.closing.is_set():
            return  # the server is shutting down: the client reconnects with Last-Event-ID
        if loop.time() - last_sent >= ctx.keepalive_s:
            yield ": keep-alive\n\n"
            last_sent = loop.time()
        await asyncio.sleep(delay)


@router.get(
    "/jobs/{job_id}/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "one event per run event (`id:` is its id), then `event: end`"}},
    summary="A run's events as server-sent events, ending with the run's ending",
)
async def stream(
    request: Request,
    job_id: str = RunId,
    after: int = Query(0, ge=0, le=_MAX_ID, description="start after this event id (Last-Event-ID wins)"),
    last_event_id: str | None = Header(None, alias="Last-Event-ID", max_length=20),
    _actor: str = Depends(reader),
) -> StreamingResponse:
    ctx = ctx_of(request)
    job = await control.resolve_run(ctx.store, job_id)  # 404 before any byte of the stream
    if last_event_id is not None and last_event_id.strip():
        if not last_event_id.strip().isdigit() or int(last_event_id) > _MAX_ID:
            raise BadRequest(422, f"Last-Event-ID {last_event_id!r}: expected an event id")
        after = int(last_event_id)
    return StreamingResponse(_sse(ctx, job.id, after), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
