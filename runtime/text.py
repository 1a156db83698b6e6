"""Untrusted text made safe for a terminal.

Flow names, node names, log lines, errors and actor names come from other
processes. Before any of them reaches a terminal, C0 and C1 controls (but tab)
and bidirectional overrides are replaced by visible stand-ins, so no escape
sequence, cursor move, OSC 8 link or clipboard write can pass through.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}]")


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
