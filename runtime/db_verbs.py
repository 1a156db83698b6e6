"""`swarmkit db status` and `swarmkit db upgrade`: the only way a shared store's schema changes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from .text import plain


def add_db_parser(sub, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("db", help="the store's schema: status, upgrade")
    # `swarmkit db --store URL status` as well as `swarmkit db status --store URL`.
    p.add_argument("--store", dest="db_store", metavar="URL", help=argparse.SUPPRESS)
    dbsub = p.add_subparsers(dest="db_verb", metavar="ACTION")
    dbsub.required = True
    s = dbsub.add_parser("status", help="the store's schema revision, the one this Swarmkit wants, and whether it may write")
    common(s)
    s.add_argument("workspace", nargs="?")
    s.add_argument("--json", action="store_true")
    u = dbsub.add_parser("upgrade", help="migrate the store to this Swarmkit's schema (creates it when missing)")
    common(u)
    u.add_argument("workspace", nargs="?")


async def cmd_db(args) -> int:
    # Here, not at the top: `swarmkit --help` builds this parser and loads no store code.
    from swarmkit.store import Store, resolve_store
    from swarmkit.store.schema import schema_state

    args.store = args.store or args.db_store
    if args.db_verb == "upgrade":
        store = await Store.open(args.store, args.workspace, create=True, upgrade=True)
        try:
            before, after = store.schema_change or (None, "?")
        finally:
            await store.close()
        shown = plain(store.loc.display)
        if before == after:
            print(f"the store {shown} is already at schema revision {after}; nothing to do.")
        elif before is None:
            print(f"created the store {shown} at schema revision {after}.")
        else:
            print(f"upgraded the store {shown} from schema revision {before} to {after}.")
        return 0
    loc = resolve_store(args.store, args.workspace)
    store = await Store.open(loc=loc, create=False, upgrade=False, migrate=False, inline=True)
    try:
        state = await schema_state(store.engine, store.loc)
    finally:
        await store.close()
    if state.current is None:
        from swarmkit.store import NoStoreError

        raise NoStoreError(f"no store at {loc.display}")
    if args.json:
        print(json.dumps({
            "store": loc.display, "current": state.current, "wanted": state.head, "min_writer": state.min_writer,
            "up_to_date": state.up_to_date, "may_write": state.may_write, "store_id": state.store_id,
        }, indent=2, sort_keys=True))
        return 0
    if state.up_to_date:
        verdict = "up to date"
    elif not state.known:
        verdict = "newer than this Swarmkit" + (" (additive: this Swarmkit may still write it)" if state.may_write else "; upgrade Swarmkit to use it")
    else:
        verdict = "older than this Swarmkit: run `swarmkit db upgrade`"
    print(f"store:            {plain(loc.display)}")
    print(f"schema revision:  {state.current}")
    print(f"this code wants:  {state.head}")
    print(f"oldest writer:    {state.min_writer or '-'}")
    print(f"may write:        {'yes' if state.may_write and (state.up_to_date or not state.known) else 'no'}")
    print(f"status:           {verdict}")
    return 0
