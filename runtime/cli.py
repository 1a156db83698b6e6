"""`swarmkit`: run, host, stop, resume, cancel, approve and watch runs from any terminal."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .db_verbs import add_db_parser, cmd_db
from .echo import Echo, say
from .errors import AmbiguousRun, FlowError, RunNotFound, SwarmkitError, UsageError
from .settings import Settings, default_actor, version
from .text import plain, plain_lines

if TYPE_CHECKING:
    from swarmkit.store import Store
    from swarmkit.store.records import EventRecord

# Start-up (issue 13): this module's top loads only the parser's needs, so
# that `--help` loads no SQLAlchemy; each verb imports what it uses, and only
# a hosting verb the executor (and only a migration Alembic).

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def err(msg: str) -> None:
    from swarmkit.store import masked

    # Whatever an error quotes (a URL, a driver's DSN), its password stays hidden.
    say(f"swarmkit: {masked(msg)}", sys.stderr)


class _Version(argparse.Action):
    """`--version`, its text made only when asked for: reading the distribution's metadata costs `--help` time."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"swarmkit {version()}")
        parser.exit()


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="URL", help="store URL (default: SWARMKIT_STORE, else <workspace>/.swarmkit/store.db)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swarmkit", description="Run control for agent runs: run, stop, resume, cancel, approve, watch.")
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True

    p = sub.add_parser("run", help="run a flow here (or --detach to queue it, --resume to continue a run)")
    _common(p)
    p.add_argument("args", nargs="*", metavar="FLOW [WORKSPACE]", help="the flow file, then optionally the workspace")
    p.add_argument("--input", action="append", metavar="KEY=VALUE", default=[], help="an input for the run (repeatable)")
    p.add_argument("--detach", action="store_true", help="queue the run for a worker and print only its id")
    p.add_argument("--resume", metavar="RUN_ID", help="claim a stopped, deferred or lost run and host it here")

    p = sub.add_parser("worker", help="claim queued runs and host many at once")
    _common(p)
    p.add_argument("workspace", nargs="?")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="runs hosted at once (default 4)")

    for verb, text in (("stop", "stop a run at its next agent boundary (resumable)"), ("approve", "approve a run waiting at a gate"), ("resume", "queue a stopped, deferred or lost run for a worker")):
        p = sub.add_parser(verb, help=text)
        _common(p)
        p.add_argument("run_id", metavar="RUN_ID")
        p.add_argument("workspace", nargs="?")

    p = sub.add_parser("cancel", help="end a run for good (destroys its workspaces unless --keep)")
    _common(p)
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("workspace", nargs="?")
    p.add_argument("--keep", action="store_true", help="keep the run's workspaces")

    p = sub.add_parser("logs", help="print a run's events (-f follows until it ends)")
    _common(p)
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("workspace", nargs="?")
    p.add_argument("-f", "--follow", action="store_true")

    add_db_parser(sub, _common)

    p = sub.add_parser("serve", help="serve the HTTP API, hosting runs like a worker")
    _common(p)
    p.add_argument("workspace", nargs="?")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; beyond loopback needs tokens or --insecure)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one and prints it)")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="runs hosted at once (default 4)")
    p.add_argument("--flows", metavar="DIR", help="folder of flow files that POST /jobs may start, by name")
    p.add_argument("--no-host", action="store_true", help="serve the API only; workers elsewhere host the runs")
    p.add_argument("--tokens", metavar="FILE", help="bearer tokens, one `name scope token` a line (default: SWARMKIT_TOKENS)")
    p.add_argument("--insecure", action="store_true", help="allow listening beyond loopback with no token configured")

    p = sub.add_parser("status", help="list runs, or show one run")
    _common(p)
    p.add_argument("args", nargs="*", metavar="[RUN_ID] [WORKSPACE]")
    p.add_argument("--json", action="store_true", help="the merged view as JSON")
    p.add_argument("--all", action="store_true", help="include every ended run, not just the recent ones")
    return parser


