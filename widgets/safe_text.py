"""Untrusted text made inert before a widget shows it.

Run names, node names, log lines, errors and actor names are written by other
processes. Rich markup in a plain `str` handed to a DataTable cell or a Label
is parsed (`[@click=app.quit]x[/]` turns into a live action and a stray `[/]`
raises), and Rich and Textual pass ESC and C1 bytes through to the terminal.
Everything shown goes through `safe()` and reaches widgets as `rich.text.Text`,
which is never parsed as markup.

This mirrors `runtime.text.plain()` on purpose: widgets must not import the
runtime, and the two rules must stay the same.
"""

from __future__ import annotations

import re

from rich.text import Text

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}]")


def _stand_in(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # Control Pictures: ESC shows as ␛
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def safe(text: object, limit: int | None = None, *, tabs: bool = False) -> str:
    """One line of inert text. `limit` cuts with an ellipsis; `tabs` keeps tabs (else a space)."""
    s = _UNSAFE.sub(_stand_in, str(text) if text is not None else "")
    if not tabs:
        # A tab inside a table cell or a one-line label has no column to go to.
        s = s.replace("\t", " ")
    if limit is not None and len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s


def safe_lines(text: object) -> str:
    """Several lines of inert text: each line made safe, the line breaks kept."""
    raw = str(text) if text is not None else ""
    return "\n".join(safe(line) for line in raw.split("\n"))


def safe_text(text: object, style: str = "", limit: int | None = None) -> Text:
    """A `Text` of one inert line; never parsed as markup."""
    return Text(safe(text, limit), style=style, no_wrap=True, overflow="ellipsis", end="")
