"""The `swarmkit` command (`swarmkit.cli.main`): the parser and the one mapping of faults to exit codes.

One module per verb (or noun) beside this one; each adds its parser and holds
its command. Building the parser imports none of the store, SQLAlchemy or the
executor: `swarmkit --help` and a usage error cost only Python's start-up.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import acts, audit, completion, db, logs, notifications, run, serve, status, worker
from .common import PROG, ExitCode, describe_store_fault, err
from .inert_parser import InertParser
from .version_action import VersionAction

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

__all__ = ["ExitCode", "build_parser", "main"]

VERB_MODULES = (run, worker, acts, logs, status, audit, notifications, db, serve, completion)


def _module_of(name: str):
    """The module that adds verb `name`'s parser, or None for a word that is no verb."""
    if name in acts.HELP:
        return acts
    return {m.__name__.rsplit(".", 1)[1]: m for m in VERB_MODULES if m is not acts}.get(name)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, just that verb's module's part (what a verb's own run needs:
    building all of them is a tenth of `swarmkit --help`, nothing of the verb's work)."""
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
        if one is None or module is one:
            module.add_parsers(sub)
    return parser


def _commands() -> dict[str, Callable[[Any], Coroutine[Any, Any, int]]]:
    return {
        "run": run.cmd_run,
        "worker": worker.cmd_worker,
        **{name: acts.cmd_act for name in acts.HELP},
        "logs": logs.cmd_logs,
        "status": status.cmd_status,
        "audit": audit.cmd_audit,
        "notifications": notifications.cmd_notifications,
        "db": db.cmd_db,
        "serve": serve.cmd_serve,
    }


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
    from swarmkit.store.masking import log_to_stderr

    log_to_stderr(os.environ.get("SWARMKIT_LOG", "WARNING"), PROG)
    return _run(_commands()[args.verb], args)


def _run(command: Callable[[Any], Coroutine[Any, Any, int]], args) -> int:
    import asyncio

    from swarmkit.runtime.echo import say
    from swarmkit.runtime.errors import FlowError, SwarmkitError, UsageError
    from swarmkit.store import NoStoreError, StoreError, StoreUrlError

    # Each fault is said once, on stderr, and mapped to the one list of exit codes.
    try:
        return int(asyncio.run(command(args)))
    except (UsageError, FlowError, StoreUrlError, NoStoreError) as exc:
        err(str(exc))
        return ExitCode.USAGE
    except SwarmkitError as exc:
        # An unknown or ambiguous run is a usage slip (the id was mistyped); other refusals are failures.
        from swarmkit.runtime.errors import AmbiguousRun, RunNotFound

        err(str(exc))
        return ExitCode.USAGE if isinstance(exc, (RunNotFound, AmbiguousRun)) else ExitCode.FAILED
    except StoreError as exc:
        err(str(exc))
        return ExitCode.FAILED
    except BrokenPipeError:
        # `swarmkit logs ID | head`: the reader has what it wanted.
        say("", sys.stdout)
        return ExitCode.OK
    except Exception as exc:
        # STORE_FAULTS holds SQLAlchemy's errors: imported only when something went wrong.
        from swarmkit.store import STORE_FAULTS

        if not isinstance(exc, STORE_FAULTS):
            raise
        import logging

        # The traceback, for SWARMKIT_LOG=DEBUG; the operator reads one line.
        logging.getLogger("swarmkit.cli").debug("store fault", exc_info=True)
        err(describe_store_fault(exc, args))
        return ExitCode.FAILED
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