# Only verbs that host runs make a store; on a local SQLite file they may upgrade it too.
# A shared store is upgraded by `swarmkit db upgrade` alone.
HOSTING_VERBS = frozenset({"run", "worker", "serve"})


async def _open(args) -> Store:
    from swarmkit.store import Store, resolve_store

    hosting = args.verb in HOSTING_VERBS
    loc = resolve_store(args.store, getattr(args, "workspace", None))
    # A verb that neither hosts nor serves runs its store calls inline (see Store): no aiosqlite thread.
    store = await Store.open(loc=loc, create=hosting, upgrade=hosting and loc.is_sqlite, inline=not hosting)
    if store.loc.stale_warning:
        err(f"{store.loc.display}: {store.loc.stale_warning}")
    return store


async def with_store(args, fn: Callable[[Store], Awaitable[int]]) -> int:
    store = await _open(args)
    try:
        if args.verb in HOSTING_VERBS or args.verb == "cancel":
            await _sweep(store)
        return await fn(store)
    finally:
        await store.close()


async def _sweep(store: Store) -> None:
    """Workspaces of this host whose destroy another machine recorded: this is the next swarmkit process here."""
    import logging

    from swarmkit.store import STORE_FAULTS

    from .workspaces import sweep

    try:
        for line in await sweep(store):
            err(plain(line))
    except STORE_FAULTS as exc:
        logging.getLogger("swarmkit.cli").info("workspace sweep failed: %s", exc)


# --- verbs ------------------------------------------------------------------


async def cmd_act(args) -> int:
    from . import control

    async def go(store: Store) -> int:
        if args.verb == "stop":
            res = await control.stop(store, args.run_id)
        elif args.verb == "cancel":
            res = await control.cancel(store, args.run_id, keep=args.keep)
        elif args.verb == "approve":
            res = await control.approve(store, args.run_id)
        else:
            res = await control.resume(store, args.run_id)
        # What was done goes to stdout; a refusal and a warning to stderr, where scripts look for them.
        if res.code == EXIT_OK:
            print(plain_lines(res.message))
        else:
            err(plain_lines(res.message))
        if res.changed and args.verb in ("approve", "resume"):
            if await control.live_worker_count(store, Settings.from_env().lease_s) == 0:
                err(control.no_worker_hint(res.job.short_id if res.job else args.run_id))
        return res.code

    return await with_store(args, go)


