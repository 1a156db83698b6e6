"""`swarmkit-console`: the operator console, its headless `--once` dump, and the demo.

Importing this module loads neither the store (SQLAlchemy) nor asyncio nor Textual:
`main` turns the cyclic garbage collector off first, and they load after it (see `main`).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

from swarmkit.cli.inert_parser import InertParser
from swarmkit.cli.quantities import Seconds
from swarmkit.cli.version_action import VersionAction
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.text import plain

from .store_probe import probe_store


def build_parser() -> argparse.ArgumentParser:
    p = InertParser(
        prog="swarmkit-console",
        description=(
            "Watch and steer Swarmkit runs. `swarmkit-console demo` opens it on a demo store with a live worker; "
            "`swarmkit-console serve` serves it in a browser (the web extra)."
        ),
    )
    p.add_argument("workspace", nargs="?", help="the workspace whose store to open (default: here); `demo` starts the demo, `serve` serves it in a browser")
    p.add_argument("--store", metavar="URL", help="store URL (default: SWARMKIT_STORE, else <workspace>/.swarmkit/store.db)")
    p.add_argument("--once", action="store_true", help="print the runs and exit")
    p.add_argument("--json", action="store_true", help="with --once: JSON")
    p.add_argument("--read-only", action="store_true", help="no acts: watch only")
    p.add_argument("--poll", type=Seconds(), default=1.0, metavar="SECONDS", help="how often to read the store (default 1)")
    p.add_argument("--theme", metavar="NAME", help="a Textual theme, e.g. textual-light (default: the last one chosen in the palette)")
    p.add_argument("--version", action=VersionAction)
    return p


def build_demo_parser() -> argparse.ArgumentParser:
    p = InertParser(
        prog="swarmkit-console demo",
        description="Open the console on a demo store of its own: a real worker hosting demo flows in every state.",
    )
    p.add_argument("folder", nargs="?", help="where the demo store and its runs go (default: a new temporary folder)")
    p.add_argument("--read-only", action="store_true", help="no acts: watch only")
    p.add_argument("--theme", metavar="NAME", help="a Textual theme, e.g. textual-light (default: the last one chosen in the palette)")
    return p


def err(msg: str) -> None:
    from swarmkit.store import masked

    # Whatever an error quotes (a URL, a driver's DSN), its password stays hidden.
    print(f"swarmkit-console: {plain(masked(msg))}", file=sys.stderr)


async def dump_once(store_url: str | None, workspace: str | None, as_json: bool) -> int:
    # Imported here: the console's first frame needs none of them (its start-up is measured in
    # bench/console_render.py).
    import json

    from swarmkit.runtime import control
    from swarmkit.runtime.report import clock_warning, runs_table
    from swarmkit.runtime.settings import Settings, application_name
    from swarmkit.store import Store
    from swarmkit.store.clock import store_now
    from swarmkit.store.queries import list_jobs, skewed_workers, workspaces_for
    from swarmkit.store.records import merged_view, run_list

    # Never creates a store: a mistyped path is an error, not an empty table.
    store = await Store.open(store_url, workspace, create=False, upgrade=False, inline=True, application_name=application_name("console"))
    try:
        lease_s = Settings.from_env().lease_s
        await control.mark_lost(store, lease_s)
        now = store_now()
        warning = clock_warning(await store.run_read(lambda c: skewed_workers(c, lease_s)))
        async with store.read() as conn:
            jobs = await conn.run_sync(list_jobs)
            wss = await conn.run_sync(workspaces_for, [j.id for j in jobs])
        stale = store.loc.stale_warning
        if as_json:
            # json.dumps escapes every control character, so the JSON stays inert text.
            doc = run_list([merged_view(j, wss.get(j.id, []), now) for j in jobs], store=store.loc.display)
            if warning:
                doc["clock_warning"] = warning
            if stale:
                doc["stale_warning"] = stale
            print(json.dumps(doc, indent=2, sort_keys=True))
        else:
            if stale:
                err(f"{store.loc.display}: {stale}")
            print(f"store: {plain(store.loc.display)}")
            if warning:
                err(f"warning: {warning}")
            # Every line once more through plain(): no column may carry an escape sequence.
            print("\n".join(plain(line) for line in runs_table(jobs, now).split("\n")))
    finally:
        await store.close()
    return ExitCode.OK


def run_console(store: str | None, workspace: str | None, *, read_only: bool, poll: float, theme: str | None = None) -> int:
    from .app import make_app

    app = make_app(store, workspace, read_only=read_only, poll_interval=poll, theme=theme)
    app.run()
    return ExitCode.OK


def run_demo(argv: list[str]) -> int:
    import asyncio
    import signal

    from .app import make_app
    from .demo_session import DemoSession

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


def command(name: str) -> str:
    """How to run the project's command `name` from here: its name when PATH finds this one, else its path
    (the console started as `.venv/bin/swarmkit-console`, its virtualenv not activated)."""
    import shutil
    from pathlib import Path

    started = Path(sys.argv[0])
    if started.name != "swarmkit-console":
        return name  # run some other way (`python -m`): the installed names are all we know
    beside = started.with_name(name)
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == beside.resolve():
        return name
    return str(beside) if beside.exists() else name


def _tell(message: str) -> None:
    """Say it on stdout; a terminal that closed (the console ended for it) hears nothing, and the demo is stopped all the same."""
    try:
        print(message, flush=True)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    # Start-up makes a few hundred thousand objects that live as long as the process
    # (modules, classes, the app's styles): the cyclic collector walking them again and
    # again while they load is a fifth of the CPU before the first frame. It is off until
    # then; the app turns it back on once its first frame is drawn (ConsoleApp.on_mount).
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: list[str] | None) -> int:
    import asyncio

    from swarmkit.store import NoStoreError, StoreError, StoreUrlError, resolve_store
    from swarmkit.store.lite import lite_location
    from swarmkit.store.masking import log_to_stderr
    from swarmkit.store.store_errors import is_store_fault

    log_to_stderr(os.environ.get("SWARMKIT_LOG", "WARNING"), "swarmkit-console")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        return run_demo(argv[1:])
    if argv[:1] == ["serve"]:
        gc.enable()  # a server for hours, with no first frame of its own
        # textual-serve and aiohttp are imported there only: no other use starts slower.
        from .web import run_serve

        return run_serve(argv[1:], err)
    args = build_parser().parse_args(argv)
    if args.json and not args.once:
        print("swarmkit-console: --json goes with --once", file=sys.stderr)
        return ExitCode.USAGE
    try:
        # A plain SQLite file needs no parsing (SQLAlchemy's URL type loads all of it: a third of start-up).
        if lite_location(args.store, args.workspace) is None:
            resolve_store(args.store, args.workspace)
    except StoreUrlError as exc:
        err(str(exc))
        return ExitCode.USAGE
    if args.once:
        gc.enable()
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
    if args.theme is not None and (problem := theme_problem(args.theme)):
        err(problem)
        return ExitCode.USAGE
    problem = probe_store(args.store, args.workspace)
    if problem is not None:
        err(problem)
        return ExitCode.USAGE
    return run_console(args.store, args.workspace, read_only=args.read_only, poll=args.poll, theme=args.theme)


def theme_problem(name: str) -> str | None:
    from textual.theme import BUILTIN_THEMES

    if name in BUILTIN_THEMES:
        return None
    return f"no theme {plain(name, 40)!r}; the themes are: {', '.join(sorted(BUILTIN_THEMES))}"


if __name__ == "__main__":
    sys.exit(main())
