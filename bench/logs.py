"""The log view: the last page of a run with a million events, and how far the display trails a fast writer.

    python bench/logs.py [--events 1000000] [--reps 30] [--rate 10000] [--seconds 10] [--smoke]

1. A run with `--events` events (bulk inserts). Times: the read of the last
   page alone (`events_before`, as the log screen does it), and the log
   screen from the key that opens it to the first paint of its lines
   (in process, `App.run_test`), `--reps` times each.
2. A real `swarmkit worker` hosts a command agent that prints `--rate` lines a
   second for `--seconds`, each stamped with the time it was printed. The log
   screen follows it; for every line that reaches the screen, the lag is the
   time it was first painted less its stamp (print -> host -> store ->
   console -> screen). Also the lag to the line reaching the widget, and how
   many lines a second the store took in.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _benchlib as B

from swarmkit.console.app import make_app
from swarmkit.console.log_screen import PAGE, LogScreen
from swarmkit.console.main_screen import MainScreen
from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.queries import count_events, events_after, events_before, get_job
from swarmkit.widgets.log_tail import LogTail
from swarmkit.widgets.run_table import RunTable

LAST_PAGE_TARGET_MS = 200.0
LAG_TARGET_MS = 250.0
SIZE = (160, 50)
STAMP = re.compile(r"t=(\d+\.\d+)")

WRITER = """\
import sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
chunk = max(1, int(rate / 200))  # 200 bursts a second
out = sys.stdout
n = 0
start = time.time()
while True:
    now = time.time()
    if now - start >= seconds:
        break
    due = int((now - start) * rate)
    while n < due:
        for _ in range(min(chunk, due - n)):
            out.write(f"t={time.time():.6f} n={n} the agent reports progress on its task\\n")
            n += 1
        out.flush()
    time.sleep(0.005)
print(f"done {n}", file=sys.stderr)
"""


class _Hooks:
    """First paint of the log tail, and of each line, recorded by wrapping LogTail."""

    first_paint: float | None = None
    painted: dict[int, float] = {}
    appended: dict[int, float] = {}

    @classmethod
    def install(cls) -> None:
        render_line, append = LogTail.render_line, LogTail.append

        def hooked_render(self, y):
            strip = render_line(self, y)
            index = int(self.scroll_offset.y) + y
            if 0 <= index < len(self.lines):
                now = time.time()
                if cls.first_paint is None:
                    cls.first_paint = time.perf_counter()
                cls.painted.setdefault(self.lines[index].id, now)
            return strip

        def hooked_append(self, lines):
            now = time.time()
            for line in lines:
                cls.appended.setdefault(line.id, now)
            return append(self, lines)

        LogTail.render_line = hooked_render  # type: ignore[method-assign]
        LogTail.append = hooked_append  # type: ignore[method-assign]

    @classmethod
    def reset(cls) -> None:
        cls.first_paint = None
        cls.painted = {}
        cls.appended = {}


async def main_screen_ready(pilot, run_id: str) -> MainScreen:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        screen = pilot.app.screen
        if isinstance(screen, MainScreen) and screen.polls and screen.query_one(RunTable).row_for(run_id):
            return screen
        await pilot.pause(0.01)
    raise TimeoutError("the run never showed in the table")


async def open_log(pilot, screen: MainScreen, run_id: str) -> tuple[LogScreen, float]:
    """Open the run's log with the key an operator uses; the time to its first painted line."""
    assert screen.query_one(RunTable).select(run_id)
    await pilot.pause()
    _Hooks.reset()
    t0 = time.perf_counter()
    await pilot.press("l")
    deadline = time.monotonic() + 60
    while _Hooks.first_paint is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the log never painted")
        await asyncio.sleep(0.001)
    log_screen = pilot.app.screen
    assert isinstance(log_screen, LogScreen)
    return log_screen, (_Hooks.first_paint - t0) * 1000


