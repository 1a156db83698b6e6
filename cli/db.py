"""`swarmkit db status` and `swarmkit db upgrade`: the only way a shared store's schema changes."""

from __future__ import annotations

import argparse

from .common import ExitCode, add_store, add_workspace, verb


def add_parsers(sub) -> None:
    p = verb(
        sub, "db", "the store's schema: status, upgrade",
        "Look at or migrate the store's schema. Only `swarmkit db upgrade` changes a shared (PostgreSQL) store's schema; "
        "a local SQLite store is upgraded by the verbs that host runs, too.",
        ["swarmkit db status", "swarmkit db status --store postgresql://db.internal/swarmkit -o json", "swarmkit db upgrade --store postgresql://db.internal/swarmkit"],
    )
    # `swarmkit db --store URL status` as well as `swarmkit db status --store URL`.
    p.add_argument("--store", dest="db_store", metavar="URL", help=argparse.SUPPRESS)
    dbsub = p.add_subparsers(dest="db_verb", metavar="ACTION")
    dbsub.required = True
    s = verb(
        dbsub, "status", "the store's schema revision, the one this Swarmkit wants, and whether it may write",
        "Say the store's schema revision, the one this Swarmkit wants, the oldest Swarmkit that may still write it, and whether this one may.",
        ["swarmkit db status", "swarmkit db status -o json"],
    )
    add_store(s)
    add_workspace(s)
    s.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print: table or json (default table)")
    s.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    u = verb(
        dbsub, "upgrade", "migrate the store to this Swarmkit's schema (creates it when missing)",
        "Migrate the store to the schema this Swarmkit wants, creating it when there is none. Safe to run twice.",
        ["swarmkit db upgrade", "swarmkit db upgrade --store postgresql://db.internal/swarmkit"],
    )
    add_store(u)
    add_workspace(u)


async def cmd_db(args) -> int:
    import json

    from swarmkit.runtime.settings import application_name
    from swarmkit.runtime.text import plain
    from swarmkit.store import NoStoreError, Store, resolve_store
    from swarmkit.store.schema import schema_state

    args.store = args.store or args.db_store
    if args.db_verb == "upgrade":
        store = await Store.open(args.store, args.workspace, create=True, upgrade=True, application_name=application_name("cli"))
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
        return ExitCode.OK
    loc = resolve_store(args.store, args.workspace)
    store = await Store.open(loc=loc, create=False, upgrade=False, migrate=False, inline=True, application_name=application_name("cli"))
    try:
        state = await schema_state(store.engine, store.loc)
    finally:
        await store.close()
    if state.current is None:
        raise NoStoreError(f"no store at {loc.display}")
    if args.output == "json":
        print(json.dumps({
            "store": loc.display, "current": state.current, "wanted": state.head, "min_writer": state.min_writer,
            "up_to_date": state.up_to_date, "may_write": state.may_write, "store_id": state.store_id,
        }, indent=2, sort_keys=True))
        return ExitCode.OK
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
    return ExitCode.OK
