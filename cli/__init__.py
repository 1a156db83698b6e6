"""`swarmkit`: run, host, stop, resume, cancel, approve, watch and audit runs from any terminal.

The command is cli/command.py, with one module per verb (or noun) beside it. Importing this package
loads none of them: the console's parsers share its helpers (inert_parser.py, quantities.py,
version_action.py) and pay for no verb's parser.
"""

from __future__ import annotations

import gc

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see common.py)
if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """The `swarmkit` entry point (pyproject's `[project.scripts]`)."""
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from .command import build_parser as build  # late: as main's, no verb's parser for the console's helpers

    return build(only)
