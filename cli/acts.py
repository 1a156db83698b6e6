"""`swarmkit stop | approve | resume | cancel RUN_ID`: the four acts on one run, each one conditional UPDATE in control.py."""

from __future__ import annotations

from .common import ExitCode, add_run_id, add_store, add_workspace, err, verb, with_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    from swarmkit.store import Store

ACTS = {
    "stop": (
        "stop a run at its next agent boundary (resumable)",
        "Ask a run to stop before its next agent. The agent in flight finishes; the run is then stopped, "
        "checkpointed, and may be resumed with `swarmkit resume` or `swarmkit run --resume`. With --now the node in "
        "flight is interrupted (the cancel's escalation) and the run parks before it: that node's work is lost and it runs again from its start on resume.",
        ["swarmkit stop a46614b1", "swarmkit stop --now a46614b1", "swarmkit stop a46614b1 --store postgresql://db.internal/swarmkit"],
    ),
    "approve": (
        "approve a run waiting at a gate",
        "Approve the gate a deferred run waits at (an `approve = true` agent). A worker, or "
        "`swarmkit run --resume`, then carries the run on from that agent.",
        ["swarmkit approve a46614b1"],
    ),
    "resume": (
        "queue a stopped, deferred or lost run for a worker",
        "Put a stopped, deferred or lost run back in the queue, from its last checkpoint, for any worker to claim.",
        ["swarmkit resume a46614b1", "swarmkit resume a46614b1 ~/work/site"],
    ),
    "cancel": (
        "end a run for good (destroys its workspaces unless --keep)",
        "End a run for good: a running run is ended at once by its host; any other is cancelled here. "
        "Its workspaces are destroyed unless --keep. A cancelled run cannot be resumed.",
        ["swarmkit cancel a46614b1", "swarmkit cancel a46614b1 --keep"],
    ),
}


def add_parsers(sub) -> None:
    for name, (summary, description, examples) in ACTS.items():
        p = verb(sub, name, summary, description, examples)
        add_store(p)
        add_run_id(p)
        add_workspace(p)
        if name == "cancel":
            p.add_argument("--keep", action="store_true", help="keep the run's workspaces")
        if name == "stop":
            p.add_argument("--now", action="store_true", help="interrupt the node in flight and park the run before it (that node's work is lost; it runs again on resume)")


async def cmd_act(args) -> int:
    from swarmkit.runtime import control
    from swarmkit.runtime.settings import Settings
    from swarmkit.runtime.text import plain_lines

    async def go(store: Store) -> int:
        if args.verb == "stop":
            res = await control.stop(store, args.run_id, now=args.now)
        elif args.verb == "cancel":
            res = await control.cancel(store, args.run_id, keep=args.keep)
        elif args.verb == "approve":
            res = await control.approve(store, args.run_id)
        else:
            res = await control.resume(store, args.run_id)
        # What was done goes to stdout; a refusal and a warning to stderr, where scripts look for them.
        if res.code == ExitCode.OK:
            print(plain_lines(res.message))
        else:
            err(res.message)
        if res.changed and args.verb in ("approve", "resume"):
            if await control.live_worker_count(store, Settings.from_env().lease_s) == 0:
                err("warning: " + control.no_worker_hint(res.job.short_id if res.job else args.run_id))
        return res.code

    return await with_store(args, go)
