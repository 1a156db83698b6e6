"""`swarmkit serve`: the HTTP API on uvicorn, and (unless --no-host) a Worker in the same process and loop.

The worker is the same `Worker` that `swarmkit worker` runs: hosting here is
not a second implementation. Signals are this verb's, not uvicorn's: the first
stops listening and parks hosted runs at their next boundary (as a worker's
first signal does), a second leaves them at once (they become lost, resumable).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from swarmkit.runtime.echo_thread import Echo
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.log_lines import LogLines
from swarmkit.runtime.notifier import Notifier
from swarmkit.runtime.notify_config import notify_config
from swarmkit.runtime.settings import env_number
from swarmkit.runtime.worker import Worker
from swarmkit.store import Store

from .app import create_app
from .auth import TokenError, load_tokens
from .http_trust import allowed_hosts, check_origin, is_loopback


class _Server(uvicorn.Server):
    @contextmanager
    def capture_signals(self):
        yield  # this verb handles its signals: uvicorn's would re-raise them after the drain began

    def install_signal_handlers(self) -> None:  # uvicorn before 0.29
        return


def _keepalive_s() -> float:
    # The one rule of every timing variable (nan and inf were taken here: a stream that never kept alive).
    return env_number("SWARMKIT_SSE_KEEPALIVE", 15.0)


async def cmd_serve(args, with_store: Callable[[Any, Callable[[Store], Awaitable[int]]], Awaitable[int]]) -> int:
    # --port and --concurrency are checked as they are parsed (quantities.Port, Count).
    try:
        tokens = load_tokens(args.tokens)
    except TokenError as exc:
        raise UsageError(str(exc)) from None
    if not tokens and not is_loopback(args.host) and not args.insecure:
        raise UsageError(
            f"refusing to serve on {args.host} with no token configured: anyone who reaches it could stop and cancel runs. "
            "Give --tokens FILE (or SWARMKIT_TOKENS), or --insecure to serve without auth anyway."
        )
    hosts = allowed_hosts(args.host, args.allowed_host)
    cors = tuple(dict.fromkeys(check_origin(o) for o in args.cors_origin))
    flows = Path(args.flows).resolve() if args.flows else None  # noqa: ASYNC240  (before any work starts)
    if flows is not None and not flows.is_dir():
        raise UsageError(f"--flows {args.flows}: not a folder")
    keepalive = _keepalive_s()
    notify = notify_config(args.notify, os.environ)

    lines = LogLines(args.log_format, logger="swarmkit.serve")
    lines.install()

    async def go(store: Store) -> int:
        raw = Echo()
        # Every line this process prints after its time (or as JSON), as a worker's are.
        echo = lambda m: raw(lines(m))
        worker = None if args.no_host else Worker(store, concurrency=args.concurrency, say=echo, notify=notify)
        # Serving only, it still delivers the store's notifications when asked to.
        notifier = Notifier(store, notify) if notify and worker is None else None
        notifying = asyncio.create_task(notifier.run(), name="notify") if notifier else None
        app = create_app(store, tokens=tokens, flows=flows, worker=worker, keepalive_s=keepalive, allowed_hosts=hosts, cors_origins=cors)
        ctx = app.state.ctx
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="off",
            server_header=False, timeout_graceful_shutdown=3,
        )
        server = _Server(config)
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        presses = {"n": 0}

        def on_signal() -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                parks = "; hosted runs go back to the queue at their next agent boundary (signal again to leave them now)" if worker else ""
                echo(f"swarmkit serve: shutting down{parks}")
                server.should_exit = True
                ctx.closing.set()
                if worker is not None:
                    worker.drain()
                if notifier is not None:
                    notifier.drain()  # no attempt more; those in flight until their deadline or the grace
            else:
                server.force_exit = True
                if main:
                    main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        hosting = asyncio.create_task(worker.run(), name="serve-worker") if worker else None
        announce = asyncio.create_task(_announce(server, args.host, store, worker, bool(tokens), echo))
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits when it cannot bind; it has said why
            if worker is not None:
                worker.drain()
            if hosting:
                await hosting
            return ExitCode.FAILED
        except asyncio.CancelledError:
            echo("swarmkit serve: left its runs; they become lost after the lease and can be resumed.")
            if hosting:
                hosting.cancel()
            raw.flush()
            return ExitCode.OK
        finally:
            announce.cancel()
            if notifying is not None and notifier is not None:
                # Its attempts in flight end by their deadline or the shutdown grace (at once on a second
                # signal), given back to the outbox, before the store closes.
                if presses["n"] > 1:
                    notifying.cancel()
                else:
                    notifier.drain()
                await asyncio.gather(notifying, return_exceptions=True)
        try:
            if hosting:
                if worker is not None:
                    worker.drain()
                await hosting
        except asyncio.CancelledError:
            echo("swarmkit serve: left its runs; they become lost after the lease and can be resumed.")
        raw.flush()
        return ExitCode.OK

    return await with_store(args, go)


async def _announce(server: uvicorn.Server, host: str, store: Store, worker: Worker | None, auth: bool, echo: Callable[[str], None]) -> None:
    """One line once listening, with the real port (tests and scripts give --port 0 and read it)."""
    while not server.started:  # noqa: ASYNC110  (uvicorn offers a flag, not an event)
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else "?"
    shown = f"[{host}]" if ":" in host else host
    hosting = f"hosting up to {worker.concurrency} runs" if worker else "not hosting runs (--no-host)"
    access = "bearer tokens" if auth else "no auth (loopback only)" if is_loopback(host) else "NO AUTH (--insecure)"
    echo(f"swarmkit serve: listening on http://{shown}:{port} ({store.loc.display}; {hosting}; {access})")
