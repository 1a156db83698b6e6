"""`swarmkit notifications`' parser: imported to build `swarmkit`'s; the command is notifications.py."""

from __future__ import annotations

import argparse

from .common import add_store, add_workspace, verb
from .quantities import Count

STATES = ("pending", "delivered", "dead")  # store/statuses.py DELIVERY_STATES, spelled out: `swarmkit --help` imports no store (tests/test_notify.py holds them equal)
# A delivery's id: a row id, never more than every store's integers hold.
DELIVERY_ID = Count(1, 2**62, "a delivery id")


def add_parsers(sub) -> None:
    p = verb(
        sub, "notifications", "webhook deliveries: pending, delivered, dead letters; retry them",
        "Each notification (a run deferred, stopped, faulted, lost, failed or completed) is delivered to each receiver a "
        "notifying worker or `serve` names (--notify URL). `list` (the default) shows the deliveries, newest first: their "
        "state, attempts and what the last attempt got (an HTTP status, a redirect's Location, an error). A delivery whose "
        "attempts ran out (SWARMKIT_NOTIFY_ATTEMPTS) is a dead letter; `retry` makes it pending again, due at once, its "
        "attempts counted afresh (audited `notification.retried`).",
        ["swarmkit notifications --dead", "swarmkit notifications list --run a46614b1 -o json", "swarmkit notifications retry 12 13", "swarmkit notifications retry --all-dead"],
    )
    # `swarmkit notifications --store URL retry 1` as well as `... retry 1 --store URL`.
    p.add_argument("--store", dest="notify_store", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--dead", dest="top_dead", action="store_true", help="only dead letters (the same as `list --dead`)")
    p.add_argument("--json", dest="top_json", action="store_true", help="the same as `list -o json`")
    actions = p.add_subparsers(dest="notify_verb", metavar="ACTION", help="list (the default) or retry")
    actions.required = False
    ls = verb(
        actions, "list", "the deliveries, newest first (the default)",
        "List the deliveries, newest first, with their state, attempts and last answer.",
        ["swarmkit notifications list --dead", "swarmkit notifications list --state pending -o json"],
    )
    add_store(ls)
    add_workspace(ls)
    ls.add_argument("--state", choices=STATES, help="only deliveries in this state")
    ls.add_argument("--dead", dest="state", action="store_const", const="dead", help="only dead letters (the same as --state dead)")
    ls.add_argument("--run", metavar="RUN_ID", help="only this run's (an id or a unique prefix)")
    ls.add_argument("--limit", type=Count(1, 100_000), default=100, metavar="N", help="at most N deliveries (default 100)")
    ls.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print: table or json (default table)")
    ls.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    rt = verb(
        actions, "retry", "make dead letters pending again, due now",
        "Make each dead delivery named (or every one, --all-dead) pending again: due at once, its attempts counted afresh. "
        "One conditional update each (only a dead delivery changes), audited `notification.retried`. Exit 2 for an id "
        "that names no delivery.",
        ["swarmkit notifications retry 12", "swarmkit notifications retry --all-dead"],
    )
    add_store(rt)
    rt.add_argument("ids", nargs="*", type=DELIVERY_ID, metavar="ID", help="a delivery's id (as `swarmkit notifications` shows it)")
    rt.add_argument("--all-dead", action="store_true", help="every dead letter")
    rt.add_argument("--workspace", dest="workspace", metavar="WORKSPACE", help="the workspace folder whose store to use (default: the current folder)")
