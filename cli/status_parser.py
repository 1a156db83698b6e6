"""`swarmkit status`'s parser: imported to build `swarmkit`'s; the command is status.py."""

from __future__ import annotations

from .common import add_output, add_run_filters, add_store, verb


def add_parsers(sub) -> None:
    p = verb(
        sub, "status", "list runs (filtered, or watched with -w), or show one run",
        "Without a run id: the runs, active ones first, then the 50 most recent ended ones (--all for every one). "
        "With one: every field of that run's merged view. -w prints the table, then one line for each change as it "
        "happens, until Ctrl-C. -o json gives the one JSON shape of Swarmkit (runtime/schemas/run_list.schema.json): "
        '{"schema": 1, "runs": [...]} for a list, the run itself for one; with -w, one run a line as it changes.',
        [
            "swarmkit status",
            "swarmkit status a46614b1",
            "swarmkit status --status running,stalled --flow release -o wide",
            "swarmkit status --since 2h -o json",
            "swarmkit status -w",
        ],
    )
    add_store(p)
    p.add_argument("args", nargs="*", metavar="[RUN_ID] [WORKSPACE]", help="a run id (or unique prefix) to show one run; a workspace folder whose store to use")
    add_output(p)
    p.add_argument("--all", action="store_true", help="include every ended run, not just the 50 most recent")
    p.add_argument("-w", "--watch", action="store_true", help="after the list, print each run that changes as it changes, until interrupted")
    add_run_filters(p)
