"""What the main screen's header, banner and empty table say, in words: made from plain values.

main_screen.py decides when each is shown; the words are here, one place for each.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from rich.text import Text

from swarmkit.runtime.report import age
from swarmkit.widgets.safe_text import safe

from .run_views import clock_time


def empty_words(text_filter: str, show_ended: bool, linger: timedelta) -> str:
    """What the table's place says when no run is shown."""
    if text_filter:
        return f"No run matches the filter {safe(text_filter)!r}. Escape clears it."
    if show_ended:
        return "No runs in this store yet. Queue one with `swarmkit run FLOW --detach`, host it with `swarmkit worker`."
    return (
        f"No active runs, and none ended in the last {int(linger.total_seconds() // 60)} minutes. "
        "Press e to show ended runs; queue one with `swarmkit run FLOW --detach`."
    )


def view_words(text_filter: str, show_ended: bool, linger: timedelta, ended_bound: int) -> str:
    """Which runs the table shows."""
    words = f"all runs (ended: newest {ended_bound})" if show_ended else f"active + ended in last {int(linger.total_seconds() // 60)}m (e: all)"
    if text_filter:
        words += f" · filter {text_filter!r}"
    return words


def data_age(now: datetime, last_ok_at: datetime | None, problem: str | None, poll_interval: float) -> tuple[str, bool]:
    """How old the data shown is, in words, and whether that is stale."""
    if last_ok_at is None:
        return "no data yet", problem is not None
    seconds = (now - last_ok_at).total_seconds()
    return f"{age(seconds)} old", problem is not None or seconds > max(3 * poll_interval, 5)


def banner_text(
    problem: str | None, slow: float | None, last_ok_at: datetime | None, data_age_words: str, retry_delay: float | None, failures: int
) -> Text:
    """The banner over a store that fails (`problem`) or has not answered for `slow` seconds."""
    text = Text(no_wrap=False)
    if problem is not None:
        text.append("⚠ store unavailable: ", style="bold")
        text.append(safe(problem))
    else:
        text.append("⚠ ", style="bold")
        text.append(f"the store has not answered for {age(slow or 0.0)} (busy, or locked by another process?)")
    if last_ok_at is not None:
        text.append(f" — showing the data read at {clock_time(last_ok_at)} ({data_age_words})")
    else:
        text.append(" — no data read yet")
    if problem is not None and retry_delay is not None:
        text.append(f"; retrying every {retry_delay:g}s (attempt {failures})")
    return text
