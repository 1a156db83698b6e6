"""`swarmkit notifications [list|retry]`: each notification's delivery to each receiver, dead letters, and retrying them."""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from swarmkit.runtime import control
from swarmkit.runtime.deliveries import list_deliveries, retry_dead
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.report import format_table
from swarmkit.runtime.settings import default_actor
from swarmkit.runtime.text import plain
from swarmkit.store.clock import store_now
from swarmkit.store.records import rfc3339

from .store_access import err, with_store

if TYPE_CHECKING:
    from swarmkit.store import Store

HEADERS = ("ID", "STATE", "RUN", "KIND", "RECEIVER", "ATTEMPTS", "LAST", "WHEN")
NOTIFICATIONS_SCHEMA = 1


def _last(d: dict) -> str:
    if d.get("last_status") is not None:
        said = f"HTTP {d['last_status']}"
        return f"{said} -> {d['location']}" if d.get("location") else said
    return d.get("last_error") or "-"


def _when(d: dict) -> str:
    at = {"delivered": d.get("delivered_at"), "dead": d.get("dead_at")}.get(d["state"]) or d.get("next_at")
    shown = rfc3339(at)[:19] + "Z" if at else "-"
    return f"due {shown}" if d["state"] == "pending" else shown


def delivery_view(d: dict) -> dict:
    """A delivery as JSON gives it: its fields, times in RFC 3339."""
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
    if bool(args.ids) == bool(args.all_dead):
        raise UsageError("notifications retry: give delivery ids, or --all-dead")

    async def go(store: Store) -> int:
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