async def _host_foreground(store: Store, job_id: str, epoch: int, flow, *, resumed: bool) -> int:
    import asyncio

    from swarmkit.store import STORE_FAULTS, StoreReplaced, masked
    from swarmkit.store.queries import get_job, workspaces_for

    from . import control
    from .executor import RunHost

    loop = asyncio.get_running_loop()
    presses = {"n": 0}
    actor = default_actor()

    echo = Echo()

    def on_line(_job_id: str, node: str | None, line: str) -> None:
        echo(f"  {plain(node or '-', 20)} | {plain(masked(line))}")

    def on_sigint() -> None:
        presses["n"] += 1
        if presses["n"] == 1:
            loop.create_task(_say(control.stop(store, job_id, actor=actor), "\n(Ctrl-C again to cancel the run for good, keeping its workspace)"))
        elif presses["n"] == 2:
            # The console asks before it destroys a workspace; a second key
            # press cannot ask, so it keeps it and says where.
            loop.create_task(_say(control.cancel(store, job_id, actor=actor, keep=True), ""))

    async def _say(coro, extra: str) -> None:
        try:
            res = await coro
            say(plain_lines(res.message) + extra, sys.stderr)
        except Exception as exc:
            err(f"could not reach the store: {exc}")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError):
        pass
    host = RunHost(store, job_id, epoch, flow, on_line=on_line)
    try:
        status = await host.run()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except Exception:
            pass
        echo.flush()
    sid = job_id[:8]
    if status == "abandoned":
        try:
            async with store.read() as conn:
                now_row = await conn.run_sync(get_job, job_id)
        except STORE_FAULTS:
            now_row = None
        if now_row is not None and now_row.epoch != epoch:
            # This host was silent past its lease (frozen, cut off), and the run moved on.
            status = "fenced"
    if status == "abandoned":
        try:
            store.check_file()
        except StoreReplaced:
            err(f"{sid}: this process stopped hosting it and wrote nothing more: the store file it opened is not the one at {store.loc.display} any more.")
            return EXIT_FAIL
        err(
            f"{sid}: the store stayed out of reach; this process stopped hosting it and wrote nothing more. "
            f"It shows lost once its lease passes; resume it with `swarmkit run --resume {sid}`."
        )
        return EXIT_FAIL
    async with store.read() as conn:
        job = await conn.run_sync(get_job, job_id)
    if job is None:
        err(f"{sid} {status}, and its row is gone from {store.loc.display}")
        return EXIT_FAIL
    if status == "completed":
        say(f"{sid} completed ({job.step}/{job.steps} agents; {job.tokens:,} tokens, ${job.cost:.4f}).")
        return EXIT_OK
    if status == "stopped":
        say(f"{sid} stopped before {plain(job.current_node)} ({job.step}/{job.steps} agents done). Resume with `swarmkit run --resume {sid}`.")
        return EXIT_OK
    if status == "deferred":
        say(f"{sid} is waiting for approval at {plain(job.pending_gate)}. Approve with `swarmkit approve {sid}`, then `swarmkit run --resume {sid}` or a worker hosts it.")
        return EXIT_OK
    if status == "cancelled":
        async with store.read() as conn:
            kept = [w.path for w in (await conn.run_sync(workspaces_for, [job_id]))[job_id] if w.state == "kept"]
        where = f"; its workspace is kept at {', '.join(plain(p) for p in kept)}" if kept else ""
        say(f"{sid} cancelled{where}.")
        return EXIT_FAIL
    if status == "fenced":
        err(f"{sid} is now hosted elsewhere (this process's epoch {epoch} is gone); it stopped and wrote nothing more.")
        return EXIT_FAIL
    err(f"{sid} {status}: {plain(job.error or '')}")
    return EXIT_FAIL


def _module_names(stored: str) -> str:
    """The names of a run's stored modules, not their sources."""
    try:
        return ", ".join(sorted(json.loads(stored))) or "none"
    except (ValueError, TypeError):
        return "not readable"


async def cmd_run(args) -> int:
    from . import control
    from .executor import flow_for_job
    from .flow import load_flow, parse_inputs

    positional = list(args.args)
    if args.resume:
        if len(positional) > 1:
            raise UsageError("run --resume RUN_ID takes at most one more argument, the workspace")
        args.workspace = positional[0] if positional else None
        if args.input:
            raise UsageError("--input cannot be given with --resume: a resumed run keeps its inputs")

        async def resume_here(store: Store) -> int:
            res, job = await control.claim_for_resume(store, args.resume)
            say(plain_lines(res.message), sys.stderr if job is None else sys.stdout)
            if job is None:
                return res.code
            try:
                flow = flow_for_job(job.flow_source, job.flow_path)
            except FlowError as exc:
                err(str(exc))
                return EXIT_FAIL
            return await _host_foreground(store, job.id, job.epoch, flow, resumed=True)

        return await with_store(args, resume_here)

    if not positional:
        raise UsageError("run needs a flow file: swarmkit run FLOW [--input k=v]... [WORKSPACE]")
    if len(positional) > 2:
        raise UsageError(f"run takes a flow file and optionally a workspace, not {len(positional)} arguments")
    flow_path = positional[0]
    args.workspace = positional[1] if len(positional) > 1 else None
    # Refuse a bad flow or bad inputs before any run is created.
    flow = load_flow(flow_path)
    inputs = parse_inputs(args.input)

    async def go(store: Store) -> int:
        if args.detach:
            job = await control.submit(store, flow, inputs)
            print(job.id)
            return EXIT_OK
        job = await control.submit(store, flow, inputs, host_here=True)
        say(f"{job.short_id} running {plain(flow.name)} ({flow.steps} agents) on {store.loc.display}; Ctrl-C stops it at the next agent boundary.")
        return await _host_foreground(store, job.id, job.epoch, flow, resumed=False)

    return await with_store(args, go)


