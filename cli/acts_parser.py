"""`swarmkit stop | approve | resume | cancel`'s parsers: their help and their flags. Imported to build
`swarmkit`'s parser; what each act does is runtime/act_table.py's, run by acts.py."""

from __future__ import annotations

from .common import BUDGET_HELP, RUN_ID_HELP, add_run_filters, add_store, add_workspace, verb

# Each verb's help: (summary, description, examples), in the order of the table's VERBS (tests/test_act_table.py
# holds them to it). The table itself is imported by the act (acts.py), not by `swarmkit --help`: it costs that typing.
HELP = {
    "stop": (
        "stop a run at its next agent boundary (resumable)",
        "Ask a run to stop before its next agent. The agent in flight finishes; the run is then stopped, "
        "checkpointed, and may be resumed with `swarmkit resume` or `swarmkit run --resume`. With --now the node in "
        "flight is interrupted (the cancel's escalation) and the run parks before it: that node's work is lost and it runs again from its start on resume.",
        [
            "swarmkit stop a46614b1", "swarmkit stop --now a46614b1", "swarmkit stop a46614b1 --when 'cost>2.5'",
            "swarmkit stop a46614b1 --before review", "swarmkit stop a46614b1 --clear", "swarmkit stop a46614b1 --store postgresql://db.internal/swarmkit",
            "swarmkit stop --flow nightly --status running --dry-run", "swarmkit stop --flow nightly --yes",
        ],
    ),
    "approve": (
        "approve a run waiting at a gate",
        "Approve the gate a deferred run waits at (an `approve = true` agent). A worker, or "
        "`swarmkit run --resume`, then carries the run on from that agent.",
        ["swarmkit approve a46614b1"],
    ),
    "resume": (
        "queue a stopped, deferred or lost run for a worker",
        "Put a stopped, deferred or lost run back in the queue, from its last checkpoint, for any worker to claim. "
        "A run whose budget is spent is refused unless --budget raises the limit it reached.",
        ["swarmkit resume a46614b1", "swarmkit resume a46614b1 ~/work/site", "swarmkit resume a46614b1 --budget cost=+5"],
    ),
    "cancel": (
        "end a run for good (destroys its workspaces unless --keep)",
        "End a run for good: a running run is ended at once by its host; any other is cancelled here. "
        "Its workspaces are destroyed unless --keep. A cancelled run cannot be resumed.",
        ["swarmkit cancel a46614b1", "swarmkit cancel a46614b1 --keep", "swarmkit cancel --flow broken-deploy --since 1h --keep --yes"],
    ),
}


def add_parsers(sub, only: str | None = None) -> None:
    """The four acts' parsers; with `only`, that act's alone (what `swarmkit stop ...` needs to parse)."""
    for name, (summary, description, examples) in HELP.items():
        if only is not None and name != only:
            continue
        p = verb(sub, name, summary, description, examples)
        add_store(p)
        p.add_argument("run_id", nargs="?", metavar="RUN_ID", help=RUN_ID_HELP + "; or, instead, filters that name the runs")
        add_workspace(p)
        many = p.add_argument_group("acting on many runs: instead of a run id, the runs the filters name (as `swarmkit status` takes them)")
        add_run_filters(many)
        many.add_argument("--all", action="store_true", help=f"every run it can {name}")
        many.add_argument("--dry-run", action="store_true", help="list the runs it would act on, and do nothing")
        many.add_argument("-y", "--yes", action="store_true", help="act without asking first")
        if name == "cancel":
            p.add_argument("--keep", action="store_true", help="keep the run's workspaces")
        if name == "resume":
            p.add_argument("--budget", action="append", metavar="LIMIT", default=[], help=BUDGET_HELP)
        if name == "stop":
            later = p.add_argument_group("a stop set for later (kept on the run; its host stops it at the first boundary where it holds)")
            later.add_argument("--when", metavar="CONDITION", help="stop once it holds: 'cost>2.5', 'tokens>100k', 'wall>30m' (time its agents ran), 'nodes>=3'")
            later.add_argument("--after", metavar="NODE", help="stop at the boundary after this agent of its flow (a breakpoint)")
            later.add_argument("--before", metavar="NODE", help="stop at the boundary before this agent of its flow (a breakpoint)")
            later.add_argument("--clear", action="store_true", help="take off every stop set for later")
            p.add_argument("--now", action="store_true", help="interrupt the node in flight and park the run before it (that node's work is lost; it runs again on resume)")
