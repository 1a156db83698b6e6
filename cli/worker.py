"""`swarmkit worker [WORKSPACE]`: claim queued runs and host many at once, until signalled."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import TYPE_CHECKING

from swarmkit.runtime.echo_thread import Echo
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.log_lines import LogLines
from swarmkit.runtime.notify_config import notify_config
from swarmkit.runtime.worker import Worker

from .store_access import with_store

if TYPE_CHECKING:
    from swarmkit.store import Store


async def cmd_worker(args) -> int:
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
