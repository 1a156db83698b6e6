"""`swarmkit-console demo`: the console on a demo store of its own, with a real worker, stopped when it ends.
Loaded for the demo alone (console/start.py)."""

from __future__ import annotations

import asyncio
import signal

from swarmkit.runtime.exit_code import ExitCode

from .app import make_app
from .command_line import build_demo_parser, command, err, theme_problem
from .demo_session import DemoSession


def run_demo(argv: list[str]) -> int:
    args = build_demo_parser().parse_args(argv)
    if args.theme is not None and (bad := theme_problem(args.theme)):
        err(bad)
        return ExitCode.USAGE
    session = DemoSession(args.folder)
    print(f"swarmkit-console demo: store and runs in {session.folder}", flush=True)
    problem: str | None = None
    try:
        session.start()
        app = make_app(session.store_url, session.folder, read_only=args.read_only, theme=args.theme)
        # A closed terminal (SIGHUP) ends the console the way `q` does, so the demo is stopped below.
        signal.signal(signal.SIGHUP, lambda *_: asyncio.get_running_loop().call_soon_threadsafe(app.exit))
        app.run()
        # Judged before the stop: the worker ending because we stopped it is no problem.
        problem = session.worker_problem()
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        session.stop(say=lambda m: _tell(f"swarmkit-console demo: {m}"))
    _tell(
        f"swarmkit-console demo: the demo store stays in {session.folder}; its unfinished runs are back in the queue,\n"
        "  stopped, or lost once their lease runs out (all resumable):\n"
        f"  look again:           {command('swarmkit-console')} {session.folder}\n"
        f"  host its runs again:  {command('swarmkit')} worker {session.folder}   (then r on a stopped or lost run)"
    )
    return ExitCode.OK if problem is None else ExitCode.FAILED


def _tell(message: str) -> None:
    """Say it on stdout; a terminal that closed (the console ended for it) hears nothing, and the demo is stopped all the same."""
    try:
        print(message, flush=True)
    except OSError:
        pass
