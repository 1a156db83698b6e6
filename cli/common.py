"""What every verb's parser shares: the store and workspace options, the run id, the output option, durations.

Imported to build the parser (`swarmkit --help`, a usage error): it loads nothing a verb's work needs.
What the verbs' commands share (opening the store, stderr) is store_access.py, loaded when a verb runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.log_lines import FORMATS

from .quantities import Duration

# What every verb imports to build the parser costs `swarmkit --help`: typing, json, datetime
# and the echo thread's modules are the commands' (store_access.py and each verb's module), or
# only the type checker's: the parser's modules write `TYPE_CHECKING = False` rather than import
# typing for it (mypy reads a module's own TYPE_CHECKING as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.runtime.run_filter import RunFilter

PROG = "swarmkit"
WORKSPACE_HELP = "the workspace folder whose store to use (default: the current folder)"
# The flag's words, the same for `run` and `resume`.
BUDGET_HELP = (
    "a limit the run stops at, resumable (repeatable): cost=5 (dollars), tokens=100k, wall=30m (time its agents ran), "
    "nodes=10; cost=+5 raises the flow's or the run's limit; hard interrupts the node in flight"
)
RUN_ID_HELP = "the run's id, or any unique prefix of it (as `swarmkit status` shows)"
OUTPUTS = ("table", "wide", "name", "json")


def verb(sub, name: str, summary: str, description: str, examples: Sequence[str]) -> argparse.ArgumentParser:
    """A verb's parser: a one-line summary for `swarmkit --help`, a description and examples for its own."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=summary, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="URL", help="store URL (default: SWARMKIT_STORE, else <workspace>/.swarmkit/store.db)")


def add_workspace(p: argparse.ArgumentParser) -> None:
    p.add_argument("workspace", nargs="?", metavar="WORKSPACE", help=WORKSPACE_HELP)


def add_run_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)


def add_run_filters(p: Any) -> None:
    """The filters of `status` and of the acts by filter (runtime/run_filter.py): one set of flags, one meaning.
    `p`: a parser or one of its argument groups."""
    p.add_argument("--status", metavar="STATUS[,STATUS]", action="append", default=[], help="only runs in these shown statuses (running, stalled, stopping, queued, completed, ...; repeatable)")
    p.add_argument("--flow", metavar="NAME", action="append", default=[], help="only runs of this flow (repeatable)")
    p.add_argument("--node", metavar="NODE", action="append", default=[], help="only runs at this agent of their flow (repeatable)")
    p.add_argument("--since", metavar="DURATION", type=duration, help="only runs changed in the last DURATION (30s, 5m, 2h, 1d)")
    p.add_argument("--older-than", metavar="DURATION", type=duration, help="only runs not changed in the last DURATION")


def run_filter(args) -> RunFilter:
    """The filter the flags of `add_run_filters` say (and `--all`, where the verb has it)."""
    from swarmkit.runtime.run_filter import RunFilter  # late: only a verb that filters runs builds one

    return RunFilter.of(args.status, args.flow, args.node, args.since, args.older_than, getattr(args, "all", False))


def add_output(p: argparse.ArgumentParser, choices: Sequence[str] = OUTPUTS) -> None:
    p.add_argument("-o", "--output", choices=choices, default="table", help=f"how to print: {', '.join(choices)} (default table)")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


def add_notify(p: argparse.ArgumentParser) -> None:
    """--notify, for every verb that delivers the store's notifications (worker, serve)."""
    p.add_argument(
        "--notify", action="append", metavar="URL",
        help="POST signed JSON to URL when a run defers, stops, faults, goes lost, fails or completes; repeatable, one receiver each "
        "(secret: SWARMKIT_NOTIFY_SECRET; SWARMKIT_NOTIFY_TIMEOUT, SWARMKIT_NOTIFY_ATTEMPTS; see `swarmkit notifications`)",
    )


def add_log_format(p: argparse.ArgumentParser) -> None:
    """`--log-format` of a hosting verb (`worker`, `serve`): how runtime/log_lines.py's LogLines prints."""
    p.add_argument("--log-format", choices=FORMATS, default="text", help="text: each line after its RFC 3339 UTC time (default); json: one JSON object a line")


# `90s`, `5m`, `1h30m`, `2d`: an argparse type, as kubectl and docker take them; more than zero and at
# most a hundred years (`--since 99999999d` was an OverflowError in datetime arithmetic).
duration = Duration()


__all__ = ["OUTPUTS", "PROG", "RUN_ID_HELP", "WORKSPACE_HELP", "ExitCode", "add_log_format", "add_notify", "add_output", "add_run_id", "add_store", "add_workspace", "duration", "verb"]
