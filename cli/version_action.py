"""`--version` of `swarmkit` and `swarmkit-console`: the version, and the store schema revision this code wants."""

from __future__ import annotations

import argparse

# This distribution's version: pyproject.toml reads it from here (`[tool.setuptools.dynamic]`),
# so it is written once; `--version` then needs no look through the installed distributions
# (importlib.metadata would cost `swarmkit --version` a large share of Python's own start-up).
VERSION = "0.1.0"


class VersionAction(argparse.Action):
    """Worked out only when asked: no other use of either command reads the schema revision."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help="print the version and the store schema revision it wants, and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog))
        parser.exit()


def version_line(prog: str) -> str:
    """`swarmkit 0.1.0 (store schema revision 0003)`: what `swarmkit db status` compares a store with."""
    from swarmkit.store.revisions import head_revision  # late: `--version` alone reads the migration files

    return f"{prog} {VERSION} (store schema revision {head_revision()})"
