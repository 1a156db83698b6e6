"""The act that sets stops for later: `swarmkit stop ID --when 'cost>2.5' | --after NODE | --before NODE | --clear`.

What they mean, and how a host asks them, is runtime/stop_conditions.py's. Setting one is one conditional
UPDATE of the run's list (compared with the list read, so that one set meanwhile by another process is
never lost), with its audit row and event in the same transaction; the act then answers as the others do
(runtime/act_base.py). A run not yet ended may carry them: one stopped, deferred or lost keeps them for
its next host.
"""

from __future__ import annotations

from swarmkit.store.clock import store_now
from swarmkit.store.named import S
from swarmkit.store.records import JobRecord, rfc3339
from swarmkit.store.statuses import TERMINAL_STATUSES

from .act_base import DONE, REFUSED, RETRIES, USAGE, ActResult, reload_run, resolve_run
from .errors import FlowError
from .journal import record_audit, record_event
from .settings import default_actor
from .steps import step_words
from .stop_conditions import AFTER, BEFORE, KINDS, MOST, WHEN, Later, StopConditionError, condition, dump, load, shown

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from swarmkit.store import Store


def _placed(job: JobRecord, kind: str, what: str) -> str | None:
    """What is wrong with a stop --after/--before NODE on `job`, or None: the node must be one of its
    flow's, and its boundary still ahead."""
    from .flow import parse_flow  # late: flows (and tomllib) load only where a run's flow is read

    try:
        names = [a.name for a in parse_flow(job.flow_source, job.flow_path).agents]
    except FlowError as exc:
        return f"its flow cannot be read here ({exc})"
    if what not in names:
        return f"its flow {job.flow!r} has no agent {what!r}; its agents are {', '.join(names)}"
    at = names.index(what)
    # `step`: the node in flight (running) or the next to run (any other status).
    if kind == AFTER and at == len(names) - 1:
        return f"{what} is its flow's last agent: the run ends after it, with no boundary to stop at (stop --before {what} stops before it)"
    if at < job.step or (kind == BEFORE and at == job.step):
        return f"it is already at or past {what} (it is at agent {step_words(job.step, job.steps, job.current_node, None)})"
    return None


async def stop_later(store: Store, ref: str | JobRecord, *, kind: str, what: str, actor: str | None = None) -> ActResult:
    """Keep a stop for later on the run: `kind` when (`what`: a condition such as `cost>2.5`), after or
    before (`what`: a node of its flow). Its host asks it at the first boundary where it holds."""
    assert kind in KINDS
    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    what = what.strip()
    if kind == WHEN:
        try:
            condition(what)
        except StopConditionError as exc:
            return ActResult(USAGE, False, str(exc), job)
        what = what.replace(" ", "")
    for _ in range(RETRIES):
        sid = job.short_id
        if job.status in TERMINAL_STATUSES:
            return ActResult(DONE, False, f"{sid} is {job.status}; nothing to stop.", job)
        if kind != WHEN and (wrong := _placed(job, kind, what)) is not None:
            return ActResult(REFUSED, False, f"cannot set stop --{kind} {what} on {sid}: {wrong}.", job)
        kept = load(job.stop_when)
        same = next((s for s in kept if (s.kind, s.what) == (kind, what)), None)
        if same is not None:
            return ActResult(DONE, False, f"stop --{kind} {what} is already set for {sid} (by {same.by} at {same.at}).", job, already=True)
        if len(kept) >= MOST:
            return ActResult(REFUSED, False, f"cannot set stop --{kind} {what} on {sid}: it already has {MOST} stops set for later; clear them with `swarmkit stop {sid} --clear`.", job)
        at = store_now()
        later = Later(kind, what, actor, rfc3339(at))
        async with store.write() as conn:
            moved = (await conn.execute(S.SET_STOP_WHEN, {"b_id": job.id, "b_old": job.stop_when, "b_when": dump([*kept, later]), "b_at": at})).rowcount
            if moved == 1:
                await record_audit(conn, actor, "run.stop_set", job.id, {"kind": kind, "what": what}, at=at)
                await record_event(conn, job.id, "run.stop_set", later.words(), at=at)
        if moved == 1:
            where = {
                WHEN: f"at the first agent boundary where {what} holds",
                AFTER: f"at the boundary after {what}",
                BEFORE: f"at the boundary before {what}",
            }[kind]
            return ActResult(DONE, True, f"stop --{kind} {what} set for {sid}: it stops {where}, resumable. `swarmkit stop {sid} --clear` takes it off.", await reload_run(store, job.id))
        job = await reload_run(store, job.id)  # lost the race: look again
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the stop; try again.", job)


async def clear_stops(store: Store, ref: str | JobRecord, *, actor: str | None = None) -> ActResult:
    """Take off every stop set for later on the run (a stop already asked for is not one of them)."""
    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    for _ in range(RETRIES):
        sid = job.short_id
        kept = load(job.stop_when)
        if not kept:
            return ActResult(DONE, False, f"no stops are set for later on {sid}; nothing to clear.", job)
        at = store_now()
        async with store.write() as conn:
            moved = (await conn.execute(S.SET_STOP_WHEN, {"b_id": job.id, "b_old": job.stop_when, "b_when": None, "b_at": at})).rowcount
            if moved == 1:
                await record_audit(conn, actor, "run.stops_cleared", job.id, {"stops": shown(job.stop_when)}, at=at)
                await record_event(conn, job.id, "run.stops_cleared", f"stops set for later cleared by {actor}: {shown(job.stop_when)}", at=at)
        if moved == 1:
            return ActResult(DONE, True, f"cleared {len(kept)} stop{'s' if len(kept) != 1 else ''} set for later on {sid}: {shown(job.stop_when)}.", await reload_run(store, job.id))
        job = await reload_run(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the clear; try again.", job)
