"""The exit codes of `swarmkit` and `swarmkit-console`: one list, documented in the README."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    # Done, or nothing to do (a stop of a run already stopping is not a failure).
    OK = 0
    # Refused (a stop of an ended run), failed (the run hosted here failed), or the store faulted.
    FAILED = 1
    # Bad usage: a wrong argument, an unknown or ambiguous run, a bad flow, no store where one was named.
    USAGE = 2
    # Interrupted by Ctrl-C (SIGINT) while following or watching: 128 + SIGINT, as shells report it.
    INTERRUPTED = 130
