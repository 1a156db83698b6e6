"""The main screen's acts: their keys (from the acts table), marks, copying a run id, what the
palette and the help screen offer, and the words shown after each."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, TypeVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from swarmkit.store.masking import masked
from swarmkit.store.records import JobRecord
from swarmkit.store.store_errors import StoreError, is_store_fault
from swarmkit.widgets.run_row import COLUMNS
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.safe_text import safe_lines

from .acts import ACT_BY_ACTION, ACT_BY_VERB, ACTS
from .config import ConsoleConfig
from .store_link import StoreLink

W = TypeVar("W", bound=Widget)

if TYPE_CHECKING:
    from .act_runner import ActRunner

# Toasts show at most this many lines; the message line keeps the whole text after them.
TOAST_LINES = 2
# Sort keys, as the run table binds them: its columns in order, 0 for newest first.
SORT_HELP = (
    (f"1 … {len(COLUMNS)}", "sort by the table's columns in order (the same key again reverses it)"),
    ("$", "sort by estimated cost at completion, the most first"),
    ("0", "newest first (the default order)"),
)
MOVE_HELP = (("j / k", "move down / up (as do the arrows, PgUp PgDn Home End)"),)


def problem_text(exc: BaseException, link: StoreLink) -> str:
    # The banner is read over shoulders and in screenshots: no password in it.
    if isinstance(exc, StoreError):
        return masked(str(exc))
    if is_store_fault(exc):
        from swarmkit.store import describe_db_error  # late: store/store_faults.py (SQLAlchemy); only for a store fault

        return describe_db_error(exc, link.loc)
    return masked(f"poll failed: {type(exc).__name__}: {exc}")


class ActingScreen(Screen):
    """A screen of runs that acts on them: the marked ones, or the one under the cursor."""

    ACT_BINDINGS: ClassVar[list[BindingType]] = (
        [act.binding() for act in ACTS]
        + [Binding("space", "mark", "Mark", show=False, id="act.mark"), Binding("y", "copy_id", "Copy id", show=False, id="view.copy_id")]
        # Tried only when the binding before them for the same key is off: read-only says why.
        + [act.read_only_binding() for act in ACTS]
        + [Binding("space", "read_only('mark')", "Mark", show=False, id="act.mark.read_only")]
    )
    VIEW_HELP: ClassVar[dict[str, str]] = {}

    config: ConsoleConfig
    jobs: dict[str, JobRecord]
    link: StoreLink
    actor: str
    read_only: bool
    _unmounted: bool
    last_message: str
    _read_only_said: bool

    @cached_property
    def acts(self) -> ActRunner:
        from .act_runner import ActRunner  # late: made at the first act, the acts' code (runtime control, dialogs) is no part of the first paint (bench/console_render.py)

        return ActRunner(self)  # type: ignore[arg-type]

    @property
    def selected(self) -> JobRecord | None:
        raise NotImplementedError

    def poll_now(self) -> None:
        raise NotImplementedError

    @property
    def closing(self) -> bool:
        # Textual removes a screen's widgets before the screen's own unmount: a
        # worker that finishes in between finds some of them gone, and must touch
        # nothing. A screen being removed shows as not displayed from the start.
        if self._unmounted or not self.display:
            return True
        return self._kept(RunTable) is None and not self.query(RunTable)

    def part(self, kind: type[W], selector: str | None = None) -> W:
        """A widget of this screen, found once and kept while it is attached: a query walks the
        DOM, and a poll asked for a dozen (a visible share of the idle CPU, bench/console_render.py)."""
        widget = self._kept(kind, selector)
        if widget is None:
            widget = self.query_one(selector, kind) if selector else self.query_one(kind)  # type: ignore[attr-defined]
            self.__dict__.setdefault("_parts", {})[(kind, selector)] = widget
        return widget

    def _kept(self, kind: type[W], selector: str | None = None) -> W | None:
        widget = self.__dict__.get("_parts", {}).get((kind, selector))
        return widget if widget is not None and widget.is_attached else None

    def query_one_table(self) -> RunTable:
        return self.part(RunTable)

    def problem_words(self, exc: BaseException) -> str:
        return problem_text(exc, self.link)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("act", "mark"):
            return not self.read_only
        if action == "read_only":
            return self.read_only
        return True

    # --- acts -------------------------------------------------------------------

    def _targets(self) -> tuple[list[str], bool] | None:
        """The marked runs (True: several, by marks), else the one under the cursor."""
        marked = self.query_one_table().marked_keys
        if marked:
            return marked, True
        job = self.selected
        if job is None:
            self.say("no run selected", "warning")
            return None
        return [job.id], False

    def action_act(self, verb: str) -> None:
        """Every act's key and palette entry: the act named `verb`, on the marked runs or the cursor's."""
        if self.read_only:
            return
        targets = self._targets()
        if targets is not None:
            self.acts.start(ACT_BY_VERB[verb], targets[0], bulk=targets[1])

    def action_read_only(self, verb: str) -> None:
        # A key that does nothing says why: a toast the first time, the message line every time.
        text = "read-only: acts are off (--read-only)"
        self.say(text, "warning", toast=not self._read_only_said)
        self._read_only_said = True

    def action_mark(self) -> None:
        table = self.query_one_table()
        key = table.selected_key
        if key is None:
            return
        table.toggle_mark(key)
        table.action_cursor_down()
        n = len(table.marked_keys)
        self._show_line(f"{n} marked: acts apply to the marked runs (space unmarks, escape clears the marks)" if n else "no run marked: acts apply to the run under the cursor")

    def clear_marks(self) -> bool:
        table = self.query_one_table()
        if not table.marked_keys:
            return False
        table.clear_marks()
        self._show_line("marks cleared: acts apply to the run under the cursor")
        return True

    def action_copy_id(self) -> None:
        job = self.selected
        if job is None:
            self.say("no run selected", "warning")
            return
        self.app.copy_to_clipboard(job.id)
        self.say(f"copied the run id {job.id} to the clipboard")

    # --- what is offered ------------------------------------------------------------

    def _acted_on(self) -> tuple[set[str], str, str]:
        """The stored statuses of the runs an act would apply to; the palette's words for them, for acts and for views."""
        marked = self.query_one_table().marked_keys
        job = self.selected
        # The palette parses its names as markup: only a hex short id goes in.
        one = f" {job.short_id}" if job and all(c in "0123456789abcdef" for c in job.short_id) else ""
        if marked:
            return {self.jobs[k].status for k in marked if k in self.jobs}, f" ({len(marked)} marked)", one
        return ({job.status} if job else set()), one, one

    def palette_commands(self) -> list[tuple[str, str, str]]:
        """(name, help, action) for the command palette: the acts that apply to the runs acted on; none when read-only."""
        statuses, runs, one = self._acted_on()
        out: list[tuple[str, str, str]] = []
        if not self.read_only:
            out += [(act.title + runs, act.help, act.action) for act in ACTS if statuses & act.applies]
            out.append(("Mark or unmark run" + one, "acts then apply to every marked run", "mark"))
        out += [
            ("Copy run id" + one, "copy the run's full id to the clipboard", "copy_id"),
            ("Show logs" + one, "open the run's log; follows new lines", "logs"),
            ("Toggle ended runs", "show every recent run, or the active ones", "toggle_ended"),
            ("Toggle detail pane", "show or hide the selected run's detail", "toggle_detail"),
            ("Filter runs", "filter by flow, id, status or node", "filter"),
            ("Keys and statuses", "the help screen", "help"),
        ]
        return out

    def help_entries(self) -> list[tuple[str, str]]:
        """(key, what it does) for every binding that works here: read-only hides the acts."""
        entries: list[tuple[str, str]] = []
        seen: set[str] = set()
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            name = binding.action.removeprefix("app.")
            act = ACT_BY_ACTION.get(name)
            if name in seen or name.startswith("read_only") or self.check_action("act" if act else name, ()) is not True:
                continue
            seen.add(name)
            key = binding.key_display or binding.key
            entries.append((key, act.help if act else self.VIEW_HELP.get(name) or binding.description))
            if name == "logs":
                entries.append(("enter", self.VIEW_HELP["logs"]))
        entries += MOVE_HELP + SORT_HELP
        entries.append(("ctrl+p", "command palette: the acts that apply, and every view, by name"))
        return entries

    # --- words ------------------------------------------------------------------------

    def _show_line(self, text: str, style: str = "") -> None:
        self.part(Static, "#message").update(Text(text.split("\n")[0], style=style, no_wrap=True, overflow="ellipsis"))

    def say(self, message: str, severity: str = "information", *, toast: bool = True) -> None:
        """Show what happened, in the words the CLI uses: a toast over the bottom lines, then on the message line.

        The toast covers the message line while it shows, so the words are never on screen twice.
        """
        text = safe_lines(message)
        self.last_message = text
        style = {"error": "bold red", "warning": "yellow"}.get(severity, "")
        self._show_line(text, style)
        if toast:
            # One toast at a time: the last one goes with its holder (clearing alone leaves the
            # holder behind, and the rack's two lines would show it instead of the new one).
            self.app.clear_notifications()
            for holder in self.query("ToastHolder"):
                holder.remove()
            shown = "\n".join(text.split("\n")[:TOAST_LINES])
            self.notify(shown, severity=severity, markup=False, timeout=5 if severity != "error" else 10)  # type: ignore[arg-type]
