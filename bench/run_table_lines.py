"""What the run table spends drawing a live row: `RunTable.render_line` for lines whose cells changed.

    python bench/run_table_lines.py [--rows 50] [--ticks 600] [--smoke]

A headless app holds one `RunTable` of `--rows` running runs. Each tick every
run's ages, usage and burn change (four cells of nine, as a live run's do
each second), and the 27 lines on screen are drawn again, as the compositor
asks after a poll. Prints the time per changed line (the best of three
batches: this machine's speed drifts within minutes) and the segments in a
drawn row (the compositor divides, styles and writes a line a segment at a
time).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import _benchlib as B
from textual.app import App, ComposeResult

from swarmkit.widgets.run_row import RunRow
from swarmkit.widgets.run_table import RunTable

SHOWN = 27  # table lines on screen at 160x50 (bench/console_render.py)


def live_row(i: int, tick: int) -> RunRow:
    return RunRow(
        key=f"k{i:04d}", short_id=f"{i:08x}", flow="triage-tickets", status="running", node="2/3 read",
        in_state=f"{tick}s", last_work=f"{tick % 3}s ago", requested_by="",
        usage=f"{1000 + 137 * tick:,} tok ${tick / 100:.2f}", burn=f"${tick % 7}.1/m", created_at=float(i),
    )


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RunTable()


async def measure(rows: int, ticks: int) -> tuple[float, int]:
    app = TableApp()
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(RunTable)
        table.show_rows([live_row(i, 0) for i in range(rows)])
        await pilot.pause()
        batches: list[float] = []
        spent, lines = 0.0, 0
        for tick in range(1, ticks + 1):
            table.show(None, {f"k{i:04d}": live_row(i, tick) for i in range(rows)})
            t0 = time.perf_counter()
            for y in range(1, SHOWN + 1):
                table.render_line(y)
            spent += time.perf_counter() - t0
            lines += SHOWN
            if tick % (ticks // 3) == 0:
                batches.append(spent / lines)
                spent, lines = 0.0, 0
        return min(batches), len(list(table.render_line(1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--ticks", type=int, default=600)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.ticks = 30, 30
    B.header("run table lines")
    per_line, segments = asyncio.run(measure(args.rows, max(3, args.ticks)))
    print(f"  a changed line drawn: {per_line * 1e6:.1f} us ({args.rows} live runs, {SHOWN} lines on screen, 4 of 9 cells changed)")
    print(f"  segments in a drawn row: {segments}")


if __name__ == "__main__":
    main()
