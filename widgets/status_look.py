"""A status's word, glyph and colour: the one place that decides how a status looks."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from .safe_text import safe


@dataclass(frozen=True)
class StatusLook:
    word: str
    glyph: str
    style: str
    meaning: str


# Every status an operator can meet has its own word and colour, and a glyph
# so that the table still reads on a monochrome terminal or in a screenshot.
STATUS_LOOKS: dict[str, StatusLook] = {
    "queued": StatusLook("queued", "○", "#5fafd7", "waiting for a worker to claim it"),
    "running": StatusLook("running", "●", "bold #5fd75f", "an agent is at work"),
    "stopping": StatusLook("stopping", "◐", "bold #ffd75f", "stop requested; stops at the next agent boundary"),
    "stop overdue": StatusLook("stop overdue", "◓", "bold #000000 on #ffd75f", "a stop not taken in a few times its node's usual time"),
    "cancelling": StatusLook("cancelling", "◍", "bold #ff5f87", "cancel requested; its host is interrupting it"),
    "stalled": StatusLook("stalled", "◌", "bold #ff8700", "running, but no sign of work for a while"),
    "stopped": StatusLook("stopped", "■", "#d7af5f", "parked at a boundary; resumable, nothing lost"),
    "deferred": StatusLook("deferred", "◆", "bold #d787ff", "waiting at a gate for a human's approval"),
    "lost": StatusLook("lost", "◇", "bold #ff5f5f", "its host stopped heart-beating; resumable"),
    "completed": StatusLook("completed", "✓", "#87af87", "ended: every agent finished"),
    "failed": StatusLook("failed", "✗", "#ff8787", "ended: the flow chose to end (an agent raised)"),
    "faulted": StatusLook("faulted", "‼", "bold #ffffff on #af0000", "ended: the runtime itself broke; workspaces kept"),
    "cancelled": StatusLook("cancelled", "⊘", "#8a8a8a", "ended for good by a cancel"),
}

STATUS_ORDER: tuple[str, ...] = tuple(STATUS_LOOKS)


def look_of(status: str) -> StatusLook:
    look = STATUS_LOOKS.get(status)
    if look is None:
        # A status this console does not know (a newer writer?): shown, never trusted.
        word = safe(status, 16)
        return StatusLook(word, "?", "reverse", "a status this console does not know")
    return look


def status_text(status: str) -> Text:
    look = look_of(status)
    return Text(f"{look.glyph} {look.word}", style=look.style, no_wrap=True, end="")

