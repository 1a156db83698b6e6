"""`swarmkit run`'s parser: imported to build `swarmkit`'s; the command is run.py."""

from __future__ import annotations

from .common import BUDGET_HELP, RUN_ID_HELP, add_store, verb


def add_parsers(sub) -> None:
    p = verb(
        sub, "run", "run a flow here (or --detach to queue it, --resume to continue a run)",
        "Host a run of a flow in this process until it ends, stops or waits at a gate, printing what its agents print. "
        "Ctrl-C stops it at the next agent boundary (resumable); a second Ctrl-C cancels it, keeping its workspace. "
        "With --detach the run is queued for a worker instead, and only its id is printed.",
        [
            "swarmkit run flow.toml --input topic=release",
            "swarmkit run flow.toml --detach ~/work/site",
            "swarmkit run --resume a46614b1",
            "swarmkit run flow.toml --budget cost=5 --budget tokens=200k",
        ],
    )
    add_store(p)
    p.add_argument("args", nargs="*", metavar="FLOW [WORKSPACE]", help="the flow file, then optionally the workspace folder (default: the current folder)")
    p.add_argument("--input", action="append", metavar="KEY=VALUE", default=[], help="an input for the run (repeatable)")
    p.add_argument("--detach", action="store_true", help="queue the run for a worker and print only its id")
    p.add_argument("--resume", metavar="RUN_ID", help="claim a stopped, deferred or lost run and host it here; " + RUN_ID_HELP)
    p.add_argument("--budget", action="append", metavar="LIMIT", default=[], help=BUDGET_HELP)
