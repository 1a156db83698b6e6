"""Make the SVG screenshots in screenshots/ from the fixed sample store, with a frozen clock.

    python scripts/make_screenshots.py            # writes screenshots/*.svg

The same store and clock as the snapshot tests, so the pictures in the README
show exactly what the tests check.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swarmkit.console.app import make_app  # noqa: E402
from swarmkit.console.help_screen import HelpScreen  # noqa: E402
from swarmkit.console.log_screen import LogScreen  # noqa: E402
from swarmkit.widgets.confirm_dialog import ConfirmDialog  # noqa: E402
from swarmkit.widgets.run_detail import RunDetail  # noqa: E402
from swarmkit.widgets.run_table import RunTable  # noqa: E402
from tests.sample_store import FROZEN_NOW, build, run_id  # noqa: E402

SIZE = (150, 42)
OUT = ROOT / "screenshots"


async def until(pilot, predicate, what: str) -> None:
    for _ in range(500):
        if predicate():
            await pilot.pause(0.2)
            return
        await pilot.pause(0.02)
    raise SystemExit(f"make_screenshots: timed out waiting for {what}")


async def shot(
    ws: Path, name: str, *, select: str, keys: tuple[str, ...] = (), wait=None, read_only: bool = False,
    size: tuple[int, int] = SIZE, theme: str | None = None,
) -> Path:
    app = make_app(None, ws, clock=lambda: FROZEN_NOW, poll_interval=600, detect_lost=False, lease_s=15, read_only=read_only, theme=theme)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: getattr(app.screen, "polls", 0) >= 1, "the first poll")
        screen = app.screen
        assert screen.query_one(RunTable).select(run_id(select))
        if screen.query_one(RunDetail).display:  # hidden on a small terminal
            await until(pilot, lambda: (d := screen.query_one(RunDetail).data) is not None and d.sections and run_id(select)[:8] in d.title, "the detail")
        # The stopping run's ETA is read off the poll; until it is back its node cell is shorter.
        await until(pilot, lambda: "stops in" in screen.query_one(RunTable).get_cell(run_id("stopping"), "node").plain, "the stop ETA")
        if keys:
            await pilot.press(*keys)
        if wait is not None:
            await until(pilot, lambda: wait(app.screen), f"the {name} view")
        path = OUT / f"{name}.svg"
        app.save_screenshot(filename=path.name, path=str(OUT))
    return path


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swarmkit-shots-") as tmp:
        # The theme the operator chose last (kept in their config folder) stays out of the pictures.
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        await build(ws, FROZEN_NOW)
        os.chdir(ws)  # paths show as ./.swarmkit/..., the same on every machine
        made = [
            await shot(ws, "console-every-status", select="running"),
            await shot(ws, "cancel-dialog", select="running", keys=("c",), wait=lambda s: isinstance(s, ConfirmDialog)),
            await shot(ws, "log-view", select="running", keys=("l",), wait=lambda s: isinstance(s, LogScreen) and s.opened),
            await shot(ws, "read-only", select="deferred", read_only=True),
            await shot(ws, "help", select="queued", keys=("question_mark",), wait=lambda s: isinstance(s, HelpScreen)),
            await shot(ws, "small-terminal-80x24", select="stopping", size=(80, 24)),
            await shot(ws, "light-theme", select="stalled", theme="textual-light"),
            await shot(ws, "burn-and-stop-eta-200x60", select="stopping", size=(200, 60)),
        ]
        os.chdir(ROOT)
    for path in made:
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    asyncio.run(main())
