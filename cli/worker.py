"""`swarmkit worker [WORKSPACE]`: claim queued runs and host many at once, until signalled."""

from __future__ import annotations

import signal

from swarmkit.runtime.log_lines import LogLines

from .common import ExitCode, add_log_format, add_notify, add_store, add_workspace, verb, with_store
from .quantities import MAX_CONCURRENCY, Count

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    from swarmkit.store import Store


def add_parsers(sub) -> None:
    p = verb(
        sub, "worker", "claim queued runs and host many at once",
        "Claim queued runs from the store and host up to --concurrency of them at once, until SIGINT or SIGTERM. "
        "The first signal drains: each run goes back to the queue at its next agent boundary; a second leaves them now "
        "(they show lost after their lease, resumable). Each line it prints starts with its RFC 3339 UTC time.",
        ["swarmkit worker --concurrency 8", "swarmkit worker --store postgresql://db.internal/swarmkit --log-format json"],
    )
    add_store(p)
    add_workspace(p)
    p.add_argument("--concurrency", type=Count(1, MAX_CONCURRENCY), default=4, metavar="N", help="runs hosted at once (default 4)")
    add_notify(p)
    add_log_format(p)


async def cmd_worker(args) -> int:
    import asyncio
    import os

    from swarmkit.runtime.echo import Echo
    from swarmkit.runtime.notify_config import notify_config
    from swarmkit.runtime.worker import Worker

    notify = notify_config(args.notify, os.environ)

    lines = LogLines(args.log_format)
    lines.install()

    async def go(store: Store) -> int:
        echo = Echo()
        worker = Worker(store, concurrency=args.concurrency, say=lambda m: echo(lines(m)), notify=notify)
        loop = asyncio.get_running_loop()
        presses = {"n": 0}
        main = asyncio.current_task()

        def on_signal() -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                echo(lines(f"{worker.name}: shutting down; its runs go back to the queue at their next agent boundary, for any worker (signal again to leave them now; they become lost, resumable)"))
                worker.drain()
            elif main:
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            await worker.run()
        except asyncio.CancelledError:
            echo(lines(f"{worker.name}: left its runs; they become lost after the lease and can be resumed."))
        echo.flush()
        return ExitCode.OK

    return await with_store(args, go)
