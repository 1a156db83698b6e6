"""The argparse types of every numeric flag of `swarmkit` and `swarmkit-console` (issue 29).

The rules are runtime/quantities.py's (`Count`, `Port`, `Seconds`, `Duration`: empty, nan, inf, negative
or past its bound is refused); here each is an argparse type (`type=`), so a bad value is argparse's usage
and one `error: argument --FLAG: ...` line, exit 2, before any store. Every numeric flag takes one of
these types: tests/test_cli_numbers.py finds them by it (`FlagType`) and drives each with bad values.
"""

from __future__ import annotations

import argparse

from swarmkit.runtime import quantities as rules
from swarmkit.runtime.quantities import MAX_CONCURRENCY, MAX_COUNT, BadValue

__all__ = ["MAX_CONCURRENCY", "MAX_COUNT", "Count", "Duration", "FlagType", "Port", "Seconds"]


class FlagType(rules.Quantity):
    """A rule as an argparse type: the flag's text to its value, or one line saying what would do."""

    def __call__(self, text: str):
        try:
            return self.parse(text)
        except BadValue as exc:
            # Quoted (control characters escaped), and short: the error stays one line a person reads.
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise argparse.ArgumentTypeError(f"{shown!r} {exc}") from None


class Count(rules.Count, FlagType):
    __doc__ = rules.Count.__doc__


class Port(rules.Port, FlagType):
    __doc__ = rules.Port.__doc__


class Seconds(rules.Seconds, FlagType):
    __doc__ = rules.Seconds.__doc__


class Duration(rules.Duration, FlagType):
    __doc__ = rules.Duration.__doc__
