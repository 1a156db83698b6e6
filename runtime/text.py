"""Untrusted text made safe for a terminal.

Flow names, node names, log lines, errors and actor names come from other
processes. Before any of them reaches a terminal, C0 and C1 controls (but tab)
and bidirectional overrides are replaced by visible stand-ins, so no escape
sequence, cursor move, OSC 8 link or clipboard write can pass through.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Lone surrogates too: they cannot be written as UTF-8, so one in a message would fail whatever prints it.
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
# What text coming in may not hold: controls (a line break or tab only where lines are allowed) and lone surrogates.
# Compiled on first use, by re's own cache: only what comes in (a run's inputs) is checked, and a
# one-shot verb checks none (each of these compiles in a third of a millisecond).
_REFUSED_IN_LINE = "[\x00-\x1f\x7f-\x9f\ud800-\udfff]"
_REFUSED_IN_TEXT = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]"


def _stand_in(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ESC shows as ␛
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def plain(text: object, limit: int | None = None) -> str:
    """One line of inert text; `limit` cuts it with an ellipsis."""
    s = _UNSAFE.sub(_stand_in, str(text) if text is not None else "")
    if limit is not None and len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s


def plain_lines(text: str) -> str:
    """Several lines of inert text: each made plain, the line breaks kept."""
    return "\n".join(plain(line) for line in text.split("\n"))


def text_fault(value: str, *, most: int, lines: bool = False) -> str | None:
    """Why text coming in (a name, a key, an input) is refused, or None.

    Refused: a lone surrogate (not text: it cannot be stored as UTF-8), NUL and the other
    controls (tab and line breaks only where `lines`), and more than `most` characters.
    """
    bad = re.search(_REFUSED_IN_TEXT if lines else _REFUSED_IN_LINE, value)
    if bad is not None:
        ch = bad.group(0)
        what = "a lone surrogate" if 0xD800 <= ord(ch) <= 0xDFFF else "NUL" if ch == "\x00" else "a control character"
        return f"holds {what} (U+{ord(ch):04X}) at character {bad.start() + 1}"
    if len(value) > most:
        return f"is {len(value)} characters long; at most {most}"
    return None
