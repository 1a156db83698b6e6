"""`swarmkit notifications [list|retry]`: each notification's delivery to each receiver, dead letters, and retrying them."""

from __future__ import annotations

import argparse

from .common import ExitCode, add_store, add_workspace, err, verb, with_store
from .quantities import Count

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    from swarmkit.store import Store

HEADERS = ("ID", "STATE", "RUN", "KIND", "RECEIVER", "ATTEMPTS", "LAST", "WHEN")
NOTIFICATIONS_SCHEMA = 1
STATES = ("pending", "delivered", "dead")  # notify.STATES, without importing it to build the parser
# A delivery's id: a row id, never more than every store's integers hold.
DELIVERY_ID = Count(1, 2**62, "a delivery id")


def add_parsers(sub) -> None:
    p = verb(
        sub, "notifications", "webhook deliveries: pending, delivered, dead letters; retry them",
        "Each notification (a run deferred, stopped, faulted, lost, failed or completed) is delivered to each receiver a "
        "notifying worker or `serve` names (--notify URL). `list` (the default) shows the deliveries, newest first: their "
        "state, attempts and what the last attempt got (an HTTP status, a redirect's Location, an error). A delivery whose "
        "attempts ran out (SWARMKIT_NOTIFY_ATTEMPTS) is a dead letter; `retry` makes it pending again, due at once, its "
        "attempts counted afresh (audited `notification.retried`).",
        ["swarmkit notifications --dead", "swarmkit notifications list --run a46614b1 -o json", "swarmkit notifications retry 12 13", "swarmkit notifications retry --all-dead"],
    )
    # `swarmkit notifications --store URL retry 1` as well as `... retry 1 --store URL`.
    p.add_argument("--store", dest="notify_store", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--dead", dest="top_dead", action="store_true", help="only dead letters (the same as `list --dead`)")
    p.add_argument("--json", dest="top_json", action="store_true", help="the same as `list -o json`")
    actions = p.add_subparsers(dest="notify_verb", metavar="ACTION", help="list (the default) or retry")
    actions.required = False
    ls = verb(
        actions, "list", "the deliveries, newest first (the default)",
        "List the deliveries, newest first, with their state, attempts and last answer.",
        ["swarmkit notifications list --dead", "swarmkit notifications list --state pending -o json"],
    )
    add_store(ls)
    add_workspace(ls)
    ls.add_argument("--state", choices=STATES, help="only deliveries in this state")
    ls.add_argument("--dead", dest="state", action="store_const", const="dead", help="only dead letters (the same as --state dead)")
    ls.add_argument("--run", metavar="RUN_ID", help="only this run's (an id or a unique prefix)")
    ls.add_argument("--limit", type=Count(1, 100_000), default=100, metavar="N", help="at most N deliveries (default 100)")
    ls.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print: table or json (default table)")
    ls.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    rt = verb(
        actions, "retry", "make dead letters pending again, due now",
        "Make each dead delivery named (or every one, --all-dead) pending again: due at once, its attempts counted afresh. "
        "One conditional update each (only a dead delivery changes), audited `notification.retried`. Exit 2 for an id "
        "that names no delivery.",
        ["swarmkit notifications retry 12", "swarmkit notifications retry --all-dead"],
    )
    add_store(rt)
    rt.add_argument("ids", nargs="*", type=DELIVERY_ID, metavar="ID", help="a delivery's id (as `swarmkit notifications` shows it)")
    rt.add_argument("--all-dead", action="store_true", help="every dead letter")
    rt.add_argument("--workspace", dest="workspace", metavar="WORKSPACE", help="the workspace folder whose store to use (default: the current folder)")


def _last(d: dict) -> str:
    if d.get("last_status") is not None:
        said = f"HTTP {d['last_status']}"
        return f"{said} -> {d['location']}" if d.get("location") else said
    return d.get("last_error") or "-"


def _when(d: dict) -> str:
    from swarmkit.store.records import rfc3339

    at = {"delivered": d.get("delivered_at"), "dead": d.get("dead_at")}.get(d["state"]) or d.get("next_at")
    shown = rfc3339(at)[:19] + "Z" if at else "-"
    return f"due {shown}" if d["state"] == "pending" else shown


def delivery_view(d: dict) -> dict:
    """A delivery as JSON gives it: its fields, times in RFC 3339."""
    from datetime import datetime

    from swarmkit.store.records import rfc3339

    return {k: (rfc3339(v) if isinstance(v, datetime) else v) for k, v in d.items()}


async def cmd_notifications(args) -> int:
    args.store = getattr(args, "store", None) or args.notify_store
    if args.notify_verb is None:  # `swarmkit notifications [--dead] [--json]`: list
        args.notify_verb = "list"
        args.state = "dead" if args.top_dead else None
        args.output = "json" if args.top_json else "table"
        args.run, args.limit = None, 100
        args.workspace = getattr(args, "workspace", None)
    if args.notify_verb == "retry":
        return await _retry(args)
    return await _list(args)


async def _list(args) -> int:
    async def go(store: Store) -> int:
        import json
        from functools import partial

        from swarmkit.runtime import control
        from swarmkit.runtime.deliveries import list_deliveries
        from swarmkit.runtime.report import format_table
        from swarmkit.runtime.text import plain

        run_id = (await control.resolve_run(store, args.run)).id if args.run else None
        rows = await store.run_read(partial(list_deliveries, state=args.state, run_id=run_id, limit=args.limit))
        if args.output == "json":
            print(json.dumps({"schema": NOTIFICATIONS_SCHEMA, "notifications": [delivery_view(r) for r in rows]}, indent=2, sort_keys=True))
            return ExitCode.OK
        if not rows:
            what = {"dead": "no dead letters", "pending": "no pending deliveries", "delivered": "no delivered notifications"}.get(args.state or "", "no notification deliveries")
            print(what + (f" for {args.run}" if args.run else ""))
            return ExitCode.OK
        table = [
            (str(r["id"]), r["state"], r["run_id"][:8], plain(r["kind"]), plain(r["receiver"], 50), str(r["attempts"]), plain(_last(r), 60), _when(r))
            for r in rows
        ]
        print(format_table(HEADERS, table))
        dead = sum(1 for r in rows if r["state"] == "dead")
        if dead:
            print(f"\n{dead} dead letter(s): `swarmkit notifications retry ID...` (or --all-dead) sends them again.")
        return ExitCode.OK

    return await with_store(args, go)


async def _retry(args) -> int:
    from swarmkit.runtime.errors import UsageError

    if bool(args.ids) == bool(args.all_dead):
        raise UsageError("notifications retry: give delivery ids, or --all-dead")

    async def go(store: Store) -> int:
        from functools import partial

        from swarmkit.runtime.deliveries import retry_dead
        from swarmkit.runtime.settings import default_actor
        from swarmkit.store.clock import store_now

        ids = None if args.all_dead else list(dict.fromkeys(args.ids))
        outcome = await store.run_write(partial(retry_dead, ids=ids, actor=default_actor(), now=store_now()))
        if args.all_dead and not outcome:
            print("no dead letters to retry")
            return ExitCode.OK
        unknown = False
        for rid, said in outcome.items():
            if said == "retried":
                print(f"delivery {rid}: pending again, due now")
            elif said == "unknown":
                err(f"delivery {rid}: no such delivery")
                unknown = True
            else:
                print(f"delivery {rid}: not a dead letter ({said}); nothing to do")
        return ExitCode.USAGE if unknown else ExitCode.OK

    return await with_store(args, go)
