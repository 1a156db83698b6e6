"""The console's look: 80x24 and 200x60, themes (readable, chosen, kept), the footer's keys."""

from __future__ import annotations

import json

import pytest
from console_helpers import until
from textual.color import Color
from textual.theme import BUILTIN_THEMES

from swarmkit.console.app import make_app
from swarmkit.console.cli import main as console_main
from swarmkit.console.user_settings import settings_path
from swarmkit.widgets.key_bar import KeyBar
from swarmkit.widgets.run_detail import RunDetail
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.status_look import MIN_CONTRAST, STATUS_LOOKS, Palette, contrast
from tests.console.test_console_snapshots import frozen_app, settle
from tests.sample_store import FROZEN_NOW, build_sample_store, run_id


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    ws = tmp_path_factory.mktemp("look") / "ws"
    ws.mkdir()
    build_sample_store(ws, FROZEN_NOW)
    return ws


@pytest.mark.parametrize("theme", sorted(t for t in BUILTIN_THEMES if not t.startswith("ansi-")))
def test_every_status_is_readable_on_every_builtin_theme(theme):
    """Before: fixed hex colours; on textual-light "stopping" (#ffd75f on #f8f8f8) had a contrast of 1.3.
    ANSI themes are left out: their colours are the terminal's own palette."""
    palette = Palette(BUILTIN_THEMES[theme].to_color_system().generate())
    bad = []
    for status, look in STATUS_LOOKS.items():
        style = palette.style(look.theme_style)
        assert style.color is not None, status
        fg = Color.from_rich_color(style.color)
        backs = [Color.from_rich_color(style.bgcolor)] if style.bgcolor else palette.backdrops
        worst = min(contrast(fg, b) for b in backs)
        if worst < MIN_CONTRAST:
            bad.append(f"{status}: {fg.hex} has contrast {worst:.2f}")
    assert not bad, bad
    # Twelve statuses, twelve looks: no two the same on any theme.
    assert len({(look.glyph, palette.style(look.theme_style)) for look in STATUS_LOOKS.values()}) == len(STATUS_LOOKS)


async def test_the_theme_chosen_is_kept_and_theme_names_one_for_this_session(sample, monkeypatch):
    monkeypatch.chdir(sample)
    app = frozen_app(None, sample)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.theme == "textual-dark"
        app.theme = "textual-light"  # what the palette's theme picker does
        await until(pilot, lambda: settings_path().exists() and "textual-light" in settings_path().read_text(), what="the choice saved")
        table = app.screen.query_one(RunTable)
        stopping = table.get_cell(run_id("stopping"), "status")
        await pilot.pause()
        # What is drawn, not only the cell's Text: the table keeps each cell's segments by its value.
        line = table.render_line(table.get_row_index(run_id("stopping")) - int(table.scroll_y) + 1)
        drawn = next(seg for seg in line if "stopping" in seg.text)
    assert json.loads(settings_path().read_text())["theme"] == "textual-light"
    # The table's cells took the new theme's colours.
    light = Palette(BUILTIN_THEMES["textual-light"].to_color_system().generate())
    assert stopping.style == light.style(STATUS_LOOKS["stopping"].theme_style)
    assert drawn.style is not None and drawn.style.color == light.style(STATUS_LOOKS["stopping"].theme_style).color

    again = frozen_app(None, sample)
    assert again.theme == "textual-light"
    # --theme wins for this session, and is not kept.
    session = make_app(None, sample, clock=lambda: FROZEN_NOW, poll_interval=600, detect_lost=False, theme="nord")
    assert session.theme == "nord"
    assert json.loads(settings_path().read_text())["theme"] == "textual-light"


def test_an_unknown_theme_is_a_usage_error_naming_the_themes(sample, capsys):
    assert console_main([str(sample), "--theme", "no-such-theme"]) == 2
    err = capsys.readouterr().err
    assert "no-such-theme" in err and "textual-light" in err
    # The demo takes a theme too (it did not: "unrecognized arguments"), judged before it starts anything.
    assert console_main(["demo", str(sample / "demo"), "--theme", "no-such-theme"]) == 2
    assert "no-such-theme" in capsys.readouterr().err and not (sample / "demo").exists()


def key_bar_text(app) -> str:
    bar = app.screen.query_one(KeyBar)
    return bar.render().plain


async def test_80x24_shows_a_dozen_rows_the_essential_keys_and_d_brings_the_detail_back(sample, monkeypatch):
    monkeypatch.chdir(sample)
    app = frozen_app(None, sample)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        table, detail = screen.query_one(RunTable), screen.query_one(RunDetail)
        assert not detail.display, "the detail pane starts hidden on a small terminal"
        assert table.size.height - 1 >= 12, f"only {table.size.height - 1} table rows at 80x24"
        keys = key_bar_text(app)
        assert len(keys) <= 80 - 2
        for shown in ("q Quit", "? Help", "e ", "d ", "/ ", "l ", "s ", "r ", "c ", "a "):
            assert shown in keys, f"{shown!r} missing from the footer: {keys!r}"
        await pilot.press("d")
        await until(pilot, lambda: detail.display and detail.size.height >= 8, what="the detail pane back")
        assert table.size.height - 1 >= 6
        await pilot.press("d")
        await until(pilot, lambda: not detail.display, what="the detail pane hidden again")


async def test_200x60_the_table_and_the_detail_grow_with_the_terminal(sample, monkeypatch):
    """Before: the detail pane kept its 14 lines and the table showed 7 rows over about 35 blank lines."""
    monkeypatch.chdir(sample)
    app = frozen_app(None, sample)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, select="running")
        screen = app.screen
        table, detail = screen.query_one(RunTable), screen.query_one(RunDetail)
        assert detail.display
        assert table.size.height - 1 >= 25, f"room for only {table.size.height - 1} rows at 200x60"
        assert detail.size.height >= 22, f"a detail pane of {detail.size.height} lines at 200x60"
        assert table.outer_size.height + detail.outer_size.height == 60 - 4  # header 2, message and keys 1 each: nothing else
        assert "s Stop" in key_bar_text(app) and "q Quit" in key_bar_text(app)


async def test_the_filter_box_names_its_keys_and_the_burn_says_it_is_of_the_filtered_runs(sample, monkeypatch):
    """Before: while a filter was typed the footer was blank (every screen key is a letter, typed
    into the box), and the header's burn, of the matching runs only, read as every run's."""
    from textual.widgets import Input

    from swarmkit.widgets.state_counts import StateCounts, summary_lines

    monkeypatch.chdir(sample)
    app = frozen_app(None, sample)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        screen = app.screen

        def header() -> str:
            return summary_lines(screen.query_one(StateCounts).summary)[0].plain

        assert " burn $" in header(), header()
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(screen.focused, Input), what="the filter box")
        keys = key_bar_text(app)
        assert "Keep filter" in keys and "Clear filter" in keys and "s Stop" not in keys, keys
        await pilot.press(*"running")
        await until(pilot, lambda: "burn of the filtered $" in header(), what="the burn named as the filtered runs'")
        await pilot.press("escape")
        await until(pilot, lambda: " burn $" in header() and "s Stop" in key_bar_text(app), what="the filter cleared")
