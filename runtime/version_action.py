"""`--version` of `swarmkit` and `swarmkit-console`: the version, and the store schema revision this code wants."""

from __future__ import annotations

import argparse


class VersionAction(argparse.Action):
    """Worked out only when asked: no other use of either command reads the schema revision."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help="print the version and the store schema revision it wants, and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog))
        parser.exit()


def version_line(prog: str) -> str:
    """`swarmkit 0.1.0 (store schema revision 0003)`: what `swarmkit db status` compares a store with."""
    from swarmkit.store.revisions import head_revision

    from .settings import version

    return f"{prog} {version()} (store schema revision {head_revision()})"
