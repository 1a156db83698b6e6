"""What every verb shares: the store options, opening the store, the output option, durations, and stderr.

Heavy modules (SQLAlchemy, the store, the executor) are imported inside the
functions that need them: building the parser for `--help` must stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Sequence

from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.log_lines import FORMATS

from .quantities import Duration

# What every verb imports to build the parser costs `swarmkit --help`: typing, json, datetime
# and the echo thread's modules are imported where used, or only for the type checker
# (mypy reads a module's own TYPE_CHECKING as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

    from swarmkit.store import Store

PROG = "swarmkit"
WORKSPACE_HELP = "the workspace folder whose store to use (default: the current folder)"
RUN_ID_HELP = "the run's id, or any unique prefix of it (as `swarmkit status` shows)"
OUTPUTS = ("table", "wide", "name", "json")

# Only verbs that host runs make a store; on a local SQLite file they may upgrade it too.
# A shared store is upgraded by `swarmkit db upgrade` alone.
HOSTING_VERBS = frozenset({"run", "worker", "serve"})
# One-shot verbs that open a SQLite store through sqlite3 alone (store/lite.py): no SQLAlchemy
# loaded, a third of the start-up (issue 13). A watch (`status -w`) polls on: it opens a `Store`.
LITE_VERBS = frozenset({"status", "stop"})


def err(msg: str) -> None:
    """An error or a warning: on stderr, once, with its password hidden and no control sequence."""
    from swarmkit.runtime.echo import say
    from swarmkit.runtime.text import plain_lines
    from swarmkit.store.masking import masked

    say(f"{PROG}: {plain_lines(masked(msg))}", sys.stderr)


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


def run_and_workspace(args, name: str) -> str | None:
    """`[RUN_ID] [WORKSPACE]`: sets args.workspace, returns the run id. One argument is the workspace if it is a folder."""
    from pathlib import Path

    from swarmkit.runtime.errors import UsageError

    positional = list(args.args)
    run_ref = None
    args.workspace = None
    if len(positional) > 2:
        raise UsageError(f"{name} takes at most a run id and a workspace")
    if len(positional) == 2:
        run_ref, args.workspace = positional
    elif positional:
        arg = positional[0]
        if Path(arg).is_dir():
            args.workspace = arg
        elif "/" in arg or arg.startswith((".", "~")):
            # A run id is hex: a slash, a dot or a tilde is a folder that was meant.
            args.workspace = arg
        else:
            run_ref = arg
    if args.workspace is not None and not Path(args.workspace).is_dir():
        what = "is not a folder" if Path(args.workspace).exists() else "does not exist"
        raise UsageError(f"the store folder {args.workspace} {what}")
    return run_ref


# How long `logs -f` and `status --watch` wait for a store that is away when they start (a
# server restarting): past it, the error is said, as for any verb (a wrong host must not hang).
OPEN_RIDE_OUT_S = 30.0


async def open_store(args) -> Store:
    store = await _opened(args)
    if store.loc.stale_warning:
        err(f"{store.loc.display}: {store.loc.stale_warning}")
    return store


async def riding_out(read: Callable[[], Awaitable[T]], say: Callable[[BaseException], str], for_s: float | None = None) -> T:
    """`read()`, again after each transient store fault (said once, `say(fault)`, on stderr), with the
    outage backoff (runtime/backoff.py); for ever, or for `for_s` seconds, after which the fault is raised."""
    import asyncio
    import time

    from swarmkit.runtime.backoff import Backoff
    from swarmkit.store.store_errors import is_store_fault

    deadline = None if for_s is None else time.monotonic() + for_s
    backoff, said = Backoff(), False
    while True:
        try:
            return await read()
        except Exception as exc:
            if not is_store_fault(exc) or (deadline is not None and time.monotonic() >= deadline):
                raise
            from swarmkit.store import is_transient

            if not is_transient(exc):
                raise
            if not said:
                err(say(exc))
                said = True
            await asyncio.sleep(backoff.next())


async def _opened(args) -> Store:
    """`_open`; for a verb that follows (`logs -f`, `status --watch`), again after a transient fault, for a while."""
    if not (getattr(args, "follow", False) or getattr(args, "watch", False)):
        return await _open(args)
    return await riding_out(
        lambda: _open(args),
        lambda exc: f"cannot reach the store ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); trying again",
        OPEN_RIDE_OUT_S,
    )


async def _open(args) -> Store:
    if args.verb in LITE_VERBS and not getattr(args, "watch", False):
        from swarmkit.store.lite import LiteStore, lite_location

        lite = lite_location(args.store, getattr(args, "workspace", None))
        if lite is not None:
            return await LiteStore.open(lite)  # type: ignore[return-value]  # the part of a Store's face these verbs use
    from swarmkit.runtime.settings import application_name
    from swarmkit.store import Store, resolve_store

    hosting = args.verb in HOSTING_VERBS
    loc = resolve_store(args.store, getattr(args, "workspace", None))
    role = args.verb if args.verb in ("worker", "serve") else "cli"
    # A verb that neither hosts nor serves runs its store calls inline (see Store): on SQLite
    # no asyncio layer, ORM or aiosqlite thread for a process that does one thing and exits.
    # A host (a worker, `serve`, a `run` hosting here) takes two connections on PostgreSQL, the
    # hot path's and the rest's; a verb that does one thing takes one.
    return await Store.open(
        loc=loc, create=hosting, upgrade=hosting and loc.is_sqlite, inline=not hosting,
        application_name=application_name(role), connections=2 if hosting else 1,
    )


async def with_store(args, fn: Callable[[Store], Awaitable[int]]) -> int:
    store = await open_store(args)
    try:
        if args.verb in HOSTING_VERBS or args.verb == "cancel":
            await _sweep(store)
        return await fn(store)
    finally:
        await store.close()


async def _sweep(store: Store) -> None:
    """Workspaces of this host whose destroy another machine recorded: this is the next swarmkit process here."""
    import logging

    from swarmkit.runtime.text import plain
    from swarmkit.runtime.workspaces import sweep
    from swarmkit.store import STORE_FAULTS

    try:
        for line in await sweep(store):
            err(plain(line))
    except STORE_FAULTS as exc:
        logging.getLogger("swarmkit.cli").info("workspace sweep failed: %s", exc)


def describe_store_fault(exc: BaseException, args) -> str:
    from swarmkit.store import StoreError, describe_db_error, resolve_store

    try:
        loc = resolve_store(getattr(args, "store", None), getattr(args, "workspace", None))
    except StoreError:
        return f"store error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return describe_db_error(exc, loc)


__all__ = ["ExitCode", "add_notify", "add_output", "add_run_id", "add_store", "add_workspace", "duration", "err", "open_store", "verb", "with_store"]
