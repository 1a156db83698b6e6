"""`swarmkit-console`'s start, once the cyclic collector is off (console/cli.py): the mode the command
line asks for (the demo, `serve`, `--once`, or the console itself), its store checked first.

Each mode's own modules load in that mode alone: Textual for the console and the demo, the store's
full read path (SQLAlchemy) for --once, textual-serve for serve.
"""

from __future__ import annotations

import asyncio
import gc
import os

from swarmkit.runtime.exit_code import ExitCode
from swarmkit.store.lite import lite_location
from swarmkit.store.masked_log import log_to_stderr
from swarmkit.store.store_errors import NoStoreError, StoreError, StoreUrlError, is_store_fault
from swarmkit.store.store_location import resolve_store

from .command_line import build_parser, err, theme_problem
from .store_probe import probe_store


def start(argv: list[str]) -> int:
    """Run `swarmkit-console ARGV`; its exit code."""
    try:
        log_to_stderr(os.environ.get("SWARMKIT_LOG", "WARNING"), "swarmkit-console")
    except ValueError as exc:
        err(str(exc))
        return ExitCode.USAGE
    if argv[:1] == ["demo"]:
        from .demo_run import run_demo  # late: the demo's session and Textual; no other mode loads the demo's

        return run_demo(argv[1:])
    if argv[:1] == ["serve"]:
        gc.enable()  # a server for hours, with no first frame of its own
        from .web import run_serve  # late: the browser console's door (textual-serve, aiohttp); no other mode starts slower

        return run_serve(argv[1:], err)
    args = build_parser().parse_args(argv)
    if args.json and not args.once:
        err("--json goes with --once")
        return ExitCode.USAGE
    try:
        # A plain SQLite file needs no parsing (SQLAlchemy's URL type loads all of it: a large part of start-up).
        if lite_location(args.store, args.workspace) is None:
            resolve_store(args.store, args.workspace)
    except StoreUrlError as exc:
        err(str(exc))
        return ExitCode.USAGE
    if args.once:
        gc.enable()
        return _once(args)
    if args.theme is not None and (problem := theme_problem(args.theme)):
        err(problem)
        return ExitCode.USAGE
    problem = probe_store(args.store, args.workspace)
    if problem is not None:
        err(problem)
        return ExitCode.USAGE
    return run_console(args.store, args.workspace, read_only=args.read_only, poll=args.poll, theme=args.theme)


def _once(args) -> int:
    from .once_dump import dump_once  # late: the store's full read path (SQLAlchemy, the runtime's control); the console's first frame loads none

    try:
        return asyncio.run(dump_once(args.store, args.workspace, args.json))
    except NoStoreError as exc:
        err(str(exc))
        return ExitCode.USAGE
    except StoreError as exc:
        err(str(exc))
        return ExitCode.FAILED
    except Exception as exc:
        if not is_store_fault(exc):
            raise
        err(f"store error: {exc}")
        return ExitCode.FAILED


def run_console(store: str | None, workspace: str | None, *, read_only: bool, poll: float, theme: str | None = None) -> int:
    from .app import make_app  # late: Textual and the app, after the store is found; --once and serve load none

    app = make_app(store, workspace, read_only=read_only, poll_interval=poll, theme=theme)
    app.run()
    return ExitCode.OK
