"""The argument parser of `swarmkit` and `swarmkit-console`: its usage errors are said as inert text.

argparse quotes some words as given (`unrecognized arguments: ...`, `ambiguous option: ...`): a word
that holds a terminal's escapes would reach the terminal raw.
"""

from __future__ import annotations

import argparse


class InertParser(argparse.ArgumentParser):
    """An ArgumentParser whose error messages pass through `text.plain` (its subparsers are of this class too)."""

    def error(self, message: str):  # type: ignore[override]
        from .text import plain

        super().error(plain(message))
