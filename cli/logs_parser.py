"""`swarmkit logs`'s parser: imported to build `swarmkit`'s; the command is logs.py."""

from __future__ import annotations

from .common import add_run_id, add_store, add_workspace, duration, verb
from .quantities import Count


def add_parsers(sub) -> None:
    p = verb(
        sub, "logs", "print a run's events (-f follows until it ends)",
        "Print a run's events: what its agents printed, each node's start and end, and what was done to it. "
        "-f follows it until it ends, riding out a store that is away for a while; nothing is printed twice. "
        "-o json prints one event a line as JSON (id, job_id, at, kind, node, step, text).",
        [
            "swarmkit logs a46614b1",
            "swarmkit logs a46614b1 -f --tail 20",
            "swarmkit logs a46614b1 --since 10m --timestamps",
            "swarmkit logs a46614b1 -o json | jq -r .text",
        ],
    )
    add_store(p)
    add_run_id(p)
    add_workspace(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events until the run ends (or Ctrl-C)")
    p.add_argument("--tail", type=Count(), metavar="N", help="only the last N events (then new ones with -f)")
    p.add_argument("--since", type=duration, metavar="DURATION", help="only events of the last DURATION (30s, 5m, 2h, 1d)")
    p.add_argument("--timestamps", action="store_true", help="start each line with its RFC 3339 UTC time")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default), or json: one event a line")
