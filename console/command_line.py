"""`swarmkit-console`'s command line: its parsers, how it says an error, and how it names the project's
commands. Cheap to import (console/cli.py imports it before the collector is turned off): neither the
store's engine nor asyncio nor Textual.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from swarmkit.cli.inert_parser import InertParser
from swarmkit.cli.quantities import Seconds
from swarmkit.cli.version_action import VersionAction
from swarmkit.runtime.text import plain
from swarmkit.store.masking import masked

# A console that read the store more often than this would spend a core on it and show nothing sooner
# (a frame takes about as long): `--poll 1e-300` was taken.
MIN_POLL_S = 0.05


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
    p.add_argument("--poll", type=Seconds(least=MIN_POLL_S), default=1.0, metavar="SECONDS", help="how often to read the store (default 1)")
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
    # Whatever an error quotes (a URL, a driver's DSN), its password stays hidden.
    print(f"swarmkit-console: {plain(masked(msg))}", file=sys.stderr)


def theme_problem(name: str) -> str | None:
    """What is wrong with `--theme NAME`; None when Textual has that theme."""
    from textual.theme import BUILTIN_THEMES  # late: Textual, only when --theme is given; --once and serve load none

    if name in BUILTIN_THEMES:
        return None
    return f"no theme {plain(name, 40)!r}; the themes are: {', '.join(sorted(BUILTIN_THEMES))}"


def command(name: str) -> str:
    """How to run the project's command `name` from here: its name when PATH finds this one, else its path
    (the console started as `.venv/bin/swarmkit-console`, its virtualenv not activated)."""
    started = Path(sys.argv[0])
    if started.name != "swarmkit-console":
        return name  # run some other way (`python -m`): the installed names are all we know
    beside = started.with_name(name)
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == beside.resolve():
        return name
    return str(beside) if beside.exists() else name
