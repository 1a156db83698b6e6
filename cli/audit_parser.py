"""`swarmkit audit`'s parser: imported to build `swarmkit`'s; the command is audit.py."""

from __future__ import annotations

from .common import add_store, duration, verb


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
