"""A verb's run, once `swarmkit`'s parser has read the command line: its command module loaded and run,
and every fault said once and mapped to the one list of exit codes.

Imported by cli/command.py only when a verb runs: `swarmkit --help` and a usage error load none of it,
and a verb loads its own command module alone (another's work, the executor or the HTTP stack, stays unloaded).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

from swarmkit.runtime.echo import say
from swarmkit.runtime.errors import AmbiguousRun, FlowError, RunNotFound, SwarmkitError, UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.store import NoStoreError, StoreError, StoreUrlError
from swarmkit.store.loopless import drive
from swarmkit.store.store_location import resolve_store

from .acts_parser import HELP as ACT_HELP
from .common import PROG
from .store_access import LITE_VERBS, err

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

# Each verb's command: its module beside this one, and the coroutine function there that runs it.
COMMANDS = {
    "run": ("run", "cmd_run"),
    "worker": ("worker", "cmd_worker"),
    **{name: ("acts", "cmd_act") for name in ACT_HELP},
    "logs": ("logs", "cmd_logs"),
    "status": ("status", "cmd_status"),
    "audit": ("audit", "cmd_audit"),
    "notifications": ("notifications", "cmd_notifications"),
    "db": ("db", "cmd_db"),
    "serve": ("serve", "cmd_serve"),
}


def run_verb(args) -> int:
    """Run the verb `args.verb` names; its exit code."""
    module, name = COMMANDS[args.verb]
    # The verb's module alone, by name: every module's imports are at its top, so this loads what the verb needs.
    command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return _run(command, args)


def _on_loop() -> None:
    """What a verb that may run for long (on the event loop) needs: its log lines said, and the cyclic
    garbage collector on again (swarmkit.cli.main holds it off through start-up)."""
    gc.enable()
    _log_to_stderr()


def _log_to_stderr() -> None:
    from swarmkit.store.masked_log import log_to_stderr  # late: logging is a tenth of a one-shot verb's start, and a lite store logs nothing

    try:
        log_to_stderr(os.environ.get("SWARMKIT_LOG", "WARNING"), PROG)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run(command: Callable[[Any], Coroutine[Any, Any, int]], args) -> int:
    # Each fault is said once, on stderr, and mapped to the one list of exit codes.
    try:
        if args.verb in LITE_VERBS:
            # With no event loop until it needs one (store/loopless.py), and nothing that logs: on a
            # lite store it needs neither; on the full store (PostgreSQL, a watch) it has both from there.
            if "SWARMKIT_LOG" in os.environ:
                _log_to_stderr()  # asked for: from the start (the handoff's second call sets nothing again)
            return int(drive(command(args), on_loop=_on_loop))
        _on_loop()
        import asyncio  # late: a one-shot verb on a lite store runs without it

        return int(asyncio.run(command(args)))
    except (UsageError, FlowError, StoreUrlError, NoStoreError) as exc:
        err(str(exc))
        return ExitCode.USAGE
    except SwarmkitError as exc:
        # An unknown or ambiguous run is a usage slip (the id was mistyped); other refusals are failures.
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
        from swarmkit.store import STORE_FAULTS, describe_db_error  # late: SQLAlchemy's errors (store/store_faults.py); only when something went wrong

        if not isinstance(exc, STORE_FAULTS):
            raise
        import logging  # late: logging loads only where something is logged

        # The traceback, for SWARMKIT_LOG=DEBUG; the operator reads one line.
        logging.getLogger("swarmkit.cli").debug("store fault", exc_info=True)
        try:
            loc = resolve_store(getattr(args, "store", None), getattr(args, "workspace", None))
        except StoreError:
            err(f"store error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        else:
            err(describe_db_error(exc, loc))
        return ExitCode.FAILED
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
