"""What the verbs' commands share: opening the store, riding out a store that is away, and stderr.

Loaded when a verb runs (cli/verb_runner.py), never to build the parser. A one-shot verb on a SQLite
file (`status`, `stop`) opens it through sqlite3 alone (store/lite.py): what would load SQLAlchemy is
imported only on the paths that open the full store.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from swarmkit.runtime.backoff import Backoff
from swarmkit.runtime.echo import say
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.settings import application_name
from swarmkit.runtime.text import plain, plain_lines
from swarmkit.runtime.workspaces import sweep
from swarmkit.store.lite import LiteStore, lite_location
from swarmkit.store.loopless import loop_needed
from swarmkit.store.masking import masked
from swarmkit.store.store_errors import is_store_fault

from .common import PROG

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import TypeVar

    from swarmkit.store import Store

    T = TypeVar("T")

# Only verbs that host runs make a store; on a local SQLite file they may upgrade it too.
# A shared store is upgraded by `swarmkit db upgrade` alone.
HOSTING_VERBS = frozenset({"run", "worker", "serve"})
# One-shot verbs that open a SQLite store through sqlite3 alone (store/lite.py): no SQLAlchemy
# loaded, which is most of such a verb's start-up (issue 13), and that run with no event loop
# (store/loopless.py; issue 31). A watch (`status -w`) polls on: it opens a `Store`, on the loop.
LITE_VERBS = frozenset({"status", "stop", "resume", "approve", "cancel"})
# How long `logs -f` and `status --watch` wait for a store that is away when they start (a
# server restarting): past it, the error is said, as for any verb (a wrong host must not hang).
OPEN_RIDE_OUT_S = 30.0


def err(msg: str) -> None:
    """An error or a warning: on stderr, once, with its password hidden and no control sequence."""
    say(f"{PROG}: {plain_lines(masked(msg))}", sys.stderr)


def run_and_workspace(args, name: str) -> str | None:
    """`[RUN_ID] [WORKSPACE]`: sets args.workspace, returns the run id. One argument is the workspace if it is a folder."""
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


async def open_store(args) -> Store:
    store = await _opened(args)
    if store.loc.stale_warning:
        err(f"{store.loc.display}: {store.loc.stale_warning}")
    return store


async def riding_out(read: Callable[[], Awaitable[T]], say: Callable[[BaseException], str], for_s: float | None = None) -> T:
    """`read()`, again after each transient store fault (said once, `say(fault)`, on stderr), with the
    outage backoff (runtime/backoff.py); for ever, or for `for_s` seconds, after which the fault is raised."""
    deadline = None if for_s is None else time.monotonic() + for_s
    backoff, said = Backoff(), False
    while True:
        try:
            return await read()
        except Exception as exc:
            if not is_store_fault(exc) or (deadline is not None and time.monotonic() >= deadline):
                raise
            from swarmkit.store import is_transient  # late: store/store_faults.py loads SQLAlchemy; only after a store fault

            if not is_transient(exc):
                raise
            if not said:
                err(say(exc))
                said = True
            await loop_needed()
            import asyncio  # late: a one-shot verb on a lite store runs without it (store/loopless.py)

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
        lite = lite_location(args.store, getattr(args, "workspace", None))
        if lite is not None:
            return await LiteStore.open(lite)  # type: ignore[return-value]  # the part of a Store's face these verbs use
    from swarmkit.store import Store, resolve_store  # late: the full store (SQLAlchemy); `status` and `stop` on a SQLite file load none

    await loop_needed()  # the full store runs on the event loop

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


async def swept_lines(store: Store) -> list[str]:
    """The workspace sweep every verb that hosts runs (or cancels one) does first: this host's workspaces
    whose destroy another machine recorded, a line each for stderr. A store fault is logged, not
    raised: the verb goes on."""
    try:
        return [plain(line) for line in await sweep(store)]
    except Exception as exc:
        if not is_store_fault(exc):
            raise
        import logging  # late: logging loads only where something is logged (cli/verb_runner.py)

        logging.getLogger("swarmkit.cli").info("workspace sweep failed: %s", exc)
        return []


async def with_store(args, fn: Callable[[Store], Awaitable[int]]) -> int:
    store = await open_store(args)
    try:
        if args.verb in HOSTING_VERBS or args.verb == "cancel":
            for line in await swept_lines(store):
                err(line)
        return await fn(store)
    finally:
        await store.close()


__all__ = ["HOSTING_VERBS", "LITE_VERBS", "err", "open_store", "riding_out", "run_and_workspace", "with_store"]
