"""`swarmkit audit [RUN_ID]`: who did what to which run, when, and at which agent boundary."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

from swarmkit.runtime import control
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.report import format_table
from swarmkit.runtime.text import plain
from swarmkit.store.clock import store_now
from swarmkit.store.pages import audit_page
from swarmkit.store.records import rfc3339
from swarmkit.store.trail_records import audit_view

from .store_access import run_and_workspace, with_store

if TYPE_CHECKING:
    from swarmkit.store import Store
    from swarmkit.store.trail_records import AuditRecord

HEADERS = ("AT", "RUN", "ACTOR", "ACTION", "BOUNDARY", "DETAIL")
AUDIT_SCHEMA = 1
_PAGE = 1000


def boundary(entry: AuditRecord) -> str:
    """Where in the run an act took effect: the agent it stopped before, or the node and step it was asked at."""
    d = entry.detail
    if d.get("boundary"):
        where = f"before {d['boundary']}"
    elif d.get("gate"):
        where = f"gate {d['gate']}"
    elif d.get("node"):
        where = f"at {d['node']}"
    else:
        where = ""
    step = d.get("step")
    if isinstance(step, str):  # 1-based "k/N" (runtime/steps.py)
        where = f"{where} ({step})".strip()
    elif isinstance(step, int) and not isinstance(step, bool):  # rows written before one numbering: 0-based
        where = f"{where} (step {step + 1})".strip()
    return where or "-"


def _rest(entry: AuditRecord) -> str:
    shown: dict[str, Any] = {k: v for k, v in entry.detail.items() if k not in ("boundary", "gate", "node", "step")}
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False, sort_keys=True)}" for k, v in sorted(shown.items())) or "-"


async def cmd_audit(args) -> int:
    run_ref = run_and_workspace(args, "audit")

    async def go(store: Store) -> int:
        job_id = (await control.resolve_run(store, run_ref)).id if run_ref else None
        cutoff = store_now() - args.since if args.since else None
        entries: list[AuditRecord] = []
        after = 0
        while True:
            rows, more = await store.run_read(partial(audit_page, after=after, limit=_PAGE, job_id=job_id))
            entries.extend(r for r in rows if cutoff is None or r.at >= cutoff)
            if not more or not rows:
                break
            after = rows[-1].id
        if args.output == "json":
            print(json.dumps({"schema": AUDIT_SCHEMA, "audit": [audit_view(e) for e in entries]}, indent=2, sort_keys=True))
            return ExitCode.OK
        if not entries:
            print("no acts recorded" + (f" for {run_ref}" if run_ref else ""))
            return ExitCode.OK
        rows_out: list[tuple[str, ...]] = [
            (rfc3339(e.at)[:19] + "Z", (e.job_id or "-")[:8], plain(e.actor, 40), plain(e.action), plain(boundary(e), 40), plain(_rest(e), 80))
            for e in entries
        ]
        print(format_table(HEADERS, rows_out))
        return ExitCode.OK

    return await with_store(args, go)
