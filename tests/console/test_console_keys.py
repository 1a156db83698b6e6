"""Read-only says why every act key does nothing; the command palette offers the acts that apply; the engine goes with the app."""

from __future__ import annotations

from console_helpers import first_poll, init_store, job_of, screen_up, status_cell, submit, until
from textual.command import CommandPalette

from swarmkit.console.acts import ACT_BY_ACTION
from swarmkit.console.acts import ACT_VERBS as ACTS
from swarmkit.console.app import make_app
from swarmkit.console.help_screen import HelpScreen
from swarmkit.widgets.key_bar import KeyBar
from swarmkit.widgets.run_table import RunTable
from tests.conftest import write_flow


def quick(ws):
    return write_flow(ws, "quick", """
        name = "quick"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)


def verb(action: str) -> str:
    """An act's verb for its action string (`act('stop')`), any other action as it is."""
    return ACT_BY_ACTION[action].verb if action in ACT_BY_ACTION else action


def footer_keys(app) -> set[str]:
    return {verb(binding.action) for (_, binding, enabled, _) in app.screen.active_bindings.values() if binding.show and enabled}


async def test_read_only_hides_every_act_and_says_so(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, quick(workspace))
    app = make_app(sqlite_url, workspace, read_only=True, poll_interval=0.1)
    async with app.run_test(size=(150, 40), notifications=True) as pilot:
        screen = await first_poll(pilot)
        assert screen.query_one(RunTable).select(run)
        assert screen.query_one("#header").summary.read_only
        assert "READ-ONLY" in str(screen.query_one("#header").render())
        shown = footer_keys(app)
        assert "logs" in shown and not shown & set(ACTS)
        assert all(screen.check_action("act", (act,)) is False for act in ACTS)
        assert not [c for c in screen.palette_commands() if verb(c[2]) in ACTS]
        for key in ("s", "r", "c", "C", "a", "space"):
            await pilot.press(key)
        # Each key says why it does nothing; one toast says it, not six.
        await until(pilot, lambda: (screen.last_message or "").startswith("read-only: acts are off (--read-only)"), what="the keys to say why they do nothing")
        assert app.screen is screen
        # Never six toasts of the same words. In 2 of 4 full runs on 2026-12-02 (never alone, nor in
        # 3 loaded runs of the console's key, act and mark tests) no toast was left at all after the
        # six keys, for 10 s: a race between `say`'s clearing and Textual's deferred toast rack,
        # not understood yet (issue 12's note). The words are on the message line either way (above).
        await pilot.pause(0.3)  # not a wait for a condition: no second toast may appear in this window
        assert len(screen.query("Toast")) <= 1
        assert not screen.query_one(RunTable).marked_keys
        assert (await job_of(sqlite_url, workspace, run)).status == "queued"
        await pilot.press("question_mark")
        help_screen = await screen_up(pilot, HelpScreen, "help")
        words = [key for key, _ in help_screen.entries]
        assert "s" not in words and "c" not in words and "l" in words
        assert "read-only" in str(help_screen.query_one("Static").render())
        await pilot.press("escape")


def options(app) -> list[str]:
    """The prompts the command palette shows now (none before its list is mounted)."""
    lists = app.screen.query("OptionList")
    return [str(o.prompt) for o in lists.first().options] if lists else []


async def test_palette_offers_the_acts_that_apply_and_runs_them(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, quick(workspace))
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(150, 40)) as pilot:
        screen = await first_poll(pilot)
        assert screen.query_one(RunTable).select(run)

        def offered() -> set[str]:
            return {verb(c[2]) for c in screen.palette_commands()} & set(ACTS)

        assert offered() == {"stop", "cancel", "cancel_keep"}  # queued: nothing to resume or approve
        assert footer_keys(app) >= set(ACTS)
        await pilot.press("ctrl+p")
        await screen_up(pilot, CommandPalette, "the palette")
        await pilot.press(*f"stop run {run[:8]}")
        await until(pilot, lambda: any(p.startswith("Stop run") for p in options(app)), what="the palette to offer the stop")
        await pilot.press("enter")
        await until(pilot, lambda: status_cell(app, run) == "stopped", what="stopped from the palette")
        assert offered() == {"resume", "cancel", "cancel_keep"}  # stopped: no stop offered again
        await pilot.press("ctrl+p")
        await screen_up(pilot, CommandPalette, "the palette again")
        await pilot.press(*"stop run")
        await pilot.pause(0.5)  # not a wait for a condition: no "Stop run" may be offered once the search has had its time
        shown = options(app)
        assert not [p for p in shown if p.startswith("Stop run")], shown
        await pilot.press("escape")
        assert screen.query_one(KeyBar)
    # The app's store was let go of on its own loop when it closed.
    assert screen.link._store is None
