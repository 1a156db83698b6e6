"""`swarmkit-console`: the operator console, and its headless `--once` dump."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from runtime import control
from runtime.report import runs_table
from runtime.settings import Settings
from runtime.text import plain
from store import STORE_FAULTS, Store, StoreError
from store.queries import list_jobs, workspaces_for
from store.records import merged_view, utcnow


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="swarmkit-console", description="Watch and steer Swarmkit runs.")
    p.add_argument("workspace", nargs="?", help="the workspace whose store to open (default: here)")
    p.add_argument("--store", metavar="URL")
    p.add_argument("--once", action="store_true", help="print the runs and exit")
    p.add_argument("--json", action="store_true", help="with --once: JSON")
    p.add_argument("--read-only", action="store_true", help="no actions")
    return p


async def dump_once(store_url: str | None, workspace: str | None, as_json: bool) -> int:
    store = await Store.open(store_url, workspace)
    try:
        await control.mark_lost(store, Settings.from_env().lease_s)
        now = utcnow()
        async with store.read() as conn:
            jobs = await list_jobs(conn)
            wss = await workspaces_for(conn, [j.id for j in jobs])
        if as_json:
            print(json.dumps({"schema": 1, "store": store.loc.display, "runs": [merged_view(j, wss.get(j.id, []), now) for j in jobs]}, indent=2, sort_keys=True))
        else:
            print(f"store: {plain(store.loc.display)}")
            print(runs_table(jobs, now))
    finally:
        await store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.json and not args.once:
        print("swarmkit-console: --json goes with --once", file=sys.stderr)
        return 2
    if args.once:
        try:
            return asyncio.run(dump_once(args.store, args.workspace, args.json))
        except StoreError as exc:
            print(f"swarmkit-console: {plain(str(exc))}", file=sys.stderr)
            return 1
        except STORE_FAULTS as exc:
            print(f"swarmkit-console: store error: {plain(str(exc))}", file=sys.stderr)
            return 1
    print("swarmkit-console: the interactive console is not built yet; use --once", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
