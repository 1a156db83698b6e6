"""`swarmkit db`'s parser: imported to build `swarmkit`'s; the command is db.py."""

from __future__ import annotations

import argparse

from .common import add_store, add_workspace, verb


def add_parsers(sub) -> None:
    p = verb(
        sub, "db", "the store's schema: status, upgrade",
        "Look at or migrate the store's schema. Only `swarmkit db upgrade` changes a shared (PostgreSQL) store's schema; "
        "a local SQLite store is upgraded by the verbs that host runs, too.",
        ["swarmkit db status", "swarmkit db status --store postgresql://db.internal/swarmkit -o json", "swarmkit db upgrade --store postgresql://db.internal/swarmkit"],
    )
    # `swarmkit db --store URL status` as well as `swarmkit db status --store URL`.
    p.add_argument("--store", dest="db_store", metavar="URL", help=argparse.SUPPRESS)
    dbsub = p.add_subparsers(dest="db_verb", metavar="ACTION")
    dbsub.required = True
    s = verb(
        dbsub, "status", "the store's schema revision, the one this Swarmkit wants, and whether it may write",
        "Say the store's schema revision, the one this Swarmkit wants, the oldest Swarmkit that may still write it, and whether this one may.",
        ["swarmkit db status", "swarmkit db status -o json"],
    )
    add_store(s)
    add_workspace(s)
    s.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print: table or json (default table)")
    s.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    u = verb(
        dbsub, "upgrade", "migrate the store to this Swarmkit's schema (creates it when missing)",
        "Migrate the store to the schema this Swarmkit wants, creating it when there is none. Safe to run twice.",
        ["swarmkit db upgrade", "swarmkit db upgrade --store postgresql://db.internal/swarmkit"],
    )
    add_store(u)
    add_workspace(u)
