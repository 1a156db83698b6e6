"""`swarmkit`: run, host, stop, resume, cancel, approve, watch and audit runs from any terminal.

The command is cli/command.py, with one module per verb (or noun) beside it. Importing this package
loads none of them: the console's parsers share its helpers (inert_parser.py, quantities.py,
version_action.py) and pay for no verb's parser.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main", "run"]


def main(argv: list[str] | None = None) -> int:
    """`swarmkit ARGV` as a function: its exit code (what the command's entry point `run` calls, and what
    the tests call in process)."""
    # Start-up makes tens of thousands of objects that live as long as the process (modules,
    # classes, the parser): the cyclic collector walking them again and again while they load is
    # a share of a one-shot verb's time. It is off until a verb that may run long turns it back on
    # (cli/verb_runner.py: a host, a watch, a follow), as the console's is until its first frame.
    gc.disable()
    try:
        from .command import main as run  # late: `import swarmkit.cli` (the console's, for its parsing helpers) loads no verb

        return run(argv)
    finally:
        gc.enable()


def run() -> None:
    """The `swarmkit` command itself (pyproject's `[project.scripts]`, `python -m swarmkit.cli`): `main`, then exit.

    A one-shot verb that ran with no event loop, no thread and no tracer (a lite store's `status`,
    `stop`, ...) has nothing left to tear down that matters: its store is closed and its output is
    flushed here. Tearing down the interpreter's modules one by one took 7 ms of its 53 (issue 31:
    one-shot verbs at most 3x `python -c pass`), so such a process leaves at once. Anything else
    exits the usual way: an event loop's, a thread's or coverage's work at exit is theirs.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # `swarmkit status | head -1`: the reader has what it wanted
    if not any(name in sys.modules for name in ("asyncio", "threading", "coverage")):
        os._exit(code)
    sys.exit(code)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from .command import build_parser as build  # late: as main's, no verb's parser for the console's helpers

    return build(only)