async def last_page(url: str, ws: str, events: int, reps: int) -> None:
    store = await Store.open(url, ws)
    try:
        flow_path = Path(ws) / "quiet.toml"
        flow_path.write_text('name = "quiet"\n[[agents]]\nname = "read"\ncommand = "true"\n')
        job = await control.submit(store, load_flow(flow_path), {}, actor="bench")
    finally:
        await store.close()
    took = await B.add_events_bulk(url, ws, job.id, events)
    print(f"  {events:,} events for one run inserted in {took:.1f} s", flush=True)
    store = await Store.open(url, ws)
    try:
        async with store.read() as conn:
            assert await conn.run_sync(count_events, job.id) >= events
        query: list[float] = []
        for _ in range(reps * 3):
            t0 = time.perf_counter()
            async with store.read() as conn:
                page = await conn.run_sync(events_before, job.id, None, PAGE)
                await conn.run_sync(get_job, job.id)
            query.append((time.perf_counter() - t0) * 1000)
        assert len(page) == PAGE
    finally:
        await store.close()
    shown: list[float] = []
    app = make_app(url, ws, poll_interval=1.0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await main_screen_ready(pilot, job.id)
        for _ in range(reps):
            log_screen, ms = await open_log(pilot, screen, job.id)
            shown.append(ms)
            assert log_screen.query_one(LogTail).lines[-1].text.startswith(f"line {events - 1}:")
            await pilot.press("escape")
            await pilot.pause()
        await pilot.press("q")
    print(B.line("last page: the read alone (events_before)", query))
    print(B.line("last page: key to first painted line", shown, target=f"<= {LAST_PAGE_TARGET_MS:.0f} ms (p50)", ok=B.med(shown) <= LAST_PAGE_TARGET_MS))


async def follow_lag(url: str, ws: str, rate: float, seconds: float) -> None:
    flow_path = Path(ws) / "chatty.toml"
    writer = Path(ws) / "writer.py"
    writer.write_text(WRITER)
    flow_path.write_text(f'name = "chatty"\n[[agents]]\nname = "talk"\ncommand = "{sys.executable} {writer} {rate} {seconds}"\n')
    store = await Store.open(url, ws)
    try:
        job = await control.submit(store, load_flow(flow_path), {}, actor="bench")
    finally:
        await store.close()
    app = make_app(url, ws, poll_interval=1.0)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(B.ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    worker = None
    async with app.run_test(size=SIZE) as pilot:
        screen = await main_screen_ready(pilot, job.id)
        await open_log(pilot, screen, job.id)
        _Hooks.reset()
        worker = subprocess.Popen(
            [sys.executable, "-c", "import sys; from swarmkit.cli import main; sys.exit(main())", "worker", "--store", url, "--concurrency", "1", ws],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + seconds + 60
            while time.monotonic() < deadline:
                await pilot.pause(0.05)
                if await _status(url, ws, job.id) not in ("queued", "running"):
                    break
            await pilot.pause(2.0)  # the last lines reach the screen
        finally:
            worker.terminate()
            try:
                _, err = worker.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                _, err = worker.communicate()
        await pilot.press("q")
    store = await Store.open(url, ws)
    host_lag: list[float] = []
    after_host: list[float] = []
    try:
        async with store.read() as conn:
            stored = await conn.run_sync(count_events, job.id)
            row = await conn.run_sync(get_job, job.id)
            # The host stamps each line as it reads it (events.at): printed -> in the host's hands.
            for ev in await conn.run_sync(events_after, job.id, 0, 1_000_000):
                m = STAMP.search(ev.text)
                if m:
                    host_lag.append((ev.at.timestamp() - float(m.group(1))) * 1000)
                    if ev.id in _Hooks.appended:
                        after_host.append((_Hooks.appended[ev.id] - ev.at.timestamp()) * 1000)
    finally:
        await store.close()
    texts = _LineTexts.texts

    def lags(seen: dict[int, float]) -> list[float]:
        out = []
        for line_id, at in seen.items():
            m = STAMP.search(texts.get(line_id, ""))
            if m:
                out.append((at - float(m.group(1))) * 1000)
        return out

    append_lag, paint_lag = lags(_Hooks.appended), lags(_Hooks.painted)
    # Steady state: lines printed after the writer's first two seconds (the
    # view may have backed off to the poll interval while the run was quiet).
    first = min((float(m.group(1)) for t in texts.values() if (m := STAMP.search(t))), default=0.0)

    def steady(seen: dict[int, float]) -> list[float]:
        out = []
        for line_id, at in seen.items():
            m = STAMP.search(texts.get(line_id, ""))
            if m and float(m.group(1)) >= first + 2.0:
                out.append((at - float(m.group(1))) * 1000)
        return out

    print(f"  writer: {rate:,.0f} lines/s for {seconds:.0f} s; run ended {row.status if row else '?'}; {stored:,} events stored;"
          f" {len(append_lag):,} lines reached the log view, {len(paint_lag):,} were painted (the others scrolled by between two frames)")
    noise = [t for t in (err or "").splitlines() if "warning" in t.lower() or "error" in t.lower() or "Traceback" in t]
    if noise:
        print("  worker: " + " | ".join(noise[-3:])[-400:])
    print(B.line("lag: printed -> read by the host (events.at)", host_lag))
    print(B.line("lag: read by the host -> in the log widget", after_host))
    print(B.line("lag: printed -> in the log widget, all", append_lag))
    print(B.line("lag: printed -> painted on screen, all", paint_lag))
    append_steady, paint_steady = steady(_Hooks.appended), steady(_Hooks.painted)
    if paint_steady:
        print(B.line("lag: printed -> in the log widget, steady", append_steady))
        print(B.line("lag: printed -> painted on screen, steady", paint_steady, target=f"<= {LAG_TARGET_MS:.0f} ms (p99)", ok=B.pct(paint_steady, 99) <= LAG_TARGET_MS))


class _LineTexts:
    texts: dict[int, str] = {}

    @classmethod
    def install(cls) -> None:
        append = LogTail.append

        def hooked(self, lines):
            for line in lines:
                cls.texts[line.id] = line.text
            return append(self, lines)

        LogTail.append = hooked  # type: ignore[method-assign]


async def _status(url: str, ws: str, job_id: str) -> str | None:
    store = await Store.open(url, ws)
    try:
        async with store.read() as conn:
            job = await conn.run_sync(get_job, job_id)
        return job.status if job else None
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="0: skip the last-page part")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rate", type=float, default=10_000, help="0: skip the follow part")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    if args.smoke:
        args.events, args.reps, args.rate, args.seconds = 2_000, 2, 500, 1.0
    B.header(f"logs: {args.events:,} events; a writer of {args.rate:,.0f} lines/s")
    if os.environ.get("BENCH_GC_DEBUG"):
        import gc

        def gc_cb(phase, info, _t=[0.0]):  # noqa: B006  (a cell shared across calls)
            if phase == "start":
                _t[0] = time.perf_counter()
            elif info["generation"] == 2:
                print(f"  gc gen2: {(time.perf_counter() - _t[0]) * 1000:.1f} ms, collected {info['collected']}, frozen {gc.get_freeze_count()}", flush=True)
                if os.environ.get("BENCH_GC_DEBUG") == "2":
                    import collections
                    kinds = collections.Counter(type(o).__name__ for o in gc.get_objects(2))
                    print("   ", sum(kinds.values()), kinds.most_common(8), flush=True)

        gc.callbacks.append(gc_cb)
    _LineTexts.install()
    _Hooks.install()
    if args.events:
        with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite", ws) as url:
            asyncio.run(last_page(url, ws, args.events, args.reps))
    if args.rate:
        with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite", ws) as url:
            asyncio.run(follow_lag(url, ws, args.rate, args.seconds))


if __name__ == "__main__":
    main()
