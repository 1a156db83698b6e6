"""The argument parser of `swarmkit` and `swarmkit-console`: its usage errors are said as inert text.

argparse quotes some words as given (`unrecognized arguments: ...`, `ambiguous option: ...`): a word
that holds a terminal's escapes would reach the terminal raw.
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (see cli/common.py)
if TYPE_CHECKING:
    from typing import NoReturn


class InertParser(argparse.ArgumentParser):
    """An ArgumentParser whose error messages pass through `text.plain` (its subparsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        from swarmkit.runtime.text import plain  # late: a usage error alone needs it; `--help` compiles none of its patterns

        super().error(plain(message))
