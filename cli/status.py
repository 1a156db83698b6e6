"""`swarmkit status [RUN_ID] [WORKSPACE]`: the runs (filtered, watched) or one run's merged view."""

from __future__ import annotations

import json
import sys

from swarmkit.runtime import control
from swarmkit.runtime.act_base import resolved_with_view
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.report import HEADERS, cell_width, clock_warning, format_row, format_table, run_rows
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.text import plain
from swarmkit.store.clock import store_now
from swarmkit.store.reads import list_jobs, skewed_workers, workspaces_for
from swarmkit.store.records import merged_view, rfc3339, run_list
from swarmkit.store.statuses import TERMINAL_STATUSES

from .common import run_filter
from .store_access import err, run_and_workspace, with_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from datetime import datetime

    from swarmkit.store import Store
    from swarmkit.store.records import JobRecord

# `-o wide` adds these to the run table's columns (runtime/report.py).
WIDE_HEADERS = ("HOST", "PID", "EPOCH", "CREATED")
# `-w` looks this often; a change is printed at the next look.
WATCH_POLL_S = 0.5


def _split_args(args) -> str | None:
    run_ref = run_and_workspace(args, "status")
    if run_ref and (args.watch or run_filter(args).narrows):
        raise UsageError("-w, --status, --flow, --node, --since and --older-than go with the list of runs, not with one run")
    return run_ref


def wide_row(job: JobRecord) -> tuple[str, ...]:
    return (plain(job.host or "-", 24), str(job.pid or "-"), str(job.epoch), rfc3339(job.created_at)[:19] + "Z")


def table_rows(jobs: list[JobRecord], now: datetime, wide: bool) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    rows = run_rows(jobs, now)
    if not wide:
        return HEADERS, rows
    return HEADERS + WIDE_HEADERS, [r + wide_row(j) for r, j in zip(rows, jobs)]


async def cmd_status(args) -> int:
    run_ref = _split_args(args)

    async def go(store: Store) -> int:
        lease_s = Settings.from_env().lease_s
        await control.mark_lost(store, lease_s)
        warning = clock_warning(await store.run_read(lambda c: skewed_workers(c, lease_s)))
        if warning:
            err("warning: " + warning)
        if run_ref:
            return await _show_one(store, run_ref, args.output)
        return await _list(store, args, lease_s)

    return await with_store(args, go)


async def _show_one(store: Store, run_ref: str, output: str) -> int:
    job, view = await resolved_with_view(store, run_ref, True)  # the record too, for its estimate: one read
    if output == "json":
        print(json.dumps(view, indent=2, sort_keys=True))
        return ExitCode.OK
    if output == "name":
        print(view["id"])
        return ExitCode.OK
    for key in sorted(view):
        value = view[key]
        if key == "workspaces":
            value = ", ".join(f"{w['path']} ({w['state']})" for w in value) or "-"
        elif key == "flow_source":
            value = f"{len(str(value))} characters"
        elif key == "flow_modules" and value:
            value = f"{', '.join(sorted(value)) or 'none'} ({len(json.dumps(value))} characters)"
        elif key == "budget" and value:
            from swarmkit.runtime.budgets import Budget, Spent  # late: only a run that has a budget

            value = Budget.from_json(json.dumps(value)).words(Spent(view["cost"] or 0.0, view["tokens"] or 0, view.get("ran_s") or 0.0, view["step"] or 0))
        elif key == "stop_when" and value:
            from swarmkit.runtime.stop_conditions import as_view  # late: only a run with stops set for later

            value = as_view(value)
        elif isinstance(value, dict):
            value = json.dumps(value, ensure_ascii=False, sort_keys=True)
        print(f"{key:>20}: {plain(value if value is not None else '-')}")
    if view["status"] not in TERMINAL_STATUSES:
        # What it will cost, labelled as an estimate (runtime/estimates.py): not a column of the run, so not in its JSON.
        from swarmkit.runtime.estimates import estimate_of  # late: only a run not yet ended is estimated
        from swarmkit.store.reads import node_costs  # late: as above

        costs = await store.run_read(lambda c: node_costs(c, job.flow, job.id))
        print(f"{'estimate':>20}: {plain(estimate_of(job, costs, store_now()).words())}")
    return ExitCode.OK


