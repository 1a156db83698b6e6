"""A status's word, glyph and colour: the one place that decides how a status looks.

Colours come from the theme's variables (`$text-warning`, ...), not fixed
values: on textual-light a fixed yellow "stopping" was nearly invisible. A
colour is then made readable on the theme's surface and panel (the table's and
the header's backgrounds): where the theme's own falls short of `MIN_CONTRAST`,
it is moved toward the theme's foreground until it reaches it. ANSI themes are
left to the terminal's palette.

The console app hands the theme over (`use_theme`) when it starts and each time
the theme changes; until then the looks are textual-dark's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES

from .safe_text import safe

# WCAG's ratio for large or bold text; a status word is bold or stands beside its glyph.
MIN_CONTRAST = 3.0


@dataclass(frozen=True)
class StatusLook:
    word: str
    glyph: str
    theme_style: str  # attributes and theme variables: "bold $text-warning", "bold $text-error on $error-muted"
    meaning: str

    @property
    def style(self) -> Style:
        return _palette.style(self.theme_style)


# Every status an operator can meet has its own word and colour, and a glyph
# so that the table still reads on a monochrome terminal or in a screenshot.
STATUS_LOOKS: dict[str, StatusLook] = {
    "queued": StatusLook("queued", "○", "$text-primary", "waiting for a worker to claim it"),
    "running": StatusLook("running", "●", "bold $text-success", "an agent is at work"),
    "stopping": StatusLook("stopping", "◐", "bold $text-warning", "stop requested; stops at the next agent boundary"),
    "stop overdue": StatusLook("stop overdue", "◓", "bold underline $text-warning on $warning-muted", "a stop not taken in a few times its node's usual time"),
    "cancelling": StatusLook("cancelling", "◍", "bold $text-error", "cancel requested; its host is interrupting it"),
    "stalled": StatusLook("stalled", "◌", "bold $text-accent on $accent-muted", "running, but no sign of work for a while"),
    "stopped": StatusLook("stopped", "■", "$text-warning", "parked at a boundary; resumable, nothing lost"),
    "deferred": StatusLook("deferred", "◆", "bold $text-secondary", "waiting at a gate for a human's approval"),
    "lost": StatusLook("lost", "◇", "bold italic $text-error", "its host stopped heart-beating; resumable"),
    "completed": StatusLook("completed", "✓", "$text-success", "ended: every agent finished"),
    "failed": StatusLook("failed", "✗", "$text-error", "ended: the flow chose to end (an agent raised)"),
    "faulted": StatusLook("faulted", "‼", "bold $text-error on $error-muted", "ended: the runtime itself broke; workspaces kept"),
    "cancelled": StatusLook("cancelled", "⊘", "$text-muted", "ended for good by a cancel"),
}

STATUS_ORDER: tuple[str, ...] = tuple(STATUS_LOOKS)


def contrast(a: Color, b: Color) -> float:
    """WCAG contrast ratio of two opaque colours (1 to 21)."""

    def lum(c: Color) -> float:
        def ch(v: int) -> float:
            x = v / 255
            return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4

        return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b)

    la, lb = lum(a), lum(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


class Palette:
    """Theme variables turned into rich styles, readable on the theme's backgrounds; cached per style."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = dict(variables)
        self._styles: dict[str, Style] = {}
        self.background = self._color("background", None) or Color(0, 0, 0)
        self.foreground = self._color("foreground", None) or Color(255, 255, 255)
        self.ansi = self.foreground.ansi is not None
        self.backdrops = [c for c in (self._color("surface", self.background), self._color("panel", self.background)) if c is not None]

    def _color(self, name: str, under: Color | None) -> Color | None:
        raw = self.variables.get(name)
        if raw is None:
            return None
        value, _, alpha = raw.strip().partition(" ")
        try:
            if value == "auto":
                color = self.variables.get("foreground") and Color.parse(self.variables["foreground"])
            else:
                color = Color.parse(value)
        except ColorParseError:
            return None
        if not isinstance(color, Color):
            return None
        if alpha.endswith("%"):
            color = color.with_alpha(float(alpha[:-1]) / 100)
        if color.a < 1 and under is not None and color.ansi is None:
            color = under + color
        return color

    def _readable(self, color: Color, backdrops: list[Color]) -> Color:
        if self.ansi or color.ansi is not None:
            return color
        for step in range(11):
            moved = color.blend(self.foreground, step / 10)
            if all(contrast(moved, b) >= MIN_CONTRAST for b in backdrops):
                return moved
        return self.foreground

    def style(self, theme_style: str) -> Style:
        found = self._styles.get(theme_style)
        if found is not None:
            return found
        words = theme_style.split()
        attrs = {w: True for w in words if not w.startswith("$") and w != "on"}
        fg_name = next((w[1:] for w in words if w.startswith("$")), None)
        bg_name = words[words.index("on") + 1][1:] if "on" in words else None
        bg = self._color(bg_name, self.background) if bg_name else None
        fg = self._color(fg_name, bg or self.background) if fg_name else None
        if fg is not None:
            fg = self._readable(fg, [bg] if bg is not None else self.backdrops)
        style = Style(
            color=fg.rich_color if fg is not None else None,
            bgcolor=bg.rich_color if bg is not None else None,
            **attrs,  # type: ignore[arg-type]
        )
        self._styles[theme_style] = style
        return style


def _default_palette() -> Palette:
    return Palette(BUILTIN_THEMES["textual-dark"].to_color_system().generate())


_palette = _default_palette()


def use_theme(variables: Mapping[str, str]) -> None:
    """Take a theme's variables (`App.theme_variables`); the looks follow it from now on."""
    global _palette
    if variables != _palette.variables:
        _palette = Palette(variables)


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
