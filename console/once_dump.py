"""`swarmkit-console --once [--json]`: the runs, printed once, headless. Loaded for --once alone: the
console's first frame needs none of it (its start-up is measured in bench/console_render.py)."""

from __future__ import annotations

import json

from swarmkit.runtime import control
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.report import clock_warning, runs_table
from swarmkit.runtime.settings import Settings, application_name
from swarmkit.runtime.text import plain
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.queries import list_jobs, skewed_workers
from swarmkit.store.reads import run_views
from swarmkit.store.records import run_list

from .command_line import err


async def dump_once(store_url: str | None, workspace: str | None, as_json: bool) -> int:
    # Never creates a store: a mistyped path is an error, not an empty table.
    store = await Store.open(store_url, workspace, create=False, upgrade=False, inline=True, application_name=application_name("console"))
    try:
        lease_s = Settings.from_env().lease_s
        await control.mark_lost(store, lease_s)
        now = store_now()
        warning = clock_warning(await store.run_read(lambda c: skewed_workers(c, lease_s)))
        async with store.read() as conn:
            jobs = await conn.run_sync(list_jobs)
            views = await conn.run_sync(run_views, jobs, now) if as_json else []
        stale = store.loc.stale_warning
        if as_json:
            # json.dumps escapes every control character, so the JSON stays inert text.
            doc = run_list(views, store=store.loc.display)
            if warning:
                doc["clock_warning"] = warning
            if stale:
                doc["stale_warning"] = stale
            print(json.dumps(doc, indent=2, sort_keys=True))
        else:
            if stale:
                err(f"{store.loc.display}: {stale}")
            print(f"store: {plain(store.loc.display)}")
            if warning:
                err(f"warning: {warning}")
            # Every line once more through plain(): no column may carry an escape sequence.
            print("\n".join(plain(line) for line in runs_table(jobs, now).split("\n")))
    finally:
        await store.close()
    return ExitCode.OK
