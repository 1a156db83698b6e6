"""Log records on stderr with their passwords masked (masking.py): what hosts and verbs log.

Apart from masking.py because `logging` (with threading) is a tenth of a one-shot
verb's start: a verb on a lite store logs nothing, and configures this only when it
moves onto the full store (cli/verb_runner.py).
"""

from __future__ import annotations

import logging

from .masking import masked


class MaskedFormatter(logging.Formatter):
    """Log records as `masked` shows them: an exception logged from a driver may quote its DSN."""

    def format(self, record: logging.LogRecord) -> str:
        return masked(super().format(record))


LEVELS = ("debug", "info", "warning", "error", "critical")


def log_to_stderr(level: str, prefix: str) -> None:
    """What hosts and verbs log goes to stderr at `level`, passwords masked. ValueError, in words, for a
    level that is none of LEVELS (SWARMKIT_LOG is typed by people)."""
    if level.lower() not in LEVELS:
        raise ValueError(f"SWARMKIT_LOG={level!r} is not a log level: {', '.join(LEVELS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(MaskedFormatter(f"{prefix}: %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])
