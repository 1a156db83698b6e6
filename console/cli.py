"""`swarmkit-console`: the operator console, its headless `--once` dump, the demo, and `serve`.

Its entry point (pyproject's `[project.scripts]`, and `python -m swarmkit.console.cli`, which
console/web.py runs per browser session). Importing this module loads neither the store's engine
(SQLAlchemy) nor asyncio nor Textual: `main` turns the cyclic garbage collector off first, and they
load after it, with console/start.py. The parsers are console/command_line.py's.
"""

from __future__ import annotations

import gc
import sys

from .command_line import build_demo_parser, build_parser, command, err

__all__ = ["build_demo_parser", "build_parser", "command", "err", "main"]


def main(argv: list[str] | None = None) -> int:
    # Start-up makes a few hundred thousand objects that live as long as the process
    # (modules, classes, the app's styles): the cyclic collector walking them again and
    # again while they load is a large share of the CPU before the first frame. It is off until
    # then; the app turns it back on once its first frame is drawn (ConsoleApp.on_mount).
    gc.disable()
    try:
        from .start import start  # late: the store, asyncio and Textual load with the collector off, not when this module is imported

        return start(list(sys.argv[1:] if argv is None else argv))
    finally:
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