async def cmd_worker(args) -> int:
    import asyncio

    from .worker import Worker

    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")

    async def go(store: Store) -> int:
        echo = Echo()
        worker = Worker(store, concurrency=args.concurrency, say=lambda m: echo(plain_lines(m)))
        loop = asyncio.get_running_loop()
        presses = {"n": 0}
        main = asyncio.current_task()

        def on_signal() -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                echo(f"{worker.name}: shutting down; its runs go back to the queue at their next agent boundary, for any worker (signal again to leave them now; they become lost, resumable)")
                worker.drain()
            elif main:
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            await worker.run()
        except asyncio.CancelledError:
            echo(f"{worker.name}: left its runs; they become lost after the lease and can be resumed.")
        echo.flush()
        return EXIT_OK

    return await with_store(args, go)


def _event_line(ev: EventRecord) -> str:
    t = ev.at.strftime("%H:%M:%S")
    node = plain(ev.node or "-", 20)
    if ev.kind == "log":
        return f"{t} {node} | {plain(ev.text)}"
    if ev.kind == "node.started":
        return f"{t} ── {plain(ev.text)} ──"
    return f"{t} [{ev.kind}] {plain(ev.text)}"


async def cmd_logs(args) -> int:
    import asyncio

    from swarmkit.store import QUEUED, RUNNING, STORE_FAULTS, describe_db_error, is_transient
    from swarmkit.store.queries import events_after, get_job

    from . import control

    async def go(store: Store) -> int:
        job = await control.resolve_run(store, args.run_id)
        settings = Settings.from_env()
        last = 0  # events are read by id: after a lost connection, nothing prints twice
        delay = 0.3
        outage: str | None = None
        while True:
            try:
                async with store.read() as conn:
                    batch = await conn.run_sync(events_after, job.id, last, limit=2000)
                    current = await conn.run_sync(get_job, job.id) if args.follow and len(batch) < 2000 else None
                for ev in batch:
                    print(_event_line(ev))
                    last = ev.id
                sys.stdout.flush()
                if outage is not None:
                    print(f"swarmkit: the store answers again; following {job.short_id}", file=sys.stderr, flush=True)
                    outage, delay = None, 0.3
                if len(batch) == 2000:
                    continue
                if not args.follow:
                    return EXIT_OK
                if current is None or current.status not in (QUEUED, RUNNING):
                    # One more read: events written just before the end.
                    async with store.read() as conn:
                        for ev in await conn.run_sync(events_after, job.id, last, limit=100000):
                            print(_event_line(ev))
                            last = ev.id
                    print(f"-- {job.short_id} is {current.status if current else 'gone'} --")
                    return EXIT_OK
                await control.mark_lost(store, settings.lease_s)
            except STORE_FAULTS as exc:
                # A tail is a long-running reader: ride out a dropped
                # connection or a store that is away for a while.
                if not args.follow or not is_transient(exc):
                    raise
                if outage is None:
                    outage = describe_db_error(exc, store.loc)
                    print(f"swarmkit: lost the store ({outage}); trying again", file=sys.stderr, flush=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            await asyncio.sleep(0.3)

    return await with_store(args, go)


async def cmd_status(args) -> int:
    from swarmkit.store import merged_view, store_now
    from swarmkit.store.queries import list_jobs, skewed_workers, workspaces_for

    from . import control
    from .report import clock_warning, runs_table

    positional = list(args.args)
    run_ref = None
    args.workspace = None
    if len(positional) == 2:
        run_ref, args.workspace = positional
    elif len(positional) == 1:
        # One argument: a folder is the workspace, anything else a run id.
        if Path(positional[0]).is_dir():  # noqa: ASYNC240  (before any work starts)
            args.workspace = positional[0]
        else:
            run_ref = positional[0]
    elif len(positional) > 2:
        raise UsageError("status takes at most a run id and a workspace")

    async def go(store: Store) -> int:
        lease_s = Settings.from_env().lease_s
        await control.mark_lost(store, lease_s)
        now = store_now()
        warning = clock_warning(await store.run_read(lambda c: skewed_workers(c, lease_s)))
        if warning:
            err(warning)
        if run_ref:
            job = await control.resolve_run(store, run_ref)
            async with store.read() as conn:
                ws = (await conn.run_sync(workspaces_for, [job.id]))[job.id]
            view = merged_view(job, ws, now)
            if args.json:
                print(json.dumps(view, indent=2, sort_keys=True))
            else:
                for key in sorted(view):
                    value = view[key]
                    if key == "workspaces":
                        value = ", ".join(f"{w['path']} ({w['state']})" for w in value) or "-"
                    if key == "flow_source":
                        value = f"{len(str(value))} characters"
                    if key == "flow_modules" and value:
                        value = f"{_module_names(value)} ({len(value)} characters)"
                    print(f"{key:>20}: {plain(value if value is not None else '-')}")
            return EXIT_OK
        async with store.read() as conn:
            jobs = await conn.run_sync(list_jobs, ended_limit=10**9 if args.all else 50)
            wss = await conn.run_sync(workspaces_for, [j.id for j in jobs]) if args.json else {}
        if args.json:
            print(json.dumps([merged_view(j, wss.get(j.id, []), now) for j in jobs], indent=2, sort_keys=True))
        else:
            print(runs_table(jobs, now))
        return EXIT_OK

    return await with_store(args, go)


def describe_store_fault(exc: BaseException, args) -> str:
    from swarmkit.store import StoreError, describe_db_error, resolve_store

    try:
        loc = resolve_store(getattr(args, "store", None), getattr(args, "workspace", None))
    except StoreError:
        return f"store error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return describe_db_error(exc, loc)


async def cmd_serve(args) -> int:
    # Imported here only: no other verb pays for loading FastAPI and uvicorn.
    # `with_store` is handed over: under `python -m` this module is `__main__`,
    # and the serve package must not import a second copy of it.
    from .serve.run import cmd_serve as serve

    return await serve(args, with_store)


COMMANDS: dict[str, Callable[[Any], Coroutine[Any, Any, int]]] = {
    "run": cmd_run,
    "worker": cmd_worker,
    "stop": cmd_act,
    "cancel": cmd_act,
    "approve": cmd_act,
    "resume": cmd_act,
    "logs": cmd_logs,
    "status": cmd_status,
    "db": cmd_db,
    "serve": cmd_serve,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # argparse fills a `*` positional from one contiguous stretch only, so
    # `run flow.toml --input k=v WORKSPACE` would leave WORKSPACE over.
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "args") and not any(e.startswith("-") for e in extra):
            args.args = list(args.args) + extra
        elif len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "workspace", "") is None:
            args.workspace = extra[0]
        else:
            parser.error(f"{args.verb}: unrecognized arguments: {' '.join(extra)}")
    import asyncio

    from swarmkit.store import STORE_FAULTS, NoStoreError, StoreError, StoreUrlError
    from swarmkit.store.engine import log_to_stderr

    log_to_stderr(os.environ.get("SWARMKIT_LOG", "WARNING"), "swarmkit")
    try:
        return asyncio.run(COMMANDS[args.verb](args))
    except UsageError as exc:
        err(str(exc))
        return EXIT_USAGE
    except (RunNotFound, AmbiguousRun) as exc:
        err(plain(str(exc)))
        return EXIT_USAGE
    except FlowError as exc:
        err(plain(str(exc)))
        return EXIT_USAGE
    except SwarmkitError as exc:
        err(plain(str(exc)))
        return EXIT_FAIL
    except (StoreUrlError, NoStoreError) as exc:
        err(plain(str(exc)))
        return EXIT_USAGE
    except StoreError as exc:
        err(plain(str(exc)))
        return EXIT_FAIL
    except BrokenPipeError:
        # `swarmkit logs ID | head`: the reader has what it wanted.
        say("", sys.stdout)
        return EXIT_OK
    except STORE_FAULTS as exc:
        err(plain(describe_store_fault(exc, args)))
        return EXIT_FAIL
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
