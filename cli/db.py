"""`swarmkit db status` and `swarmkit db upgrade`: the only way a shared store's schema changes."""

from __future__ import annotations

import json

from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.settings import application_name
from swarmkit.runtime.text import plain
from swarmkit.store import NoStoreError, Store, resolve_store
from swarmkit.store.schema import schema_state


async def cmd_db(args) -> int:
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
