"""`swarmkit audit [RUN_ID]`: who did what to which run, when, and at which agent boundary."""

from __future__ import annotations

from functools import partial

from .common import ExitCode, add_store, duration, run_and_workspace, verb, with_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store
    from swarmkit.store.records import AuditRecord

HEADERS = ("AT", "RUN", "ACTOR", "ACTION", "BOUNDARY", "DETAIL")
AUDIT_SCHEMA = 1
_PAGE = 1000


def add_parsers(sub) -> None:
    p = verb(
        sub, "audit", "who did what to which run, when, at which boundary",
        "The audit: every act on runs (submitted, stop and cancel requests, stops, approvals, resumes, parks, "
        "cancels), oldest first, with who did it (SWARMKIT_ACTOR, else user@host, or the API token's name), "
        "when (UTC), and the agent boundary it took effect at. -o json gives "
        '{"schema": 1, "audit": [{"id", "at", "actor", "action", "job_id", "detail"}]}.',
        ["swarmkit audit", "swarmkit audit a46614b1", "swarmkit audit --since 1d -o json"],
    )
    add_store(p)
    p.add_argument("args", nargs="*", metavar="[RUN_ID] [WORKSPACE]", help="a run id (or unique prefix) for that run's acts only; a workspace folder whose store to use")
    p.add_argument("--since", type=duration, metavar="DURATION", help="only acts of the last DURATION (30s, 5m, 2h, 1d)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print: table or json (default table)")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


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
    import json

    shown: dict[str, Any] = {k: v for k, v in entry.detail.items() if k not in ("boundary", "gate", "node", "step")}
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False, sort_keys=True)}" for k, v in sorted(shown.items())) or "-"


async def cmd_audit(args) -> int:
    run_ref = run_and_workspace(args, "audit")

    async def go(store: Store) -> int:
        import json

        from swarmkit.runtime import control
        from swarmkit.runtime.report import format_table
        from swarmkit.runtime.text import plain
        from swarmkit.store.clock import store_now
        from swarmkit.store.pages import audit_page
        from swarmkit.store.records import audit_view, rfc3339

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
