"""Best-effort output: a closed pipe or a stuck terminal never changes a run's fate.

`swarmkit run flow.toml | head -1` closes the pipe after one line; a terminal
paused with Ctrl-S stops reading. Either would otherwise raise in, or block,
the code that hosts the run. `say` writes one message and goes on when the
pipe is closed; a process that hosts runs echoes their lines through `Echo`
(echo_thread.py), a bounded queue and a thread of its own.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import TextIO


def say(text: str, stream: TextIO | None = None) -> None:
    """Print one message, best effort: a closed pipe is not an error of the run."""
    out = stream or sys.stdout
    try:
        out.write(text + "\n")
        out.flush()
    except (OSError, ValueError):
        silence(out)


def silence(stream: TextIO) -> None:
    """A stream whose reader went away, pointed at /dev/null: later writes (and the interpreter's
    flush at exit) must not raise either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