async def _read(store: Store, args, with_workspaces: bool, also: frozenset[str] = frozenset()):
    """The runs the filters keep, and those named in `also` whatever they are now (a watched run that left the filter)."""
    now = store_now()
    keep = run_filter(args)
    # A filter looks at every ended run: `--status completed` means all of them, not the last 50.
    limit = 10**9 if args.all or keep.narrows else 50
    async with store.read() as conn:
        jobs = [j for j in await conn.run_sync(lambda c: list_jobs(c, ended_limit=limit)) if not keep.narrows or keep.keeps(j, now) or j.id in also]
        wss = await conn.run_sync(workspaces_for, [j.id for j in jobs]) if with_workspaces else {}
    return jobs, wss, now


async def _list(store: Store, args, lease_s: float) -> int:
    jobs, wss, now = await _read(store, args, args.output == "json")
    if args.output == "json" and not args.watch:
        print(json.dumps(run_list([merged_view(j, wss.get(j.id, []), now) for j in jobs]), indent=2, sort_keys=True))
        return ExitCode.OK
    if args.output == "json":
        for j in jobs:
            print(json.dumps(merged_view(j, wss.get(j.id, []), now), sort_keys=True), flush=True)
    elif args.output == "name":
        for j in jobs:
            print(j.id, flush=True)
    else:
        headers, rows = table_rows(jobs, now, args.output == "wide")
        if not rows and not args.watch:
            print("no runs")
            return ExitCode.OK
        print(format_table(headers, rows), flush=True)
    if not args.watch:
        return ExitCode.OK
    return await _watch(store, args, lease_s, jobs, headers if args.output in ("table", "wide") else ())


def _signature(job: JobRecord, now: datetime) -> tuple:
    # What a watcher is told about: a new status, node, request or usage; not the ages ticking.
    return (job.display_status(now), job.step, job.current_node, job.stop_requested_by, job.cancel_requested_by, job.tokens, job.cost, job.error)


async def _watch(store: Store, args, lease_s: float, first: list[JobRecord], headers: tuple[str, ...]) -> int:
    """Like `kubectl get -w`: after the list, one line for each run that changed, as it changes, until Ctrl-C."""
    from swarmkit.store import STORE_FAULTS, describe_db_error, is_transient  # late: SQLAlchemy's (store/store_faults.py); a one-shot status on SQLite loads none

    seen = {j.id: _signature(j, store_now()) for j in first}
    # The columns keep the widths the table had (at least the headers'), as kubectl's do.
    if headers:
        rows = table_rows(first, store_now(), args.output == "wide")[1]
        widths = [max([cell_width(h)] + [cell_width(r[i]) for r in rows]) for i, h in enumerate(headers)]
    outage = False
    import asyncio  # late: a watch opens the full store, on the event loop; a one-shot status runs without one

    while True:
        await asyncio.sleep(WATCH_POLL_S)
        try:
            await control.mark_lost(store, lease_s)
            # A run watched since it matched is told about when it changes out of the filter too.
            jobs, wss, now = await _read(store, args, args.output == "json", frozenset(seen))
        except STORE_FAULTS as exc:
            if not is_transient(exc):
                raise
            if not outage:
                err(f"lost the store ({describe_db_error(exc, store.loc)}); trying again")
                outage = True
            continue
        if outage:
            err("the store answers again; watching")
            outage = False
        changed = [j for j in jobs if seen.get(j.id) != _signature(j, now)]
        for j in changed:
            seen[j.id] = _signature(j, now)
        if not changed:
            continue
        if args.output == "json":
            for j in changed:
                print(json.dumps(merged_view(j, wss.get(j.id, []), now), sort_keys=True))
        elif args.output == "name":
            for j in changed:
                print(j.id)
        else:
            for row in table_rows(changed, now, args.output == "wide")[1]:
                print(format_row(row, widths))
        sys.stdout.flush()
