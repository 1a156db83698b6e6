"""Names, node names, log lines, errors and actors with markup and escape sequences: shown literally, never live."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

from console_helpers import HOSTILE_ACTOR, HOSTILE_FLOW, HOSTILE_LINES, HOSTILE_NODE, add_hostile_run, dialog_up, first_poll, until

from swarmkit.console.app import make_app
from swarmkit.console.log_screen import LogScreen
from swarmkit.widgets.log_tail import LogTail, line_text
from swarmkit.widgets.run_detail import RunDetail, detail_text
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.safe_text import safe
from tests.conftest import ROOT, child_env


def inert(text: str) -> bool:
    return not any((ord(c) < 0x20 and c not in "\n") or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066" for c in text)


async def test_hostile_text_is_shown_literally_and_stays_dead(sqlite_url, workspace, fast_env):
    run = await add_hostile_run(sqlite_url, workspace)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: table.row_for(run), what="the hostile row")
        flow_cell = table.get_cell(run, "flow").plain
        assert flow_cell == safe(HOSTILE_FLOW, 32)
        assert flow_cell.startswith("[@click=app.quit]x[/] [link=")
        assert table.get_cell(run, "node").plain.startswith("1/1 [b]node[/b] ␛[6n")
        assert table.get_cell(run, "requested_by").plain.startswith("stop: [red]mallory[/red]␛[2J")
        for column in ("flow", "node", "requested_by"):
            cell = table.get_cell(run, column)
            assert inert(cell.plain) and not cell.spans  # no style came from the text
        # Clicking the cell that would hold a live `@click=app.quit` does nothing.
        await pilot.click(RunTable, offset=(14, 1))
        await pilot.pause(0.2)
        assert app.is_running
        # The detail pane: every fact literal and inert.
        await until(pilot, lambda: screen.query_one(RunDetail).data is not None and screen.query_one(RunDetail).data.sections, what="the detail")
        shown = detail_text(screen.query_one(RunDetail).data).plain
        assert "[@click=app.quit]x[/]" in shown and "[bold]boom[/] ␛[31mred" in shown and "[red]mallory[/red]␛[2J" in shown
        assert inert(shown)
        # The cancel dialog names the run: literally.
        await pilot.press("c")
        dialog = await dialog_up(pilot, "the dialog")
        body = str(dialog.query_one("#dialog-body").render())
        assert "[@click=app.quit]x[/]" in body and inert(body)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, what="back")
        # The log view: every line literal.
        await pilot.press("l")
        log_screen = await until(pilot, lambda: isinstance(app.screen, LogScreen) and app.screen.opened and app.screen, what="the log")
        rendered = [line_text(line).plain for line in log_screen.query_one(LogTail).lines]
        for raw in HOSTILE_LINES:
            assert any(safe(raw, tabs=True) in r for r in rendered), raw
        assert all(inert(r) for r in rendered)
        assert any("[b]node[/b]" in r for r in rendered)
        header = str(log_screen.query_one("#log-header").render())
        assert "[@click=app.quit]x[/]" in header and inert(header)
        await pilot.click(LogTail, offset=(30, 3))
        await pilot.pause(0.2)
        assert app.is_running
        svg = app.export_screenshot()
        assert "\x1b" not in svg and "\x9b" not in svg and "\x07" not in svg
        await pilot.press("escape")
        assert app.is_running


def test_the_real_console_on_a_terminal_writes_no_hostile_sequence(sqlite_url, workspace):
    run = asyncio.run(add_hostile_run(sqlite_url, workspace))
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarmkit.console.cli", "--poll", "0.2", "--store", sqlite_url, str(workspace)], cwd=ROOT,
        env=child_env({"TERM": "xterm-256color", "SWARMKIT_LEASE": "600"}),
        stdin=follower, stdout=follower, stderr=follower, close_fds=True, start_new_session=True,
    )
    os.close(follower)
    out = b""
    # Open the hostile run's log, back, quit: each key once what it waits for is on screen (the
    # run's row; the log's hostile line: under load the log view took longer than a fixed pause).
    keys = [(run[:8].encode(), b"l"), (b"evil.example", b"\x1b"), (None, b"q")]
    next_key_at = None
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                out += chunk
            if next_key_at is None and keys and (keys[0][0] is None or keys[0][0] in out):
                next_key_at = time.monotonic() + 1.0
            if next_key_at is not None and time.monotonic() >= next_key_at and keys:
                os.write(leader, keys.pop(0)[1])
                next_key_at = None
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert run[:8].encode() in out and b"evil.example" in out  # the log view was on screen
    assert b"\x1b]0;pwned-title" not in out and b"\x1b]8;;https://evil" not in out
    assert b"\x1b[6n" not in out and b"\x1b[2J" not in out[200:]  # (Textual may clear once at start)
    text = out.decode("utf-8", errors="replace")
    assert "\x9b" not in text and "\u202e" not in text
    # Textual's own pointer-shape OSC ends in BEL; no other BEL may reach the terminal.
    assert b"\x07" not in re.sub(rb"\x1b\]22;[a-z-]*\x07", b"", out)
    assert HOSTILE_ACTOR  # used above through the store
    assert HOSTILE_NODE and HOSTILE_FLOW
