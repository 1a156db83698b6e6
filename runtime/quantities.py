"""Numbers and durations read from flags and environment variables: one rule for all of them (issue 29).

A count, a port, a number of seconds or a duration that is empty, not a number, not finite, negative or
past its bound is refused as bad usage (exit 2), in one line that names the flag or the variable: no such
value reaches a timer, a store or datetime arithmetic to fail there with a traceback
(`swarmkit logs ID --since 99999999d` did: "OverflowError: date value out of range").

`Count`, `Port`, `Seconds` and `Duration` are the rules (`parse(text)`: the value, or BadValue); the doors'
argparse types are these rules said as argparse's usage (cli/quantities.py). `number` is the same rule
for a variable (`env_number` in runtime/settings.py).

Building the parser imports this module: the standard library's math and re, nothing more
(tests/test_start_up.py).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (see swarmkit.cli.common)
if TYPE_CHECKING:
    from datetime import timedelta
    from typing import Any

# The longest anything waits (a lease, a heartbeat, a poll, a grace): a year.
YEAR_S = 365 * 86400.0
# The longest look back a flag takes (`--since`): a hundred years, far inside datetime's range.
MAX_DURATION_DAYS = 36500
# Runs one host holds at once: far more than a machine can host, far inside every store's integers.
MAX_CONCURRENCY = 10_000
# The most of anything counted (`logs --tail`): more than any log holds, inside every store's integers.
MAX_COUNT = 1_000_000_000


class BadValue(ValueError):
    """What is wrong with a value, in words that follow its repr: `'nan' must be a finite number, more than zero`."""


def number(raw: str, *, most: float, unit: str = "seconds") -> float:
    """`raw` as a finite number more than zero and at most `most`; else BadValue."""
    try:
        value = float(raw)
    except ValueError:
        raise BadValue(f"is not a number of {unit}") from None
    # inf and nan are floats too (and 1e309 reads as inf): neither is a number anything can wait or count.
    if not math.isfinite(value) or value <= 0:
        raise BadValue("must be a finite number, more than zero")
    if value > most:
        raise BadValue(f"must be at most {most:.0f} {unit}")
    return value


class Quantity:
    """The rule of a number or a duration: text to its value, or BadValue saying what would do."""

    def parse(self, text: str) -> object:
        raise NotImplementedError


_WHOLE = re.compile(r"[0-9]{1,19}")


class Count(Quantity):
    """A whole number from `least` to `most`: digits only (no sign, not even `-0`; no exponent)."""

    def __init__(self, least: int = 0, most: int = MAX_COUNT, noun: str = "a whole number") -> None:
        self.least, self.most, self.noun = least, most, noun

    def parse(self, text: str) -> int:
        s = text.strip()
        if not _WHOLE.fullmatch(s) or not self.least <= int(s) <= self.most:
            raise BadValue(f"is not {self.noun} from {self.least} to {self.most}")
        return int(s)


class Port(Count):
    """A TCP port: `least` (0: the system picks a free one) up to 65535."""

    def __init__(self, least: int = 0) -> None:
        super().__init__(least, 65535, noun="a port")


class Seconds(Quantity):
    """A finite number of seconds, more than zero (at least `least`, when given) and at most `most`."""

    def __init__(self, most: float = 86400.0, least: float = 0.0) -> None:
        self.most, self.least = most, least

    def parse(self, text: str) -> float:
        value = number(text, most=self.most)
        if value < self.least:
            raise BadValue(f"must be at least {self.least:g} seconds")
        return value


_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Duration(Quantity):
    """`90s`, `5m`, `1h30m`, `2d`, as kubectl and docker take them: more than zero, at most a hundred years."""

    def parse(self, text: str) -> timedelta:
        s = text.strip().lower()
        pos, total = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            # A long run of digits reads as inf: past the bound below, not an overflow.
            total += float(m.group(1)) * _UNIT_S[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise BadValue("is not a duration such as 30s, 5m, 1h30m or 2d")
        if total <= 0:
            raise BadValue("is no time: give more than zero, such as 30s")
        if total > MAX_DURATION_DAYS * 86400:
            raise BadValue(f"is more than a hundred years ({MAX_DURATION_DAYS}d)")
        return timedelta(seconds=total)


# A duration: "90s", "10m", "1h30m", "500ms", "1.5h"; the parts largest first, each once.
_DURATION_RE = re.compile(r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$")
_DURATION_UNITS = (86400.0, 3600.0, 60.0, 1.0, 0.001)


def parse_duration(value: Any) -> float | None:
    """Seconds in a duration written "90s", "10m", "1h30m", "500ms" (or a number of seconds); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value.strip().lower())
        if not value.strip() or m is None or not any(m.groups()):
            return None
        seconds = sum(float(g) * unit for g, unit in zip(m.groups(), _DURATION_UNITS, strict=True) if g)
    else:
        return None
    return seconds if seconds > 0 and seconds < 10 * 365 * 86400 else None
