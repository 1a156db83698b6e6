"""The `swarmkit` command (`swarmkit.cli.main`): the parser, and the door to the verb that runs.

Each verb (or noun) has two modules beside this one: VERB_parser.py adds its parser, imported here;
VERB.py holds its command, with its imports at its top, loaded by verb_runner.py only when that verb
runs. Building the parser imports none of the store, SQLAlchemy or the executor: `swarmkit --help`
and a usage error cost only Python's start-up.
"""

from __future__ import annotations

import argparse
import sys

from . import (
    acts_parser,
    audit_parser,
    completion,
    db_parser,
    logs_parser,
    notifications_parser,
    run_parser,
    serve_parser,
    status_parser,
    worker_parser,
)
from .common import PROG, ExitCode
from .inert_parser import InertParser
from .version_action import VersionAction

__all__ = ["ExitCode", "build_parser", "main"]

VERB_MODULES = (run_parser, worker_parser, acts_parser, logs_parser, status_parser, audit_parser, notifications_parser, db_parser, serve_parser, completion)


def _module_of(name: str):
    """The module that adds verb `name`'s parser, or None for a word that is no verb."""
    if name in acts_parser.HELP:
        return acts_parser
    return {m.__name__.rsplit(".", 1)[1].removesuffix("_parser"): m for m in VERB_MODULES if m is not acts_parser}.get(name)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, just that verb's module's part (what a verb's own run needs:
    building all of them is a noticeable part of `swarmkit --help`, and nothing of the verb's work)."""
    parser = InertParser(
        prog=PROG,
        description="Run control for agent runs: run, stop, resume, cancel, approve, watch and audit them.",
        epilog=(
            "examples:\n"
            "  swarmkit run flow.toml --input topic=release\n"
            "  swarmkit status -w\n"
            "  swarmkit stop a46614b1\n"
            "  swarmkit audit a46614b1\n\n"
            "exit codes: 0 done or nothing to do, 1 refused or failed, 2 bad usage or unknown run, 130 interrupted.\n"
            "`swarmkit VERB --help` describes each verb."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    one = _module_of(only) if only else None
    for module in VERB_MODULES:
        if one is None:
            module.add_parsers(sub)
        elif module is one:
            if module is acts_parser:
                module.add_parsers(sub, only)  # the one module of several verbs: the asked one's parser alone
            else:
                module.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # The verb's part of the parser alone, when the first word is a verb: an option before it
    # (--help, --version) or a completion script needs all of it.
    first = words[0] if words else None
    parser = build_parser(only=first if first and first != "completion" and _module_of(first) else None)
    # argparse fills a `*` positional from one contiguous stretch only, so
    # `run flow.toml --input k=v WORKSPACE` would leave WORKSPACE over.
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "args") and not any(e.startswith("-") for e in extra):
            args.args = list(args.args) + extra
        elif len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "workspace", "") is None:
            args.workspace = extra[0]
        else:
            parser.error(f"{args.verb}: unrecognized arguments: {' '.join(extra)}")  # said inert (InertParser)
    if args.verb == "completion":
        # Written from the parser alone: no store, no event loop, no SQLAlchemy.
        return completion.cmd_completion(args, parser)
    from .verb_runner import run_verb  # late: the verb's work (the store, the runtime) loads when it runs; `--help` and a usage error load none

    return run_verb(args)
