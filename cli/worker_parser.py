"""`swarmkit worker`'s parser: imported to build `swarmkit`'s; the command is worker.py."""

from __future__ import annotations

from .common import add_log_format, add_notify, add_store, add_workspace, verb
from .quantities import MAX_CONCURRENCY, Count


def add_parsers(sub) -> None:
    p = verb(
        sub, "worker", "claim queued runs and host many at once",
        "Claim queued runs from the store and host up to --concurrency of them at once, until SIGINT or SIGTERM. "
        "The first signal drains: each run goes back to the queue at its next agent boundary; a second leaves them now "
        "(they show lost after their lease, resumable). Each line it prints starts with its RFC 3339 UTC time.",
        ["swarmkit worker --concurrency 8", "swarmkit worker --store postgresql://db.internal/swarmkit --log-format json"],
    )
    add_store(p)
    add_workspace(p)
    p.add_argument("--concurrency", type=Count(1, MAX_CONCURRENCY), default=4, metavar="N", help="runs hosted at once (default 4)")
    add_notify(p)
    add_log_format(p)
